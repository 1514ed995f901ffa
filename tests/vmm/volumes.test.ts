// Tier 2: a VM with volumes, further virtio-blk disks each a device of its own (docs/disks.md, "Volumes"), on real
// KVM with a tiny guest: each volume is its own snapshot section and resource, a writable one is frozen by every
// checkpoint and gets a new layer at each restore and fork child, a read-only one needs nothing.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadNative } from '../../src/vmm/native.js';
import { Vm } from '../../src/vmm/vm.js';
import { startGuest, watchConsole, deviceSections } from './guests.js';

const work = mkdtempSync(path.join(tmpdir(), 'smol-volumes-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function image(name: string, mib: number): string {
  const file = path.join(work, name);
  writeFileSync(file, Buffer.alloc(mib << 20));
  return file;
}

describe('volumes', () => {
  it('each volume is a device of its own: its section, its resource, its own layers at a checkpoint, restore and fork', async () => {
    const dir = mkdtempSync(path.join(work, 'vm-'));
    const at = (name: string) => path.join(dir, name);
    const root = image('root.img', 1);
    const rw = image('rw.img', 2);
    const ro = image('ro.img', 3);
    const guest = await startGuest('echo', {
      disk: { base: root, top: at('root-0') },
      volumes: [{ base: rw, top: at('rw-0') }, { base: ro }],
    });
    guest.vm.write('one ');
    await guest.waitFor(/one /);

    // A writable volume needs its own resource at a checkpoint, as the root disk does.
    await expect(
      guest.vm.checkpoint(at('refused'), undefined, { resources: { 'virtio-blk': { path: at('root-x') } } }),
    ).rejects.toThrow(/writable volume: a checkpoint needs a "virtio-blk-1" resource/);
    const info = await guest.vm.checkpoint(at('snap'), undefined, {
      resources: { 'virtio-blk': { path: at('root-1') }, 'virtio-blk-1': { path: at('rw-1') } },
    });
    expect(deviceSections(readFileSync(path.join(info.dir, 'state')))).toEqual([
      'com1',
      'vmgenid',
      'virtio-blk',
      'virtio-blk-1',
      'virtio-blk-2',
    ]);
    // The volume's top was frozen and the VM goes on writing the new one; the read-only volume has no layer.
    const live = await loadNative().diskInfo(at('rw-1'));
    expect(live.size).toBe(2 << 20);
    expect(live.base).toBe(rw);
    expect(live.layers.map((l) => [l.path, l.frozen])).toEqual([
      [at('rw-1'), false],
      [at('rw-0'), true],
    ]);

    const [child] = await guest.vm.fork(1, {
      resources: { 'virtio-blk': { path: at('root-2') }, 'virtio-blk-1': { path: at('rw-2') } },
      children: [{ 'virtio-blk': { path: at('root-child') }, 'virtio-blk-1': { path: at('rw-child') } }],
    });
    const forked = { vm: child!, ...watchConsole(child!) };
    child!.write('two');
    await forked.waitFor(/two/);
    expect((await loadNative().diskInfo(at('rw-child'))).layers.map((l) => l.path)).toEqual([
      at('rw-child'),
      at('rw-1'),
      at('rw-0'),
    ]);
    await Promise.all([child!.kill(), guest.vm.kill()]);

    await expect(Vm.restore(info.dir, { resources: { 'virtio-blk': { path: at('root-3') } } })).rejects.toThrow(
      /writable volume: restoring it needs a "virtio-blk-1" resource/,
    );
    const vm = await Vm.restore(info.dir, {
      resources: { 'virtio-blk': { path: at('root-4') }, 'virtio-blk-1': { path: at('rw-4') } },
    });
    const restored = { vm, ...watchConsole(vm) };
    vm.start();
    vm.write('three');
    await restored.waitFor(/three/);
    await vm.kill();
    expect((await loadNative().diskInfo(at('rw-4'))).layers.map((l) => l.path)).toEqual([at('rw-4'), at('rw-0')]);
  });

  it('refuses more volumes than there are slots, and a volume without its image', async () => {
    const volumes = Array.from({ length: 5 }, (_, i) => ({ base: image(`many-${i}.img`, 1) }));
    await expect(startGuest('echo', { volumes })).rejects.toThrow(/at most 4 volumes/);
    await expect(startGuest('echo', { volumes: [{ base: path.join(work, 'missing.img') }] })).rejects.toThrow(
      /volumes\[0\]\.base .*missing\.img: no such file/,
    );
  });
});
