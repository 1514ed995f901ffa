// The snapshot store's disk layers (docs/engine.md, "Disks"): which snapshot owns which layer file in
// SMOL_HOME/disks, what garbage collection keeps for a disk chain, and what the start-up sweep removes. The layer
// files here carry a header in the documented format (docs/disks.md) with the fields the engine reads; the VMM's
// own handling of layers is tested in native/tests/test_disk.c and, with a Linux guest, in tests/linux.
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { adoptBaseImage, readLayerHeader } from './disk-layers.js';
import { SnapshotStore } from './snapshot-store.js';

const EP = 'ep-aaaaaaaaaa';
const VM = 'vm-aaaaaaaaaa';

let home: string;
let logged: string[];
let store: SnapshotStore;

beforeEach(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'smol-store-disks-'));
  logged = [];
  store = await SnapshotStore.open(home, (line) => logged.push(line));
});

afterEach(() => rmSync(home, { recursive: true, force: true }));

const reopen = async () => (store = await SnapshotStore.open(home, (line) => logged.push(line)));
const disks = () => readdirSync(path.join(home, 'disks')).sort();

/** A layer file's header as the VMM writes it: magic, version, sizes, flags, and the path of what is below. */
function writeLayer(file: string, below: string, { frozen = false, data = 0 } = {}): void {
  const header = Buffer.alloc(4096 + data);
  header.write('SMOLDISK', 0, 'latin1');
  header.writeUInt32LE(1, 8);
  header.writeUInt32LE(4096, 12);
  header.writeUInt32LE(65536, 16);
  header.writeUInt32LE(frozen ? 1 : 0, 20);
  header.writeBigUInt64LE(1n << 30n, 24);
  header.writeUInt32LE(Buffer.byteLength(below), 88);
  header.write(below, 96, 'utf8');
  writeFileSync(file, header);
  if (frozen) chmodSync(file, 0o444);
}

/**
 * A checkpoint of a VM with a disk, as the engine and VMM make one: `top` (the layer the VM wrote) is frozen into the
 * snapshot, and the VM goes on with a new layer over it, which is returned.
 */
async function checkpoint(top: string, layerParent: string | null = null, parent: string | null = null) {
  const id = store.newSnapshotId();
  const dir = store.dirFor(id);
  const partial = `${dir}.partial-${process.pid}`;
  mkdirSync(partial);
  writeFileSync(path.join(partial, 'state'), 'state');
  writeFileSync(path.join(partial, 'memory'), 'memory');
  renameSync(partial, dir);
  const below = (await readLayerHeader(top))!.below;
  writeLayer(top, below, { frozen: true, data: 65536 });
  const next = store.newDiskLayer();
  writeLayer(next, top);
  const snapshot = await store.publish({
    id,
    episode: EP,
    parent,
    vm: VM,
    kind: 'manual',
    layerParentDir: layerParent ? store.dirFor(layerParent) : null,
    memoryBytes: 1 << 20,
    cpus: 1,
    diskLayer: top,
  });
  return { snapshot, next };
}

/** A VM's first layer, over a raw base image. */
function firstTop(): string {
  const base = path.join(home, 'base.img');
  writeFileSync(base, Buffer.alloc(4096));
  const top = store.newDiskLayer();
  writeLayer(top, base);
  return top;
}

