// Tier 3: virtio-blk on a disk layer chain and virtio-rng, seen from a real Linux guest (docs/disks.md). One boot:
// the guest finds /dev/vda and /dev/hwrng, writes to the disk, is checkpointed (its disk layer frozen), restored, and
// forked; each VM writes to its own layer. Reads go through `drop_caches` first, so they come from the disk, not from
// the guest's page cache (which a snapshot carries in RAM).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Vm } from '../../src/vmm/vm.js';
import { attachLinux, bootLinux, type LinuxGuest } from './linux-guest.js';

const work = mkdtempSync(path.join(tmpdir(), 'smol-linux-disks-'));
const vms: Vm[] = [];
afterAll(async () => {
  await Promise.all(vms.filter((vm) => vm.state !== 'exited').map((vm) => vm.kill()));
  rmSync(work, { recursive: true, force: true });
});

const SECTORS = 32768; // a 16 MiB base image
const BASE_MARK = 'base-image-sector-2048';

/** The base image: zeros, with a marker at sector 2048 that every layer above shows through. */
function makeBase(dir: string): string {
  const base = path.join(dir, 'base.img');
  const data = Buffer.alloc(SECTORS * 512);
  data.write(BASE_MARK, 2048 * 512);
  writeFileSync(base, data);
  return base;
}

/**
 * Writes the whole sector `sector` of /dev/vda: `text`, then zeros. Waits until the disk has it (fsync: a FLUSH
 * request).
 */
async function writeSector(guest: LinuxGuest, sector: number, text: string): Promise<void> {
  const out = await guest.run(
    `{ printf '%s' '${text}'; head -c 512 /dev/zero; } | head -c 512 | ` +
      `dd of=/dev/vda bs=512 seek=${sector} count=1 conv=notrunc,fsync 2>&1`,
  );
  expect(out).toMatch(/records out/);
}

/** What the disk holds at `sector` (printable text up to the first NUL), bypassing the guest's page cache. */
async function readSector(guest: LinuxGuest, sector: number): Promise<string> {
  const out = await guest.run(
    `echo 3 > /proc/sys/vm/drop_caches; dd if=/dev/vda bs=512 skip=${sector} count=1 2>/dev/null | tr -d '\\000'; echo '|'`,
  );
  return out.replace(/\|\n$/, '');
}

describe('disks and devices in a Linux guest', () => {
  it('sees /dev/vda and /dev/hwrng; disk writes survive a checkpoint and restore; forks write their own layers', async () => {
    // A directory of its own: inside the lab a failed test is tried again, and layers are never overwritten.
    const dir = mkdtempSync(path.join(work, 'attempt-'));
    const at = (name: string) => path.join(dir, name);
    const base = makeBase(dir);
    const parent = await bootLinux({ disk: { base, top: at('top-0') }, rng: true });
    vms.push(parent.vm);

    // The devices: a disk of the base's size, and an entropy source that gives bytes.
    expect(await parent.run('cat /sys/block/vda/size')).toBe(`${SECTORS}\n`);
    expect(await parent.run('cat /sys/block/vda/ro')).toBe('0\n');
    expect(await parent.run('cat /sys/class/misc/hw_random/rng_current')).toMatch(/^virtio_rng/);
    const random = await parent.run('dd if=/dev/hwrng bs=32 count=1 2>/dev/null | od -An -tx1 | tr -d " \\n"; echo');
    expect(random.trim()).toMatch(/^[0-9a-f]{64}$/);
    expect(random.trim()).not.toBe('0'.repeat(64));

    // Reads fall through to the base; writes land in the VM's layer.
    expect(await readSector(parent, 2048)).toBe(BASE_MARK);
    await writeSector(parent, 4096, 'written-before-checkpoint');
    expect(await readSector(parent, 4096)).toBe('written-before-checkpoint');

    // Checkpoint: the layer is frozen into the snapshot and the parent goes on with a new one.
    const info = await parent.vm.checkpoint(at('snap-1'), undefined, {
      resources: { 'virtio-blk': { path: at('top-1') } },
    });
    expect(info.disk).toBe(at('top-0'));
    await writeSector(parent, 4096, 'written-after-checkpoint');

    // Restore: the guest sees the disk as it was at the checkpoint, on a layer of its own.
    const restoredVm = await Vm.restore(at('snap-1'), { resources: { 'virtio-blk': { path: at('top-restored') } } });
    vms.push(restoredVm);
    const restored = attachLinux(restoredVm);
    restoredVm.start();
    expect(await restored.run('echo back')).toBe('back\n');
    expect(await readSector(restored, 4096)).toBe('written-before-checkpoint');
    expect(await readSector(restored, 2048)).toBe(BASE_MARK);
    await writeSector(restored, 5000, 'written-by-the-restored-vm');
    expect(await readSector(parent, 5000)).toBe('');
    expect(await restored.run('dd if=/dev/hwrng bs=8 count=1 2>/dev/null | od -An -tx1 | wc -w')).toBe('8\n');
    await restoredVm.kill();

    // Fork: the child starts from the parent's disk as it is now and writes only to its own layer.
    const [childVm] = await parent.vm.fork(1, {
      resources: { 'virtio-blk': { path: at('top-2') } },
      children: [{ 'virtio-blk': { path: at('top-child') } }],
    });
    vms.push(childVm!);
    const child = attachLinux(childVm!);
    expect(await child.run('echo child')).toBe('child\n');
    expect(await readSector(child, 4096)).toBe('written-after-checkpoint');
    await writeSector(child, 6000, 'written-by-the-child');
    await writeSector(parent, 7000, 'written-by-the-parent');
    expect(await readSector(parent, 6000)).toBe('');
    expect(await readSector(child, 7000)).toBe('');
    expect(await readSector(child, 6000)).toBe('written-by-the-child');
    expect(await readSector(parent, 7000)).toBe('written-by-the-parent');

    // A snapshot whose disk needs a new layer is refused without one, saying what is missing.
    await expect(Vm.restore(at('snap-1'))).rejects.toThrow(/needs a "virtio-blk" resource/);
  }, 600_000);
});
