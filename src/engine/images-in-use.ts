// Which snapshots and VMs need an image (docs/images.md, "In use"): a snapshot's disk layers sit on the engine's
// copy of its root disk image (SMOL_HOME/images/<name>.ext4), a live VM's own layer too, and a snapshot names the
// read-only volume images it uses as they are. `smol image ls`, the API and the UI show these; rm refuses an image
// that has any, and prune keeps it.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { DISKS_DIR, IMAGES_DIR, LAYER_NAME, layersBelow, readLayerHeader } from './disk-layers.js';

/** Something that keeps an image: a snapshot (with its episode and name), or a disk layer no snapshot owns. */
export interface ImageUser {
  /** null: a layer no snapshot owns, a running or suspended VM's own. */
  snapshot: string | null;
  episode: string | null;
  name: string | null;
  /** The layer over the image (null for a read-only volume's image, which a snapshot names). */
  layer: string | null;
}

interface ManifestPart {
  id?: unknown;
  episode?: unknown;
  name?: unknown;
  diskLayers?: unknown;
  volumeImages?: unknown;
}

const text = (value: unknown) => (typeof value === 'string' ? value : null);

/** The image file (a name in SMOL_HOME/images) at the bottom of the chain under a layer, or null. */
async function imageUnder(home: string, layer: string): Promise<string | null> {
  const disks = path.join(home, DISKS_DIR);
  let bottom = layer;
  for await (const below of layersBelow(path.join(disks, layer), disks)) bottom = below;
  const header = await readLayerHeader(path.join(disks, bottom));
  if (!header || path.dirname(header.below) !== path.join(home, IMAGES_DIR)) return null;
  return path.basename(header.below);
}

/** Every image in SMOL_HOME/images something needs, by file name (`oci-<hash>.ext4`), with what needs it. */
export async function imageUsers(home: string): Promise<Map<string, ImageUser[]>> {
  const users = new Map<string, ImageUser[]>();
  const add = (image: string, user: ImageUser) => {
    const list = users.get(image) ?? [];
    if (!list.some((u) => u.snapshot !== null && u.snapshot === user.snapshot)) list.push(user);
    users.set(image, list);
  };
  const owned = new Set<string>();
  const snapshots = path.join(home, 'snapshots');
  for (const id of existsSync(snapshots) ? readdirSync(snapshots).sort() : []) {
    let manifest: ManifestPart;
    try {
      manifest = JSON.parse(readFileSync(path.join(snapshots, id, 'manifest.json'), 'utf8')) as ManifestPart;
    } catch {
      continue; // not a snapshot, or one without a readable manifest: it names nothing
    }
    const who = { snapshot: text(manifest.id) ?? id, episode: text(manifest.episode), name: text(manifest.name) };
    const layers = Array.isArray(manifest.diskLayers) ? manifest.diskLayers.map(String) : [];
    for (const layer of layers) {
      owned.add(layer);
      const image = await imageUnder(home, layer);
      if (image) add(image, { ...who, layer });
    }
    if (Array.isArray(manifest.volumeImages)) {
      for (const image of manifest.volumeImages) add(String(image), { ...who, layer: null });
    }
  }
  const disks = path.join(home, DISKS_DIR);
  for (const layer of existsSync(disks) ? readdirSync(disks).sort() : []) {
    if (!LAYER_NAME.test(layer) || owned.has(layer)) continue;
    const image = await imageUnder(home, layer);
    if (image) add(image, { snapshot: null, episode: null, name: null, layer });
  }
  return users;
}

/** What needs an image, in words: `snapshot "before" (sn-…) of episode ep-…, a VM's disk layer …`. */
export function describeUsers(users: ImageUser[]): string {
  return users
    .map((user) =>
      user.snapshot
        ? `snapshot ${user.name ? `"${user.name}" ` : ''}(${user.snapshot})${user.episode ? ` of episode ${user.episode}` : ''}`
        : `a VM's disk layer ${user.layer}`,
    )
    .join(', ');
}
