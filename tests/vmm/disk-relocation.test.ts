// A disk chain moved to another directory (src/engine/disk-relocation.ts, docs/smolmachine.md "Disks"): the state's
// virtio-blk path and each layer's path below rewritten under their CRCs, and the real VMM restores from the moved
// files with the originals gone. Tiny guests on this machine's KVM.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { crc64, relocateLayer, relocateState, stateDisks } from '../../src/engine/disk-relocation.js';
import { Vm } from '../../src/vmm/vm.js';
import { startGuest, watchConsole } from './guests.js';

const work = mkdtempSync(path.join(tmpdir(), 'smol-relocate-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('moving a disk chain', () => {
  it('computes CRC-64/XZ as xz does', () => {
    // The check value of the catalogue of CRC parameters for CRC-64/XZ.
    expect(crc64(Buffer.from('123456789')).toString(16)).toBe('995dc9bbdf1939fa');
  });

  it('restores from the moved chain, and not from the moved files left as they were', async () => {
    const from = path.join(work, 'from');
    mkdirSync(from);
    const base = path.join(from, 'base.img');
    writeFileSync(base, Buffer.alloc(1 << 20, 7));
    const guest = await startGuest('echo', { disk: { base, top: path.join(from, 'top-0') } });
    guest.vm.write('one ');
    await guest.waitFor(/one /);
    // Two checkpoints: the second state names top-1, whose header names top-0, whose header names the base.
    await guest.vm.checkpoint(path.join(from, 'snap-1'), undefined, {
      resources: { 'virtio-blk': { path: path.join(from, 'top-1') } },
    });
    const info = await guest.vm.checkpoint(path.join(from, 'snap-2'), undefined, {
      resources: { 'virtio-blk': { path: path.join(from, 'top-2') } },
    });
    await guest.vm.kill();
    const state = readFileSync(path.join(info.dir, 'state'));
    expect(stateDisks(state)).toEqual([{ device: 'virtio-blk', writable: true, path: path.join(from, 'top-1') }]);

    const to = path.join(work, 'elsewhere', 'a-longer-directory-name');
    // The second snapshot's memory is a layer over the first's, which it names by relative path.
    for (const snap of ['snap-1', 'snap-2']) {
      mkdirSync(path.join(to, snap), { recursive: true });
      for (const name of ['state', 'memory']) copyFileSync(path.join(from, snap, name), path.join(to, snap, name));
    }
    for (const name of ['base.img', 'top-0', 'top-1']) copyFileSync(path.join(from, name), path.join(to, name));
    renameSync(from, `${from}.gone`); // nothing may still read the old paths

    // Copied as they are, the state still names the old place.
    writeFileSync(path.join(to, 'snap-2', 'state'), state);
    await expect(
      Vm.restore(path.join(to, 'snap-2'), { resources: { 'virtio-blk': { path: path.join(to, 'top-r0') } } }),
    ).rejects.toThrow(/top-1/);

    const move = (old: string) => path.join(to, path.basename(old));
    writeFileSync(path.join(to, 'snap-2', 'state'), relocateState(state, move));
    const first = path.join(to, 'snap-1', 'state');
    writeFileSync(first, relocateState(readFileSync(first), move));
    await relocateLayer(path.join(to, 'top-1'), path.join(to, 'top-0'));
    await relocateLayer(path.join(to, 'top-0'), path.join(to, 'base.img'));
    expect(stateDisks(readFileSync(path.join(to, 'snap-2', 'state')))[0]!.path).toBe(path.join(to, 'top-1'));

    const vm = await Vm.restore(path.join(to, 'snap-2'), {
      resources: { 'virtio-blk': { path: path.join(to, 'top-r1') } },
    });
    const restored = { vm, ...watchConsole(vm) };
    vm.start();
    vm.write('two');
    await restored.waitFor(/two/);
    await vm.kill();
  });

  it('refuses a damaged state or layer rather than rewrite it', async () => {
    const state = Buffer.alloc(128);
    state.write('SMOLSNAP', 0, 'latin1');
    state.writeBigUInt64LE(128n, 16);
    expect(() => stateDisks(state, 'the state')).toThrow('the state: its CRC-64 does not match (a damaged state)');
    const layer = path.join(work, 'bad.layer');
    writeFileSync(layer, Buffer.concat([Buffer.from('SMOLDISK'), Buffer.alloc(8192)]));
    await expect(relocateLayer(layer, '/x')).rejects.toThrow(`${layer}: its header's CRC-64 does not match`);
  });
});