describe('disk layers in the snapshot store', () => {
  it('new layers are files of their own in SMOL_HOME/disks', () => {
    const a = store.newDiskLayer();
    const b = store.newDiskLayer();
    expect(path.dirname(a)).toBe(path.dirname(b));
    expect(path.basename(path.dirname(a))).toBe('disks');
    expect(a).not.toBe(b);
    expect(path.basename(a)).toMatch(/^[0-9a-f]{20}\.layer$/);
  });

  it('a snapshot owns the layer its checkpoint froze: counted in its size, named in its manifest, not in the API', async () => {
    const top = firstTop();
    const { snapshot } = await checkpoint(top);
    expect(store.hasDisk(snapshot.id)).toBe(true);
    expect(snapshot.diskBytes).toBeGreaterThanOrEqual(65536);
    expect(snapshot).not.toHaveProperty('diskLayers');
    await reopen();
    expect(store.get(snapshot.id)!.diskBytes).toBe(snapshot.diskBytes);
    expect(store.hasDisk(snapshot.id)).toBe(true);
  });

  it('a layer that is not in SMOL_HOME/disks is refused, and the snapshot is not published', async () => {
    const stray = path.join(home, 'elsewhere.layer');
    writeLayer(stray, path.join(home, 'base.img'));
    const id = store.newSnapshotId();
    mkdirSync(store.dirFor(id));
    writeFileSync(path.join(store.dirFor(id), 'state'), 'state');
    writeFileSync(path.join(store.dirFor(id), 'memory'), 'memory');
    const publish = store.publish({
      id,
      episode: EP,
      parent: null,
      vm: VM,
      kind: 'manual',
      layerParentDir: null,
      memoryBytes: 1 << 20,
      cpus: 1,
      diskLayer: stray,
    });
    await expect(publish).rejects.toThrow(/is not a disk layer of this store/);
    expect(store.get(id)).toBeUndefined();
    expect(existsSync(store.dirFor(id))).toBe(false);
  });

  it('a deleted snapshot keeps its layer while a later snapshot’s disk sits on it, even with no memory link', async () => {
    const { snapshot: first, next } = await checkpoint(firstTop());
    // A full memory layer (no layerParent): only the disk chain ties the second snapshot to the first.
    const { snapshot: second, next: live } = await checkpoint(next, null, first.id);
    await store.delete(first.id);
    expect((await store.gc([])).removed).toEqual([]);
    expect(disks()).toContain(path.basename(next));
    await store.delete(second.id);
    const { removed } = await store.gc([]);
    expect(removed.sort()).toEqual([first.id, second.id].sort());
    // What is left is the layer the VM writes now, which its instance owns (the store never removes it).
    expect(disks()).toEqual([path.basename(live)]);
  });

  it('once a snapshot’s layer is flattened onto the base, the snapshots below it can go', async () => {
    const { snapshot: first, next } = await checkpoint(firstTop());
    const { snapshot: second } = await checkpoint(next, null, first.id);
    await store.delete(first.id);
    expect((await store.gc([])).removed).toEqual([]);
    await store.setDiskParent(second.id, null); // what the engine does after the vmhost flattened it
    expect((await store.gc([])).removed).toEqual([first.id]);
    expect(store.hasDisk(second.id)).toBe(true);
  });

  it('a fork point owns the layer the fork froze as well, and frees both with its files', async () => {
    const { snapshot: point, next: parentTop } = await checkpoint(firstTop());
    writeLayer(parentTop, (await readLayerHeader(parentTop))!.below, { frozen: true });
    await store.addDiskLayers(point.id, [parentTop]);
    const child = store.newDiskLayer();
    writeLayer(child, parentTop);
    // The child's next checkpoint sits on the fork's layer, which the fork point owns.
    const { snapshot: childSnap } = await checkpoint(child, point.id, point.id);
    await store.delete(point.id);
    expect((await store.gc([])).removed).toEqual([]);
    await store.delete(childSnap.id);
    await store.gc([]);
    expect(disks().filter((name) => name === path.basename(parentTop))).toEqual([]);
  });

  it('a layer no snapshot owned (a checkpoint that failed after freezing it) goes to the next snapshot on it', async () => {
    const { snapshot: first, next: failedTop } = await checkpoint(firstTop());
    // The checkpoint froze `failedTop` and then failed: no snapshot owns it; the VM went on with `top`.
    writeLayer(failedTop, (await readLayerHeader(failedTop))!.below, { frozen: true });
    const top = store.newDiskLayer();
    writeLayer(top, failedTop);
    const { snapshot: second } = await checkpoint(top, null, first.id);
    expect(logged.some((line) => line.includes('which no snapshot owned'))).toBe(true);
    // The first snapshot stays while the second's disk needs it, and the unowned layer goes with the second.
    await store.delete(first.id);
    expect((await store.gc([])).removed).toEqual([]);
    await store.delete(second.id);
    expect((await store.gc([])).removed.sort()).toEqual([first.id, second.id].sort());
    expect(disks()).not.toContain(path.basename(failedTop));
    expect(disks()).not.toContain(path.basename(top));
  });

  it('at start-up, writable layers no snapshot needs go (their VMs ended with the engine); owned ones stay', async () => {
    const { snapshot, next } = await checkpoint(firstTop());
    const orphan = store.newDiskLayer();
    writeLayer(orphan, next);
    writeFileSync(path.join(home, 'disks', 'notes.txt'), 'a file a person put here');
    await reopen();
    expect(disks()).not.toContain(path.basename(next));
    expect(disks()).not.toContain(path.basename(orphan));
    expect(disks()).toContain('notes.txt');
    expect(store.hasDisk(snapshot.id)).toBe(true);
    expect(logged.some((line) => /removed disk layer .* a VM that ended/.test(line))).toBe(true);
  });

  it('at start-up, a frozen layer below an owned one stays even when no snapshot names it', async () => {
    const top = firstTop();
    // A checkpoint that froze `top` but was never published; the next one was.
    const below = (await readLayerHeader(top))!.below;
    writeLayer(top, below, { frozen: true });
    const next = store.newDiskLayer();
    writeLayer(next, top);
    const { snapshot } = await checkpoint(next);
    const unowned = store.newDiskLayer();
    writeLayer(unowned, below, { frozen: true });
    await reopen();
    expect(disks()).toContain(path.basename(top));
    expect(disks()).not.toContain(path.basename(unowned));
    expect(store.hasDisk(snapshot.id)).toBe(true);
    expect(logged.some((line) => /frozen by a checkpoint that was never published/.test(line))).toBe(true);
  });

  it('at start-up, an unowned frozen layer is kept while a snapshot set aside as corrupt might name it', async () => {
    mkdirSync(path.join(home, 'snapshots', 'sn-aaaaaaaaaa.corrupt'));
    const unowned = store.newDiskLayer();
    writeLayer(unowned, path.join(home, 'base.img'), { frozen: true });
    await reopen();
    expect(disks()).toContain(path.basename(unowned));
    expect(logged.some((line) => /kept disk layer/.test(line))).toBe(true);
  });

  it('a VM with volumes: its snapshot owns every disk it froze, names its writable disks and read-only images', async () => {
    const root = firstTop();
    const image = path.join(home, 'images', 'volume-0123456789abcdef.ext4');
    mkdirSync(path.dirname(image), { recursive: true });
    writeFileSync(image, Buffer.alloc(4096));
    const volume = store.newDiskLayer();
    writeLayer(volume, path.join(home, 'volume.img'));
    writeLayer(volume, path.join(home, 'volume.img'), { frozen: true, data: 65536 });
    const id = store.newSnapshotId();
    mkdirSync(store.dirFor(id));
    writeFileSync(path.join(store.dirFor(id), 'state'), 'state');
    writeFileSync(path.join(store.dirFor(id), 'memory'), 'memory');
    writeLayer(root, path.join(home, 'base.img'), { frozen: true });
    const snapshot = await store.publish({
      id,
      episode: EP,
      parent: null,
      vm: VM,
      kind: 'manual',
      layerParentDir: null,
      memoryBytes: 1 << 20,
      cpus: 1,
      diskLayer: root,
      volumeLayers: { 'virtio-blk-1': volume },
      volumeImages: [image],
    });
    expect(snapshot).not.toHaveProperty('diskDevices');
    expect(snapshot).not.toHaveProperty('volumeImages');
    await reopen();
    expect(store.diskDevices(id)).toEqual(['virtio-blk', 'virtio-blk-1']);
    expect(store.volumeImages(id)).toEqual([image]);
    expect(store.get(id)!.diskBytes).toBeGreaterThanOrEqual(65536);
    // Deleted and collected, it frees the volume's layer with the root disk's.
    await store.delete(id);
    expect((await store.gc([])).removed).toEqual([id]);
    expect(disks()).toEqual([]);
  });

  it('a VM without volumes has the root disk alone as its writable disk', async () => {
    const { snapshot } = await checkpoint(firstTop());
    expect(store.diskDevices(snapshot.id)).toEqual(['virtio-blk']);
    expect(store.volumeImages(snapshot.id)).toEqual([]);
  });

  it('a base image is adopted into SMOL_HOME/images once, read-only, and found there again', async () => {
    const cache = mkdtempSync(path.join(os.tmpdir(), 'smol-image-cache-'));
    try {
      const image = path.join(cache, 'rootfs-0123456789abcdef.ext4');
      writeFileSync(image, 'ext4 image');
      const adopted = await adoptBaseImage(home, image);
      expect(adopted).toBe(path.join(home, 'images', 'rootfs-0123456789abcdef.ext4'));
      rmSync(image, { force: true }); // the guest cache pruned it: the engine's copy stays
      expect(await adoptBaseImage(home, image)).toBe(adopted);
      expect(readdirSync(path.join(home, 'images'))).toEqual(['rootfs-0123456789abcdef.ext4']);
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  });

  it('a base image on another file system is copied, sparse and read-only', async () => {
    // /dev/shm is a tmpfs of its own mount: link() from it to the home gives EXDEV, as from a cache on another disk.
    const cache = mkdtempSync(path.join('/dev/shm', 'smol-image-cache-'));
    try {
      expect(statSync(cache).dev).not.toBe(statSync(home).dev);
      const image = path.join(cache, 'oci-0123456789abcdef.ext4');
      const size = 256 << 20;
      writeFileSync(image, 'superblock');
      truncateSync(image, size);
      const adopted = await adoptBaseImage(home, image);
      const copy = statSync(adopted);
      expect(copy.size).toBe(size);
      expect(copy.blocks * 512).toBeLessThan(1 << 20); // the 256 MiB of zeros stayed a hole
      expect(copy.mode & 0o777).toBe(0o444);
      expect(readFileSync(adopted).subarray(0, 10).toString()).toBe('superblock');
      expect(readdirSync(path.join(home, 'images'))).toEqual(['oci-0123456789abcdef.ext4']);
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  });
});
