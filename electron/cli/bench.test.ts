import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GUEST_CMDLINE } from '../guest/guest-assets.js';
import { DEFAULT_BENCH_GUEST, DEFAULT_QEMU, parseBenchArgs } from './bench.js';

describe('smol bench arguments', () => {
  it('vm-create defaults to 20 runs of the hello tiny guest', () => {
    expect(parseBenchArgs(['vm-create'])).toEqual({
      name: 'vm-create',
      json: false,
      runs: 20,
      kernel: DEFAULT_BENCH_GUEST,
    });
    expect(path.basename(DEFAULT_BENCH_GUEST)).toBe('hello.elf');
  });

  it('takes --runs, --json and a --kernel resolved against the current directory', () => {
    expect(parseBenchArgs(['vm-create', '--json', '--runs', '5', '--kernel', 'g.elf'])).toEqual({
      name: 'vm-create',
      json: true,
      runs: 5,
      kernel: path.resolve('g.elf'),
    });
  });

  it('needs a benchmark name, first', () => {
    expect(() => parseBenchArgs([])).toThrow('name a benchmark: vm-create, boot');
    expect(() => parseBenchArgs(['--json', 'vm-create'])).toThrow('the benchmark name comes first (got --json)');
  });

  it('names the benchmarks it knows when given another', () => {
    expect(() => parseBenchArgs(['fork'])).toThrow('unknown benchmark fork (known: vm-create, boot)');
  });

  it('--runs must be a positive integer', () => {
    expect(() => parseBenchArgs(['vm-create', '--runs', '0'])).toThrow(
      '--runs must be an integer from 1 to 10000 (got 0)',
    );
    expect(() => parseBenchArgs(['vm-create', '--runs', 'many'])).toThrow(/--runs must be an integer/);
  });

  it('rejects unknown flags', () => {
    expect(() => parseBenchArgs(['vm-create', '--warmup', '3'])).toThrow('unknown option --warmup');
  });

  it('has --help before or after the name', () => {
    expect(parseBenchArgs(['--help'])).toBe('help');
    expect(parseBenchArgs(['vm-create', '-h'])).toBe('help');
  });

  it('boot defaults to 10 runs of the built guest, 1 vCPU, 256 MiB, against qemu-system-x86_64', () => {
    expect(parseBenchArgs(['boot'])).toEqual({
      name: 'boot',
      json: false,
      runs: 10,
      cmdline: GUEST_CMDLINE,
      cpus: 1,
      memoryMiB: 256,
      qemu: DEFAULT_QEMU,
    });
  });

  it('boot takes its own kernel and initrd together, resolved, and the VM size', () => {
    const argv = ['boot', '--kernel', 'vmlinux', '--initrd', 'i.cpio', '--cpus', '2', '--memory', '512', '--json'];
    expect(parseBenchArgs(argv)).toMatchObject({
      kernel: path.resolve('vmlinux'),
      initrd: path.resolve('i.cpio'),
      cpus: 2,
      memoryMiB: 512,
      json: true,
    });
    expect(() => parseBenchArgs(['boot', '--kernel', 'vmlinux'])).toThrow(/--kernel and --initrd together/);
  });

  it('refuses the boot options for vm-create', () => {
    expect(() => parseBenchArgs(['vm-create', '--cpus', '2'])).toThrow(
      '--cpus is an option of the boot benchmark only',
    );
  });
});
