// Tier 2: every way creating a VM can fail says what is wrong, and nothing crashes.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { Vm } from '../../src/vmm/vm.js';
import { guestPath, startGuest } from './guests.js';

const run = promisify(execFile);
const dir = mkdtempSync(path.join(os.tmpdir(), 'smol-vmm-errors-'));
const repo = path.resolve(import.meta.dirname, '../..');

/** An ELF64 x86-64 executable with one PT_LOAD segment at `paddr` of `memsz` bytes (a few real bytes, the rest bss). */
function elfWithSegment(paddr: bigint, memsz: bigint): Buffer {
  const code = Buffer.from([0xf4, 0xeb, 0xfd]); // hlt; jmp .-1
  const ehdr = Buffer.alloc(64);
  ehdr.write('\x7fELF', 0, 'latin1');
  ehdr[4] = 2; // ELFCLASS64
  ehdr[5] = 1; // little-endian
  ehdr[6] = 1;
  ehdr.writeUInt16LE(2, 16); // ET_EXEC
  ehdr.writeUInt16LE(62, 18); // EM_X86_64
  ehdr.writeUInt32LE(1, 20);
  ehdr.writeBigUInt64LE(paddr, 24); // e_entry
  ehdr.writeBigUInt64LE(64n, 32); // e_phoff
  ehdr.writeUInt16LE(64, 52);
  ehdr.writeUInt16LE(56, 54);
  ehdr.writeUInt16LE(1, 56);
  const phdr = Buffer.alloc(56);
  phdr.writeUInt32LE(1, 0); // PT_LOAD
  phdr.writeUInt32LE(5, 4);
  phdr.writeBigUInt64LE(120n, 8); // p_offset
  phdr.writeBigUInt64LE(paddr, 16);
  phdr.writeBigUInt64LE(paddr, 24);
  phdr.writeBigUInt64LE(BigInt(code.length), 32);
  phdr.writeBigUInt64LE(memsz, 40);
  return Buffer.concat([ehdr, phdr, code]);
}

function file(name: string, content: Buffer | string): string {
  const p = path.join(dir, name);
  writeFileSync(p, content);
  return p;
}

describe('creating a VM fails clearly', () => {
  it('names a kernel file that does not exist', async () => {
    await expect(Vm.create({ kernel: path.join(dir, 'missing.elf') })).rejects.toThrow(/missing\.elf: no such file/);
  });

  it('says a kernel that is not ELF64 or a bzImage is neither', async () => {
    const k = file('notes.txt', 'this is not a kernel\n'.repeat(10));
    await expect(Vm.create({ kernel: k })).rejects.toThrow(/notes\.txt: not an ELF64 file or bzImage/);
  });

  it('says when the kernel is an ELF of the wrong class', async () => {
    const elf = elfWithSegment(0x100000n, 0x1000n);
    elf[4] = 1; // ELFCLASS32
    await expect(Vm.create({ kernel: file('elf32.elf', elf) })).rejects.toThrow(/not a little-endian ELF64 x86-64/);
  });

  it('says when memory is too small for the kernel segments', async () => {
    const k = file('big-bss.elf', elfWithSegment(0x100000n, 64n << 20n));
    await expect(Vm.create({ kernel: k, memoryMiB: 32 })).rejects.toThrow(
      /segment at 0x100000\+0x4000000 does not fit in 32 MiB of RAM/,
    );
  });

  it('refuses a segment below 1 MiB, where the boot structures live', async () => {
    const k = file('low.elf', elfWithSegment(0x8000n, 0x1000n));
    await expect(Vm.create({ kernel: k })).rejects.toThrow(/segment 0 at 0x8000 is below 1 MiB/);
  });

  it.each([0, 65, 1.5, -1])('refuses %s vCPUs', async (cpus) => {
    await expect(Vm.create({ kernel: guestPath('hello'), cpus })).rejects.toThrow(
      /cpus must be an integer between 1 and 64/,
    );
  });

  it.each([0, 1, 256 * 1024 + 1])('refuses %s MiB of memory', async (memoryMiB) => {
    await expect(Vm.create({ kernel: guestPath('hello'), memoryMiB })).rejects.toThrow(
      /memoryMiB must be an integer between 2 and 262144/,
    );
  });

  /** Runs a script that tries to create a VM in a child process, so its environment can differ from ours. */
  async function createInChild(wrapper: string[], prelude = ''): Promise<string> {
    const script = path.join(dir, 'create-vm.cjs');
    writeFileSync(
      script,
      `${prelude}
      const n = require(${JSON.stringify(path.join(repo, 'native/build/Release/smol.node'))});
      n.createVm({ kernel: ${JSON.stringify(guestPath('hello'))}, memoryMiB: 16, cpus: 1 }, () => {}, () => {})
        .then(() => console.log('created'), (e) => console.log('error: ' + e.message));`,
    );
    const [cmd, ...args] = [...wrapper, 'node', script];
    const { stdout } = await run(cmd!, args);
    return stdout;
  }

  it('says when /dev/kvm does not exist', async () => {
    // A private mount namespace with a /dev that has no kvm node: the VMM sees a host without KVM.
    const devices = 'mount -t tmpfs none /dev && mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/urandom c 1 9';
    const stdout = await createInChild(['unshare', '--mount', 'sh', '-c', `${devices} && exec "$@"`, 'sh']);
    expect(stdout).toContain('error: cannot open /dev/kvm: No such file or directory');
  });

  it('says when this user may not open /dev/kvm', async () => {
    const stdout = await createInChild([], 'process.setgid(65534); process.setuid(65534);');
    expect(stdout).toContain('error: cannot open /dev/kvm: Permission denied');
  });
});

