// Tier 2: prepared VMs (docs/snapshots.md, "Prepared VMs") on real KVM. A process that loads the native module, as a
// vmhost does, keeps empty KVM VMs ready as demand asks; one that is never used leaves nothing behind: draining the
// pool gives back every KVM fd and the pool's thread, and a process that exits with VMs prepared exits cleanly.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { nativeModulePath, type VmPoolStats } from '../../src/vmm/native.js';
import { guestPath } from './guests.js';

// Runs in a child process of its own (the pool is the process's): prints one JSON line per checkpoint.
const script = `
const { readdirSync, readlinkSync, readFileSync } = require('node:fs');
const native = require(process.env.NATIVE);
const kernel = process.env.GUEST;
const out = (what, extra = {}) => console.log(JSON.stringify({ what, ...extra, ...usage(), pool: native.vmPool() }));
function usage() {
  const fds = readdirSync('/proc/self/fd').map((fd) => { try { return readlinkSync('/proc/self/fd/' + fd); } catch { return ''; } });
  const tasks = readdirSync('/proc/self/task');
  const names = tasks.map((t) => { try { return readFileSync('/proc/self/task/' + t + '/comm', 'utf8').trim(); } catch { return ''; } });
  return { fds: fds.length, kvmVmFds: fds.filter((f) => f === 'anon_inode:kvm-vm').length, threads: tasks.length,
    poolThreads: names.filter((n) => n === 'smol-vm-pool' || n === 'smol-vm-reaper').length,
    pitThreads: pitThreads(process.pid) };
}
function pitThreads(pid) {
  let n = 0;
  for (const task of readdirSync('/proc')) {
    if (!/^\\d+$/.test(task)) continue;
    try { if (readFileSync('/proc/' + task + '/comm', 'utf8').trim() === 'kvm-pit/' + pid) n++; } catch {}
  }
  return n;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function bootAndKill() {
  let exited;
  const done = new Promise((r) => (exited = r));
  const vm = await native.createVm({ kernel, memoryMiB: 16, cpus: 1 }, () => {}, exited);
  vm.start();
  await vm.kill();
  await done;
}
// fork(n) announces a batch of n: the pool keeps that many (at most its max) ready afterwards.
async function forkAndKill(n) {
  let parentExited;
  const parentDone = new Promise((r) => (parentExited = r));
  const parent = await native.createVm({ kernel, memoryMiB: 16, cpus: 1 }, () => {}, parentExited);
  parent.start();
  const ends = [];
  const children = await parent.fork(Array.from({ length: n }, () => {
    let onExit;
    ends.push(new Promise((r) => (onExit = r)));
    return { onConsole() {}, onExit };
  }));
  await Promise.all(children.map((c) => c.kill()));
  await Promise.all(ends);
  await parent.kill();
  await parentDone;
}
async function until(what, ok) {
  for (let i = 0; i < 600 && !ok(native.vmPool()); i++) await sleep(50);
  if (!ok(native.vmPool())) throw new Error('the pool never got to ' + what + ': ' + JSON.stringify(native.vmPool()));
}
(async () => {
  native.vmPool({ max: 0 });
  await bootAndKill();                       // the runtime's own threads and fds, warmed up
  out('warm-up');                             // the first write to stdout opens a file of its own
  native.vmPool({ drain: true });            // the warm-up VM's close, done by the reaper thread, which stops
  await sleep(200);
  out('baseline');
  native.vmPool({ max: 4 });
  await forkAndKill(6);                      // a batch of 6: 4 kept (the max)
  await until('4 ready, the forks closed', (p) => p.ready === 4 && p.reaping === 0);
  await sleep(200);
  out('prepared');
  native.vmPool({ drain: true });
  await sleep(200);
  out('drained');
  await bootAndKill();                       // demand again: the pool starts over
  await until('ready again', (p) => p.ready >= 1);
  out('before exit');
})().catch((e) => { console.error(e.stack); process.exit(1); });
`;

/** The kernel's PIT threads of the KVM VMs of process `pid` (each in-kernel PIT has one, named kvm-pit/PID). */
function pitThreads(pid: number): number {
  let n = 0;
  for (const task of readdirSync('/proc')) {
    if (!/^\d+$/.test(task)) continue;
    try {
      if (readFileSync(`/proc/${task}/comm`, 'utf8').trim() === `kvm-pit/${pid}`) n++;
    } catch {
      // gone meanwhile
    }
  }
  return n;
}

interface Checkpoint {
  what: string;
  fds: number;
  kvmVmFds: number;
  threads: number;
  poolThreads: number;
  pitThreads: number;
  pool: VmPoolStats;
}

describe('prepared VMs', () => {
  it('are kept as demand asks, and a pool never used leaves no fd or thread behind, at a drain and at exit', () => {
    const run = spawnSync(process.execPath, ['-e', script], {
      env: { ...process.env, NATIVE: nativeModulePath, GUEST: guestPath('echo') },
      encoding: 'utf8',
      timeout: 90_000,
    });
    const report = `status ${run.status} signal ${run.signal}\n${run.stdout}\n${run.stderr}`;
    // It exits by itself with VMs still prepared (the module's cleanup drains them): cleanly, by no signal.
    expect(run.status, report).toBe(0);
    expect(run.signal, report).toBeNull();
    const lines = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Checkpoint);
    const at = (what: string) => lines.find((l) => l.what === what)!;
    const [baseline, prepared, drained, beforeExit] = ['baseline', 'prepared', 'drained', 'before exit'].map(at);
    expect(baseline!.kvmVmFds, report).toBe(0);
    expect(baseline!.poolThreads, report).toBe(0);
    // Four empty VMs, each one fd and nothing else, and the pool's thread.
    expect(prepared!.pool.ready, report).toBe(4);
    expect(prepared!.pool.max, report).toBe(4);
    expect(prepared!.kvmVmFds, report).toBe(4);
    expect(prepared!.fds - baseline!.fds, report).toBe(4);
    // The pool's thread, and the reaper that closed the forked VMs.
    expect(prepared!.poolThreads, report).toBe(2);
    // Drained: back to what the process had before, fd for fd and thread for thread.
    expect(drained!.pool.ready, report).toBe(0);
    expect(drained!.kvmVmFds, report).toBe(0);
    expect(drained!.fds, report).toBe(baseline!.fds);
    expect(drained!.threads, report).toBe(baseline!.threads);
    expect(drained!.poolThreads, report).toBe(0);
    expect(beforeExit!.pool.ready, report).toBeGreaterThanOrEqual(1);
    // The VMs prepared at its exit had the kernel's threads (a PIT each; one being made or closed meanwhile has one
    // too), and the exit took them all: none is left behind once the process is gone.
    expect(beforeExit!.pitThreads, report).toBeGreaterThanOrEqual(Math.max(1, beforeExit!.pool.ready));
    expect(pitThreads(run.pid!), report).toBe(0);
    expect(path.isAbsolute(nativeModulePath)).toBe(true);
  });
});
