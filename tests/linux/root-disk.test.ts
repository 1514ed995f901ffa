// Tier 3: the builtin image's root disk through the engine (docs/engine.md, "Disks"): / is ext4 on /dev/vda, the
// Smolfile's init wrote to it once, and what a VM writes there survives a checkpoint and restore, a stop and start and
// an engine restart, while forks write apart. Reads go through `drop_caches` first, so they come from the disk
// layers, not from the page cache a snapshot carries in the guest's RAM. The layer files in SMOL_HOME/disks follow
// the VMs and snapshots: what nothing owns any more is gone.
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainDepth } from '../../src/engine/disk-layers.js';
import type { Snapshot } from '../../src/api/schema.js';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome, eventually, root } from '../engine/engine-home.js';

// Disk chains are flattened from 4 layers on here (16 by default), so every test below runs over flattened layers.
process.env.SMOL_DISK_FLATTEN_DEPTH = '4'; // the engine this file starts inherits it
const home = new EngineHome();
afterAll(() => home.destroy(), 180_000);
const shell = path.join(root, 'smolfiles', 'shell.smolfile');
const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');
const layers = () => readdirSync(path.join(home.dir, 'disks')).filter((name) => name.endsWith('.layer'));

describe('the root disk of the builtin image, through the engine', () => {
  let smol: Smol;
  let vm: string;
  let episode: string;
  const data = randomBytes(4 << 20);

  /** Runs a shell command in the VM; fails on a non-zero status. */
  const sh = async (target: string, script: string) => {
    const result = await smol.exec(target, ['sh', '-c', script]);
    expect(result.exitCode, `${script}: ${result.stderr.toString()}`).toBe(0);
    return result.stdout.toString();
  };
  /** What the disk holds (the page cache dropped first). */
  const fromDisk = (target: string, script: string) => sh(target, `sync; echo 3 > /proc/sys/vm/drop_caches; ${script}`);

  beforeAll(async () => {
    smol = await home.client();
    const created = await smol.up(shell, { name: 'disk' });
    vm = created.vm.id;
    episode = created.episode.id;
  }, 600_000);

  it('boots with / on /dev/vda (ext4, read-write) holding what init wrote there once', async () => {
    // The kernel names the root device /dev/root in /proc/mounts: its label says it is the image on /dev/vda.
    expect(await sh(vm, "grep ' / ' /proc/mounts")).toMatch(/^\S+ \/ ext4 rw/);
    expect(await sh(vm, 'findfs LABEL=smol-root')).toBe('/dev/vda\n');
    expect(await fromDisk(vm, 'cat /work/hello.txt')).toBe('made by init\n');
    expect(readdirSync(path.join(home.dir, 'images'))).toEqual([expect.stringMatching(/^rootfs-[0-9a-f]+\.ext4$/)]);
  }, 300_000);

  it('keeps what was written across a checkpoint and restore, and drops what came after', async () => {
    await smol.writeFile(vm, '/work/data.bin', data);
    const snapshot = await smol.checkpoint(vm, { name: 'with-data' });
    await sh(vm, 'echo changed > /work/data.bin; echo new > /work/later.txt; sync');
    await smol.restore(vm, snapshot.id);
    expect((await fromDisk(vm, 'sha256sum /work/data.bin')).split(' ')[0]).toBe(sha256(data));
    expect(await sh(vm, 'ls /work')).toBe('data.bin\nhello.txt\n');
  }, 600_000);

  it('keeps it across a stop and start, and across an engine restart', async () => {
    await sh(vm, 'echo kept > /work/stopped.txt');
    await smol.stop(vm);
    await smol.start(vm);
    expect(await fromDisk(vm, 'cat /work/stopped.txt')).toBe('kept\n');

    const stopped = await home.smol(['engine', 'stop'], { timeoutMs: 300_000 });
    expect(stopped.status, stopped.stderr).toBe(0);
    smol = await home.client();
    await eventually(
      'the VM to be resumed',
      async () => ((await smol.vm(vm)).state === 'running' ? true : undefined),
      300_000,
    );
    expect(await fromDisk(vm, 'cat /work/stopped.txt; sha256sum /work/data.bin')).toBe(
      `kept\n${sha256(data)}  /work/data.bin\n`,
    );
  }, 900_000);

  it("gives every fork a disk of its own: the parent's and siblings' writes stay apart", async () => {
    const { children } = await smol.fork(vm, 2);
    await Promise.all(children.map((child, i) => sh(child.id, `echo child-${i} > /work/who; sync`)));
    await sh(vm, 'echo parent > /work/who; sync');
    for (const [i, child] of children.entries()) {
      expect(await fromDisk(child.id, 'cat /work/who; cat /work/stopped.txt')).toBe(`child-${i}\nkept\n`);
    }
    expect(await fromDisk(vm, 'cat /work/who')).toBe('parent\n');

    // Removing a child takes its layer (the one it wrote) with it; what the fork froze stays with the fork point.
    const before = layers();
    for (const child of children) await smol.removeVm(child.id);
    const after = layers();
    expect(after.length).toBe(before.length - 2);
    expect(before).toEqual(expect.arrayContaining(after));
  }, 900_000);

  it('keeps disk chains short however many checkpoints a VM takes (flattened), and every snapshot restores', async () => {
    const disks = path.join(home.dir, 'disks');
    /** The depth of the disk chain under a snapshot's own layer, from its manifest and the layers' headers. */
    const depthOf = async (id: string) => {
      const manifest = JSON.parse(readFileSync(path.join(home.dir, 'snapshots', id, 'manifest.json'), 'utf8'));
      return chainDepth(path.join(disks, (manifest as { diskLayers: string[] }).diskLayers[0]!), disks);
    };
    const taken: Snapshot[] = [];
    for (let i = 1; i <= 10; i++) {
      await sh(vm, `echo ${i} > /work/count`);
      taken.push(await smol.checkpoint(vm, { name: `count-${i}` }));
    }
    // Flattening runs in the background after a checkpoint: the newest snapshots' chains come down to a few.
    await eventually('the chains to be flattened', async () => {
      const depths = await Promise.all(taken.map((s) => depthOf(s.id)));
      return depths.every((depth) => depth <= 4) ? depths : undefined;
    });
    for (const i of [3, 10]) {
      await smol.restore(vm, taken[i - 1]!.id);
      expect(await fromDisk(vm, 'cat /work/count; sha256sum /work/data.bin')).toBe(
        `${i}\n${sha256(data)}  /work/data.bin\n`,
      );
    }
  }, 900_000);

  it('removes the layers nothing owns when the episode goes (the shared base’s stays)', async () => {
    expect(layers().length).toBeGreaterThan(1);
    await smol.destroy(episode);
    // Left: the layer of the episode's base snapshot (what init wrote), shared with every later episode of this
    // Smolfile, which start from it.
    expect(layers()).toHaveLength(1);
  }, 600_000);
});
