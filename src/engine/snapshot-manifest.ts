// A snapshot directory's `manifest.json` (docs/engine.md, "Snapshot store"): what the engine knows about the VMM's
// `state` and `memory` files beside it. Its presence is what makes the snapshot exist.
import { chmod, lstat, readFile, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { Snapshot, SnapshotId } from '../api/schema.js';
import { writeFileAtomic } from './atomic-file.js';
import { LAYER_NAME } from './disk-layers.js';

export const MANIFEST_FILE = 'manifest.json';
export const MANIFEST_FORMAT = 1;
/** The VMM's files; a snapshot missing either cannot be restored. */
export const VMM_FILES = ['state', 'memory'] as const;

export const Manifest = Snapshot.omit({ diskBytes: true }).extend({
  format: z.literal(MANIFEST_FORMAT),
  /** A base snapshot's key: the hash of its Smolfile's guest-relevant keys, kernel and root disk image. */
  baseKey: z.string().min(1).optional(),
  /**
   * The disk layers this snapshot owns, file names in SMOL_HOME/disks (docs/engine.md, "Disks"): the layer its
   * checkpoint froze, and for a fork point the one the fork froze above it. Absent for a VM without a disk.
   */
  diskLayers: z.array(z.string().regex(LAYER_NAME, 'a layer file name')).optional(),
  /** The snapshot owning the layer below this one's first disk layer: its disk chain goes on there (null: the base). */
  diskParent: SnapshotId.nullable().optional(),
  /**
   * Its VM's writable disks, by device (docs/disks.md, "Volumes"), when it had writable volumes: `virtio-blk` and
   * `virtio-blk-N`; a restore gives each a new layer. Their frozen layers are in diskLayers, the root disk's first.
   * Absent: `virtio-blk` alone when there are diskLayers.
   */
  diskDevices: z
    .array(z.enum(['virtio-blk', 'virtio-blk-1', 'virtio-blk-2', 'virtio-blk-3', 'virtio-blk-4']))
    .optional(),
  /** Images its VM's read-only volumes use as they are (file names in SMOL_HOME/images): kept while it is. */
  volumeImages: z.array(z.string().regex(/^volume-[0-9a-f]{16}\.ext4$/, 'a volume image name')).optional(),
});
export type Manifest = z.infer<typeof Manifest>;

export type ManifestRead = { manifest: Manifest } | { problem: string };

/** Reads and checks `dir/manifest.json`, which must describe snapshot `id`; never throws for a bad file. */
export async function readManifest(dir: string, id: string): Promise<ManifestRead> {
  let text: string;
  try {
    text = await readFile(path.join(dir, MANIFEST_FILE), 'utf8');
  } catch (error) {
    return { problem: `its manifest cannot be read (${(error as NodeJS.ErrnoException).code ?? error})` };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { problem: `its manifest is not JSON (${(error as Error).message})` };
  }
  const format = (json as { format?: unknown } | null)?.format;
  if (typeof format === 'number' && format > MANIFEST_FORMAT) {
    return { problem: `its manifest has format ${format}, newer than this Smol reads (${MANIFEST_FORMAT})` };
  }
  const parsed = Manifest.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { problem: `its manifest is invalid: ${issue.path.join('.') || '(top)'}: ${issue.message}` };
  }
  if (parsed.data.id !== id) return { problem: `its manifest describes ${parsed.data.id}, not ${id}` };
  return { manifest: parsed.data };
}

/** Writes `dir/manifest.json` atomically (checked first, so a bad manifest is never published). */
export async function writeManifest(dir: string, manifest: Manifest): Promise<void> {
  const checked = Manifest.parse(manifest);
  await writeFileAtomic(path.join(dir, MANIFEST_FILE), JSON.stringify(checked, null, 2) + '\n');
}

/** The names of the VMM files missing from `dir`. */
export async function missingVmmFiles(dir: string): Promise<string[]> {
  const missing: string[] = [];
  for (const name of VMM_FILES) {
    const stat = await lstat(path.join(dir, name)).catch(() => null);
    if (!stat?.isFile()) missing.push(name);
  }
  return missing;
}

/** Bytes the files in `dir` take on disk (st_blocks × 512): holes in a sparse memory layer cost nothing. */
export async function allocatedBytes(dir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(dir).catch(() => [])) {
    const stat = await lstat(path.join(dir, name)).catch(() => null);
    if (stat?.isFile()) total += stat.blocks * 512;
  }
  return total;
}

/** A published snapshot as the store holds it. */
export interface StoredSnapshot {
  manifest: Manifest;
  createdMs: number;
  /** allocatedBytes() of its directory plus its disk layers, measured whenever its manifest was read or written. */
  diskBytes: number;
}

export async function storedSnapshot(dir: string, manifest: Manifest, disksDir: string): Promise<StoredSnapshot> {
  let diskBytes = await allocatedBytes(dir);
  for (const name of manifest.diskLayers ?? []) {
    const stat = await lstat(path.join(disksDir, name)).catch(() => null);
    if (stat?.isFile()) diskBytes += stat.blocks * 512;
  }
  return { manifest, createdMs: Date.parse(manifest.created) || 0, diskBytes };
}

/** Removes a snapshot directory, read-only files and all. */
export async function removeSnapshotDir(dir: string): Promise<void> {
  await chmod(dir, 0o755).catch(() => undefined); // unlinking needs a writable directory; the files may stay 0444
  await rm(dir, { recursive: true, force: true });
}
