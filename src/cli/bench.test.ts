import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findGuestAssets, GUEST_CMDLINE } from '../guest-build/guest-assets.js';
import { DEFAULT_BENCH_GUEST, DEFAULT_QEMU, formatBenchResult, parseBenchArgs } from './bench.js';

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
    expect(() => parseBenchArgs([])).toThrow(
      'name a benchmark: vm-create, boot, snapshot, restore, fork, fanout, reset, exec, files, ui, console, disk',
    );
    expect(() => parseBenchArgs(['--json', 'vm-create'])).toThrow('the benchmark name comes first (got --json)');
  });

  it('names the benchmarks it knows when given another', () => {
    expect(() => parseBenchArgs(['forks'])).toThrow(
      'unknown benchmark forks (known: vm-create, boot, snapshot, restore, fork, fanout, reset, exec, files, ui, console, disk, net, sdk, image, pack, burst, soak, clients)',
    );
  });

  it('clients defaults to 1,000 episodes, 200 clients, 4 running, 20 s, 3 runs, and names a misfit option', () => {
    expect(parseBenchArgs(['clients'])).toEqual({
      name: 'clients',
      json: false,
      runs: 3,
      episodes: 1000,
      clients: 200,
      running: 4,
      seconds: 20,
    });
    expect(parseBenchArgs(['clients', '--clients', '50', '--running', '0', '--json'])).toMatchObject({
      clients: 50,
      running: 0,
      json: true,
    });
    expect(() => parseBenchArgs(['clients', '--episodes', '2', '--running', '3'])).toThrow(
      '--running 3 is more than --episodes 2: running ones are episodes too',
    );
    expect(() => parseBenchArgs(['clients', '--count', '3'])).toThrow(
      '--count is not an option of the clients benchmark',
    );
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

  it('boot takes --trace (traced boots after the timed ones); disk, net and restore --linux do not', () => {
    expect(parseBenchArgs(['boot', '--trace', '--runs', '3'])).toMatchObject({ name: 'boot', runs: 3, trace: true });
    expect(parseBenchArgs(['boot'])).not.toHaveProperty('trace');
    for (const argv of [
      ['disk', '--trace'],
      ['net', '--trace'],
      ['restore', '--linux', '--trace'],
    ]) {
      expect(() => parseBenchArgs(argv)).toThrow(
        '--trace is an option of the vm-create, boot, snapshot, restore, fork and fanout benchmarks only',
      );
    }
  });

  it('refuses the boot options for vm-create', () => {
    expect(() => parseBenchArgs(['vm-create', '--cpus', '2'])).toThrow(
      '--cpus is an option of the boot benchmark only',
    );
  });

  it('snapshot, restore and fork default to 20 runs at 256 and 2048 MiB', () => {
    for (const name of ['snapshot', 'restore', 'fork'] as const) {
      expect(parseBenchArgs([name])).toEqual({ name, json: false, runs: 20, memoryMiB: [256, 2048] });
    }
  });

  it('--memory picks one guest size for the snapshot benchmarks', () => {
    expect(parseBenchArgs(['snapshot', '--memory', '512', '--runs', '3', '--json'])).toEqual({
      name: 'snapshot',
      json: true,
      runs: 3,
      memoryMiB: [512],
    });
    expect(() => parseBenchArgs(['fork', '--memory', '0'])).toThrow(/--memory must be an integer from/);
  });

  it('fanout defaults to 5 runs of 64 forks, and takes --forks', () => {
    expect(parseBenchArgs(['fanout'])).toEqual({
      name: 'fanout',
      json: false,
      runs: 5,
      memoryMiB: [256, 2048],
      forks: 64,
    });
    expect(parseBenchArgs(['fanout', '--forks', '8'])).toMatchObject({ forks: 8 });
    expect(() => parseBenchArgs(['fanout', '--forks', '1025'])).toThrow(
      '--forks must be an integer from 1 to 1024 (got 1025)',
    );
    expect(() => parseBenchArgs(['fork', '--forks', '2'])).toThrow('--forks is an option of the fanout benchmark only');
  });

  it('reset defaults to 20 runs of a shipped Smolfile, and takes -f', () => {
    const parsed = parseBenchArgs(['reset']);
    expect(parsed).toMatchObject({ name: 'reset', json: false, runs: 20 });
    expect(path.basename((parsed as { smolfile: string }).smolfile)).toMatch(/^(shell|echo)\.smolfile$/);
    expect(parseBenchArgs(['reset', '-f', 'my.smolfile', '--runs', '5'])).toEqual({
      name: 'reset',
      json: false,
      runs: 5,
      smolfile: path.resolve('my.smolfile'),
    });
    expect(() => parseBenchArgs(['reset', '--cpus', '2'])).toThrow('--cpus is not an option of the reset benchmark');
    expect(() => parseBenchArgs(['fork', '-f', 'x'])).toThrow(
      '--file is an option of the reset, exec, files and sdk benchmarks only',
    );
  });

  it('exec and files run 10 times on a Smolfile of the Linux guest, and need that guest', () => {
    const built = findGuestAssets();
    if (built.kernel && built.initramfs) {
      expect(parseBenchArgs(['exec'])).toMatchObject({ name: 'exec', runs: 10 });
      expect(parseBenchArgs(['files', '-f', 'x.smolfile'])).toMatchObject({
        name: 'files',
        smolfile: path.resolve('x.smolfile'),
      });
    } else {
      expect(() => parseBenchArgs(['exec'])).toThrow(
        'exec needs the Linux guest (its agent): run smol guest build first',
      );
    }
    expect(() => parseBenchArgs(['files', '--cpus', '2'])).toThrow('--cpus is not an option of the files benchmark');
  });

  it('refuses Linux guest options for the tiny-guest benchmarks, pointing restore at --linux', () => {
    expect(() => parseBenchArgs(['snapshot', '--cpus', '2'])).toThrow(
      '--cpus is not an option of the snapshot benchmark',
    );
    expect(() => parseBenchArgs(['restore', '--kernel', 'vmlinux'])).toThrow(
      '--kernel is not an option of the restore benchmark (it is of restore --linux)',
    );
  });

  it('restore --linux takes the boot options and defaults to 10 runs of the built guest', () => {
    expect(parseBenchArgs(['restore', '--linux'])).toEqual({
      name: 'restore-linux',
      json: false,
      runs: 10,
      cmdline: GUEST_CMDLINE,
      cpus: 1,
      memoryMiB: 256,
      qemu: DEFAULT_QEMU,
    });
    expect(parseBenchArgs(['restore', '--linux', '--memory', '2048', '--kernel', 'v', '--initrd', 'i'])).toMatchObject({
      memoryMiB: 2048,
      kernel: path.resolve('v'),
      initrd: path.resolve('i'),
    });
    expect(() => parseBenchArgs(['fork', '--linux'])).toThrow('--linux is an option of the restore benchmark only');
  });

  it('disk defaults to 5 runs of the built guest against QEMU, and takes the boot options', () => {
    expect(parseBenchArgs(['disk'])).toEqual({
      name: 'disk',
      json: false,
      runs: 5,
      cmdline: GUEST_CMDLINE,
      cpus: 1,
      memoryMiB: 256,
      qemu: DEFAULT_QEMU,
    });
    expect(parseBenchArgs(['disk', '--runs', '3', '--json', '--qemu', '/opt/qemu'])).toMatchObject({
      name: 'disk',
      json: true,
      runs: 3,
      qemu: '/opt/qemu',
    });
    expect(() => parseBenchArgs(['disk', '--forks', '2'])).toThrow(
      '--forks is an option of the fanout and sdk benchmarks only',
    );
    expect(() => parseBenchArgs(['disk', '--linux'])).toThrow('--linux is an option of the restore benchmark only');
  });

  it('net defaults to 5 runs of the built guest against QEMU, and takes the boot options', () => {
    expect(parseBenchArgs(['net'])).toEqual({
      name: 'net',
      json: false,
      runs: 5,
      cmdline: GUEST_CMDLINE,
      cpus: 1,
      memoryMiB: 256,
      qemu: DEFAULT_QEMU,
    });
    expect(parseBenchArgs(['net', '--runs', '2', '--cpus', '2'])).toMatchObject({ name: 'net', runs: 2, cpus: 2 });
    expect(() => parseBenchArgs(['net', '--forks', '2'])).toThrow(
      '--forks is an option of the fanout and sdk benchmarks only',
    );
  });

  it('sdk defaults to 10 runs of fork(8) on the echo guest and takes -f and --forks', () => {
    expect(parseBenchArgs(['sdk'])).toMatchObject({ name: 'sdk', json: false, runs: 10, forks: 8 });
    expect((parseBenchArgs(['sdk']) as { smolfile: string }).smolfile).toMatch(/smolfiles\/echo\.smolfile$/);
    expect(parseBenchArgs(['sdk', '-f', 'x.smolfile', '--forks', '4', '--runs', '3'])).toMatchObject({
      smolfile: path.resolve('x.smolfile'),
      forks: 4,
      runs: 3,
    });
    expect(() => parseBenchArgs(['sdk', '--forks', '65'])).toThrow(/--forks/);
    expect(() => parseBenchArgs(['sdk', '--memory', '64'])).toThrow('--memory is not an option of the sdk benchmark');
  });

  it('console defaults to 5 runs of 100,000 lines and takes --lines only of the ui options', () => {
    expect(parseBenchArgs(['console'])).toEqual({ name: 'console', json: false, runs: 5, lines: 100_000 });
    expect(parseBenchArgs(['console', '--lines', '5000', '--runs', '2', '--json'])).toEqual({
      name: 'console',
      json: true,
      runs: 2,
      lines: 5000,
    });
    expect(() => parseBenchArgs(['console', '--episodes', '3'])).toThrow('--episodes is an option of the ui benchmark');
    expect(() => parseBenchArgs(['console', '--kernel', 'k'])).toThrow('--kernel is not an option of the console');
    expect(() => parseBenchArgs(['disk', '--lines', '3'])).toThrow('--lines is an option of the ui and console');
  });

  it('ui takes --engines N (2 to 16) for the list across engines, and only ui takes it', () => {
    expect(parseBenchArgs(['ui'])).toMatchObject({ name: 'ui', engines: 1, episodes: 1000 });
    expect(parseBenchArgs(['ui', '--engines', '4', '--runs', '3'])).toMatchObject({ engines: 4, runs: 3 });
    expect(() => parseBenchArgs(['ui', '--engines', '17'])).toThrow('--engines');
    expect(() => parseBenchArgs(['ui', '--engines', 'four'])).toThrow('--engines');
    expect(() => parseBenchArgs(['pack', '--engines', '2'])).toThrow(
      '--engines is not an option of the pack benchmark',
    );
    expect(() => parseBenchArgs(['console', '--engines', '2'])).toThrow('--engines is an option of the ui benchmark');
  });

  it('prints the notes of a snapshot benchmark under its table', () => {
    const host = {
      kvm: { implementation: 'hardware', apiVersion: 12 },
      inLab: true,
      cpus: 2,
      cpuModel: 'x',
      kernel: 'k',
      node: 'v20',
    };
    const text = formatBenchResult({
      name: 'snapshot',
      runs: 1,
      warmup: 2,
      guest: 'count.elf',
      results: [{ metric: '256 MiB diff: pause', p50_ms: 4, p90_ms: 9, samples_ms: [4], inputs: { memoryMiB: 256 } }],
      notes: ['the count guest dirtied 0.02 MiB'],
      host,
    });
    expect(text).toContain('256 MiB diff: pause      4.000      9.000');
    expect(text).toMatch(/\nnote: the count guest dirtied 0.02 MiB\n$/);
  });
});
