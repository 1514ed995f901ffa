// Tier 2: checkpoint, restore and fork of tiny guests on real KVM (docs/snapshots.md).
import { spawn } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Vm } from '../../src/vmm/vm.js';
import { startGuest, watchConsole, type RunningGuest, deviceSections } from './guests.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const work = mkdtempSync(path.join(tmpdir(), 'smol-snapshot-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
let n = 0;
const newDir = () => path.join(work, `snap-${++n}`);

function runSmol(args: string[], input: string): Promise<{ stdout: string; stderr: string; status: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.resolve('bin/smol.js'), ...args], { timeout: 60_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('latin1')));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ stdout, stderr, status }));
    child.stdin.end(input);
  });
}

function counts(output: string): number[] {
  return [...output.matchAll(/count=(\d+)\n/g)].map((m) => Number(m[1]));
}

async function restore(dir: string): Promise<RunningGuest> {
  const vm = await Vm.restore(dir);
  const watched = watchConsole(vm);
  vm.start();
  return { vm, ...watched };
}

/** Pauses, lets the output already produced reach JavaScript, and returns the last count printed. */
async function pauseAndCount(guest: RunningGuest): Promise<number> {
  await guest.vm.pause();
  await sleep(50);
  return counts(guest.output()).at(-1)!;
}

describe('checkpoint and restore', () => {
  it('a counting guest restored from a checkpoint continues from the captured count', async () => {
    const guest = await startGuest('count', { cmdline: 'every=20000' });
    await guest.waitFor(/count=5\n/);
    const last = await pauseAndCount(guest);
    const info = await guest.vm.checkpoint(newDir());
    expect(info.kind).toBe('full');
    expect(info.parentDir).toBeNull();
    expect(info.cpus).toBe(1);
    expect(guest.vm.state).toBe('paused'); // a paused VM stays paused
    await guest.vm.kill();

    const restored = await restore(info.dir);
    await restored.waitFor(new RegExp(`count=${last + 3}\\n`));
    // The parent may have stopped mid-line; the restored VM finishes that line. Together they count without a gap.
    const all = counts(guest.output() + restored.output());
    expect(all).toEqual(Array.from({ length: all.length }, (_, i) => i + 1));
    await restored.vm.kill();
  });

  it('checkpoints a running guest, which keeps running, and writes later checkpoints as diffs', async () => {
    const guest = await startGuest('count', { cmdline: 'every=20000' });
    await guest.waitFor(/count=3\n/);
    const first = await guest.vm.checkpoint(newDir());
    expect(guest.vm.state).toBe('running');
    const before = counts(guest.output()).at(-1)!;
    await guest.waitFor(new RegExp(`count=${before + 3}\\n`));
    const second = await guest.vm.checkpoint(newDir());
    expect(second.kind).toBe('diff');
    expect(second.parentDir).toBe(first.dir);
    expect(second.dirtyPages).toBeGreaterThan(0);
    expect(second.pages).toBeLessThan(first.pages);
    await guest.vm.kill();

    const restored = await restore(second.dir);
    await restored.waitFor(/count=\d+\n(.|\n)*count=\d+\n/);
    const resumed = counts(restored.output());
    expect(resumed[0]).toBeGreaterThan(before);
    expect(resumed[1]).toBe(resumed[0]! + 1);
    await restored.vm.kill();
  });

  it('restores a snapshot with input queued, in a different process', async () => {
    const guest = await startGuest('echo');
    guest.vm.write('before ');
    await guest.waitFor(/before /);
    await guest.vm.pause();
    guest.vm.write('queued ');
    const info = await guest.vm.checkpoint(newDir());
    await guest.vm.kill();

    // smol boot --restore, in its own process; the echo guest resets on Ctrl-D and smol then exits 0.
    const { stdout } = await runSmol(['boot', '--restore', info.dir], 'after\x04');
    expect(stdout).toMatch(/^queued after\necho: bye after \d+ interrupts\n$/);
  });

  it('restores two vCPUs', async () => {
    const guest = await startGuest('count', { cmdline: 'every=20000', cpus: 2 });
    await guest.waitFor(/count=3\n/);
    const last = await pauseAndCount(guest);
    const info = await guest.vm.checkpoint(newDir());
    expect(info.cpus).toBe(2);
    await guest.vm.kill();
    const restored = await restore(info.dir);
    await restored.waitFor(new RegExp(`count=${last + 2}\\n`));
    await restored.vm.kill();
  });
});

