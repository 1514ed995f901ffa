import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveVmOptions, type VmOptions } from './vm-options.js';

// These check the options before any VM exists; booting is tested in tests/vmm with real VMs.
const dir = mkdtempSync(path.join(os.tmpdir(), 'smol-vm-options-'));
const kernel = path.join(dir, 'guest.elf');
writeFileSync(kernel, 'not really a kernel');

describe('VM options', () => {
  it('fills in 256 MiB and one vCPU, and resolves the kernel path', async () => {
    const relative = path.relative(process.cwd(), kernel);
    expect(await resolveVmOptions({ kernel: relative })).toEqual({ kernel, memoryMiB: 256, cpus: 1 });
  });

  it('keeps initrd and command line', async () => {
    const config = await resolveVmOptions({ kernel, initrd: kernel, cmdline: 'console=ttyS0', cpus: 2 });
    expect(config).toEqual({ kernel, initrd: kernel, cmdline: 'console=ttyS0', memoryMiB: 256, cpus: 2 });
  });

  it('a kernel that does not exist is named', async () => {
    await expect(resolveVmOptions({ kernel: path.join(dir, 'nope') })).rejects.toThrow(
      `kernel ${path.join(dir, 'nope')}: no such file`,
    );
  });

  it('a directory is not a kernel', async () => {
    await expect(resolveVmOptions({ kernel: dir })).rejects.toThrow(`kernel ${dir}: not a regular file`);
  });

  it('cpus and memory outside what the VMM supports are refused with the range', async () => {
    await expect(resolveVmOptions({ kernel, cpus: 0 })).rejects.toThrow(
      'cpus must be an integer between 1 and 64 (got 0)',
    );
    await expect(resolveVmOptions({ kernel, memoryMiB: 1.5 })).rejects.toThrow(/memoryMiB must be an integer/);
  });

  it('a command line too long for its page is refused', async () => {
    await expect(resolveVmOptions({ kernel, cmdline: 'x'.repeat(2048) })).rejects.toThrow(
      'cmdline is 2048 bytes; at most 2047 fit',
    );
  });

  it('passes a console buffer size through, and refuses one that is not a size', async () => {
    expect(await resolveVmOptions({ kernel, consoleBufferBytes: 4096 })).toMatchObject({ consoleBufferBytes: 4096 });
    await expect(resolveVmOptions({ kernel, consoleBufferBytes: 0 })).rejects.toThrow(/consoleBufferBytes must be/);
  });

  it('a disk names its base image (which must exist) and resolves the top layer; rng is a boolean', async () => {
    const top = path.relative(process.cwd(), path.join(dir, 'top.layer'));
    expect(await resolveVmOptions({ kernel, disk: { base: kernel, top }, rng: true })).toMatchObject({
      disk: { base: kernel, top: path.resolve(top) },
      rng: true,
    });
    await expect(resolveVmOptions({ kernel, disk: { base: path.join(dir, 'no.img') } })).rejects.toThrow(
      `disk.base ${path.join(dir, 'no.img')}: no such file`,
    );
    const notBoolean = { kernel, rng: 'yes' } as unknown as VmOptions;
    await expect(resolveVmOptions(notBoolean)).rejects.toThrow('rng must be true or false (got yes)');
  });

  it('virtioConsole is a boolean', async () => {
    expect(await resolveVmOptions({ kernel, virtioConsole: true })).toMatchObject({ virtioConsole: true });
    const notBoolean = { kernel, virtioConsole: 1 } as unknown as VmOptions;
    await expect(resolveVmOptions(notBoolean)).rejects.toThrow('virtioConsole must be true or false (got 1)');
  });

  it('a misspelt option is named instead of ignored', async () => {
    const options = { kernel, memory: 512 } as unknown as VmOptions;
    await expect(resolveVmOptions(options)).rejects.toThrow(/unknown VM option memory/);
  });
});