/** What a promise rejected with, or what a call threw. */
async function caught(work: () => unknown): Promise<{ message: string; code?: string; errno?: number }> {
  try {
    await work();
  } catch (error) {
    return error as Error & { code?: string; errno?: number };
  }
  throw new Error('it did not fail');
}

describe('VMM errors keep their kind as err.code', () => {
  it('a state that conflicts is EBUSY: pause a paused VM, resume a running one', async () => {
    const guest = await startGuest('count', { cmdline: 'every=100000' });
    expect(await caught(() => guest.vm.resume())).toMatchObject({
      message: 'cannot resume: the VM is running',
      code: 'EBUSY',
      errno: 16,
    });
    await guest.vm.pause();
    expect(await caught(() => guest.vm.pause())).toMatchObject({ code: 'EBUSY', errno: 16 });
    await guest.vm.kill();
  });

  it('a checkpoint of a VM another checkpoint holds is EBUSY, and the other one is written', async () => {
    const guest = await startGuest('count', { cmdline: 'every=100000', memoryMiB: 1024 });
    // Both go to the thread pool at once; the VMM holds the VM for one of them while it freezes 1 GiB.
    for (let attempt = 1; ; attempt++) {
      const results = await Promise.allSettled([
        guest.vm.checkpoint(path.join(dir, `busy-${attempt}-a`)),
        guest.vm.checkpoint(path.join(dir, `busy-${attempt}-b`)),
      ]);
      const failed = results.filter((r) => r.status === 'rejected').map((r) => r.reason as Error & { code?: string });
      for (const failure of failed) expect(failure).toMatchObject({ code: 'EBUSY', message: /in progress/ });
      if (failed.length === 1) break;
      expect(failed).toHaveLength(0); // both ran one after the other this time
      if (attempt === 10) throw new Error('10 pairs of checkpoints never overlapped');
    }
    await guest.vm.kill();
  });

  it('a VM that has exited is ESRCH', async () => {
    const guest = await startGuest('count', { cmdline: 'every=100000' });
    await guest.vm.kill();
    expect(await caught(() => guest.vm.checkpoint(path.join(dir, 'after-exit')))).toMatchObject({
      message: 'cannot checkpoint: the VM has exited',
      code: 'ESRCH',
    });
    expect(await caught(() => guest.vm.write('x'))).toMatchObject({ code: 'ESRCH' });
  });

  it('a snapshot directory that is not there is ENOENT; a kernel that is not one is ENOEXEC', async () => {
    expect(await caught(() => Vm.restore(path.join(dir, 'no-such-snapshot')))).toMatchObject({
      message: /no-such-snapshot: No such file or directory/,
      code: 'ENOENT',
      errno: 2,
    });
    const k = file('not-a-kernel.txt', 'this is not a kernel\n'.repeat(10));
    expect(await caught(() => Vm.create({ kernel: k }))).toMatchObject({ code: 'ENOEXEC' });
  });

  it('a snapshot directory that exists already is EEXIST', async () => {
    const guest = await startGuest('count', { cmdline: 'every=100000' });
    const taken = path.join(dir, 'taken');
    await guest.vm.checkpoint(taken);
    expect(await caught(() => guest.vm.checkpoint(taken))).toMatchObject({ code: 'EEXIST' });
    await guest.vm.kill();
  });
});

describe('host resources are keyed by device name', () => {
  it('refuses a resource for a device the VMM does not have, naming it, before the VM is touched', async () => {
    const guest = await startGuest('count', { cmdline: 'every=100000' });
    const snapshot = path.join(dir, 'named');
    const typo = { resources: { 'virtio-bulk': { path: path.join(dir, 'top') } } } as never;
    expect(await caught(() => guest.vm.checkpoint(snapshot, undefined, typo))).toMatchObject({
      message: 'cannot checkpoint: device resource for "virtio-bulk": no device has that name',
      code: 'EINVAL',
    });
    expect(guest.vm.state).toBe('running');
    await guest.vm.checkpoint(snapshot);
    expect(await caught(() => Vm.restore(snapshot, typo))).toMatchObject({ message: /"virtio-bulk"/, code: 'EINVAL' });
    const noPath = { resources: { 'virtio-vsock': {} } } as never;
    expect(await caught(() => Vm.restore(snapshot, noPath))).toMatchObject({
      message: 'restoreVm: resources["virtio-vsock"].path must be a non-empty path',
    });
    await guest.vm.kill();
  });
});