describe('fork', () => {
  it('two forks fed different input diverge, and the parent sees neither', async () => {
    const parent = await startGuest('echo');
    parent.vm.write('common ');
    await parent.waitFor(/common /);
    const [a, b] = await parent.vm.fork(2);
    const ga = { vm: a!, ...watchConsole(a!) };
    const gb = { vm: b!, ...watchConsole(b!) };
    a!.write('left');
    b!.write('right');
    parent.vm.write('middle');
    await ga.waitFor(/left/);
    await gb.waitFor(/right/);
    await parent.waitFor(/middle/);
    expect(ga.output()).toBe('left');
    expect(gb.output()).toBe('right');
    expect(parent.output()).toBe('echo: ready\ncommon middle');
    const stats = await a!.memoryStats();
    expect(stats.guestBytes).toBe(16 << 20);
    expect(stats.sharedBytes).toBeGreaterThan(0);
    await Promise.all([a!.kill(), b!.kill(), parent.vm.kill()]);
  });

  it('forks a chain of 10 generations, each one still working', async () => {
    let current = await startGuest('echo');
    await current.waitFor(/ready\n/);
    const all: Vm[] = [current.vm];
    for (let gen = 1; gen <= 10; gen++) {
      const [child] = await current.vm.fork(1);
      const next = { vm: child!, ...watchConsole(child!) };
      child!.write(`gen${gen};`);
      await next.waitFor(new RegExp(`gen${gen};`));
      all.push(child!);
      current = next;
    }
    expect(current.output()).toBe('gen10;');
    await Promise.all(all.map((vm) => vm.kill()));
  });
});

describe('untrusted snapshots', () => {
  // Two real snapshots of one VM (a full one and a diff on it), then damaged copies of them.
  let full = '';
  let diff = '';
  let other = '';
  const copy = (from: string) => {
    const to = newDir();
    cpSync(from, to, { recursive: true });
    for (const f of ['state', 'memory']) chmodSync(path.join(to, f), 0o644);
    return to;
  };
  const refused = async (dir: string, message: RegExp) => {
    await expect(Vm.restore(dir)).rejects.toThrow(message);
  };

  beforeAll(async () => {
    const guest = await startGuest('count', { cmdline: 'every=20000' });
    await guest.waitFor(/count=2\n/);
    full = (await guest.vm.checkpoint(newDir())).dir;
    await guest.waitFor(/count=4\n/);
    diff = (await guest.vm.checkpoint(newDir())).dir;
    await guest.vm.kill();
    const second = await startGuest('count', { cmdline: 'every=20000' });
    await second.waitFor(/count=2\n/);
    other = (await second.vm.checkpoint(newDir())).dir;
    await second.vm.kill();
  });

  it('refuses a directory that is not there', async () => {
    await refused(path.join(work, 'nothing-here'), /no snapshot at .*nothing-here/);
  });

  it('refuses a truncated state file', async () => {
    const dir = copy(full);
    const state = path.join(dir, 'state');
    truncateSync(state, statSync(state).size - 100);
    await refused(dir, /state is truncated/);
  });

  it('refuses a state file with one byte changed', async () => {
    const dir = copy(full);
    const state = path.join(dir, 'state');
    const bytes = readFileSync(state);
    bytes[bytes.length >> 1]! ^= 0x40;
    writeFileSync(state, bytes);
    await refused(dir, /state is corrupted: its checksum does not match/);
  });

  it('refuses a state file of another format version', async () => {
    const dir = copy(full);
    const state = path.join(dir, 'state');
    const bytes = readFileSync(state);
    bytes.writeUInt32LE(3, 8);
    writeFileSync(state, bytes);
    await refused(dir, /format version 3; this Smol reads version 2 \(written by a newer Smol\)/);
  });

  it('refuses a snapshot of the old format 1, naming its version', async () => {
    // A real format-1 state (native/tests/samples: an echo guest with every device), in place of this one's.
    const dir = copy(full);
    cpSync(path.resolve('native/tests/samples/state-v1.bin'), path.join(dir, 'state'));
    await refused(dir, /format version 1; this Smol reads version 2 \(written by an older Smol\)/);
  });

  it('refuses something that is not a snapshot', async () => {
    const dir = copy(full);
    writeFileSync(path.join(dir, 'state'), 'not a snapshot, but long enough for its header. '.repeat(4));
    await refused(dir, /not a snapshot state file/);
  });

  it('refuses a truncated or extended memory file', async () => {
    const short = copy(full);
    truncateSync(path.join(short, 'memory'), statSync(path.join(short, 'memory')).size - 4096);
    await refused(short, /memory is \d+ bytes; a layer of 16 MiB must be \d+ \(truncated\)/);
    const long = copy(full);
    truncateSync(path.join(long, 'memory'), statSync(path.join(long, 'memory')).size + 4096);
    await refused(long, /\(too long\)/);
  });

  it("refuses another snapshot's memory file", async () => {
    const dir = copy(full);
    cpSync(path.join(other, 'memory'), path.join(dir, 'memory'));
    await refused(dir, /belongs to another snapshot/);
  });

  it('refuses a diff whose parent is missing or was replaced', async () => {
    const child = copy(diff);
    const parentName = path.basename(full);
    // The copy's parent link is relative (../snap-N), so it resolves to the original full snapshot: intact. (It runs
    // before it is killed: killing VMs straight after creating them is what freezes the lab, docs/lab.md.)
    const ok = await restore(child);
    await ok.waitFor(/count=\d+\n/);
    await ok.vm.kill();
    const moved = path.join(work, `${parentName}-moved`);
    renameSync(full, moved);
    try {
      await refused(child, new RegExp(`its parent snapshot: no snapshot at .*${parentName}`));
      cpSync(other, full, { recursive: true });
      await refused(child, /its parent .* was replaced/);
    } finally {
      rmSync(full, { recursive: true, force: true });
      renameSync(moved, full);
    }
  });
});

describe('dirty tracking', () => {
  it('a diff holds exactly the pages the guest wrote, and restores them', async () => {
    const guest = await startGuest('dirty', { memoryMiB: 64, cmdline: 'mib=10' });
    await guest.waitFor(/dirty: ready\n/);
    const first = await guest.vm.checkpoint(newDir());
    guest.vm.write('d');
    await guest.waitFor(/dirty=1\n/);
    const second = await guest.vm.checkpoint(newDir());
    // 10 MiB is 2560 pages; the guest's stack and the UART's effects add a handful.
    expect(second.kind).toBe('diff');
    expect(second.dirtyPages).toBeGreaterThanOrEqual(2560);
    expect(second.dirtyPages).toBeLessThan(2560 + 32);
    // The diff's pages are now read from its file, not from memory: a fork maps them from there.
    const [child] = await guest.vm.fork(1);
    const forked = { vm: child!, ...watchConsole(child!) };
    child!.write('v');
    await forked.waitFor(/verify=(ok|bad)\n/);
    expect(forked.output()).toBe('verify=ok\n');
    await child!.kill();
    guest.vm.write('d');
    await guest.waitFor(/dirty=2\n/);
    await guest.vm.kill();

    // The diff restores round 1 over the full layer's zeros; the full one has no round at all.
    const fromDiff = await restore(second.dir);
    fromDiff.vm.write('v');
    await fromDiff.waitFor(/verify=(ok|bad)\n/);
    expect(fromDiff.output()).toContain('verify=ok');
    fromDiff.vm.write('d');
    await fromDiff.waitFor(/dirty=2\n/);
    await fromDiff.vm.kill();
    const fromFull = await restore(first.dir);
    fromFull.vm.write('v');
    await fromFull.waitFor(/verify=(ok|bad)\n/);
    expect(fromFull.output()).toContain('verify=ok'); // round 0: every page still zero
    await fromFull.vm.kill();
  });
});

describe('a VM with every device', () => {
  it('saves every device in setup order, and restores and forks with each one in its place', async () => {
    const dir = mkdtempSync(path.join(work, 'devices-'));
    const disk = path.join(dir, 'disk.img');
    writeFileSync(disk, Buffer.alloc(1 << 20));
    const guest = await startGuest('echo', {
      rng: true,
      virtioConsole: true,
      vsock: { cid: 7, path: path.join(dir, 'parent.sock') },
      disk: { base: disk, top: path.join(dir, 'top-0') },
    });
    guest.vm.write('one ');
    await guest.waitFor(/one /);
    const info = await guest.vm.checkpoint(newDir(), undefined, {
      resources: { 'virtio-blk': { path: path.join(dir, 'top-1') } },
    });
    // Setup order is by level (core, platform, virtio) and then by name, never by link order.
    expect(deviceSections(readFileSync(path.join(info.dir, 'state')))).toEqual([
      'com1',
      'vmgenid',
      'virtio-blk',
      'virtio-console',
      'virtio-rng',
      'virtio-vsock',
    ]);
    // The virtio-console's driver is not up (the echo guest uses COM1), so input goes to COM1.
    const [child] = await guest.vm.fork(1, {
      resources: { 'virtio-blk': { path: path.join(dir, 'top-2') } },
      children: [
        {
          'virtio-blk': { path: path.join(dir, 'top-child') },
          'virtio-vsock': { path: path.join(dir, 'child.sock') },
        },
      ],
    });
    const forked = { vm: child!, ...watchConsole(child!) };
    child!.write('two');
    await forked.waitFor(/two/);
    await Promise.all([child!.kill(), guest.vm.kill()]);

    const vm = await Vm.restore(info.dir, {
      resources: {
        'virtio-blk': { path: path.join(dir, 'top-3') },
        'virtio-vsock': { path: path.join(dir, 'r.sock') },
      },
    });
    const restored = { vm, ...watchConsole(vm) };
    vm.start();
    vm.write('three');
    await restored.waitFor(/three/);
    expect(restored.output()).toBe('three');
    await vm.kill();
    await expect(
      Vm.restore(info.dir, { resources: { 'virtio-blk': { path: path.join(dir, 'top-4') } } }),
    ).rejects.toThrow(/needs a "virtio-vsock" resource/);
  });
});
