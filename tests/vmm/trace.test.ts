// Tier 2: the VMM's step timer (docs/snapshots.md, "Where the time goes") on real KVM: every create, restore and
// fork says which steps it took, with their KVM ioctls, and when the VM first ran and printed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Vm, type VmTrace } from '../../src/vmm/vm.js';
import { startGuest, watchConsole } from './guests.js';

const work = mkdtempSync(path.join(tmpdir(), 'smol-trace-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const names = (t: VmTrace) => t.steps.map((s) => s.step);

/** The steps account for the whole native total, and the VM started, entered the guest and printed in that order. */
function expectWhole(t: VmTrace): void {
  const sum = t.steps.reduce((a, s) => a + s.ms, 0);
  expect(sum).toBeCloseTo(t.totalMs, 6);
  expect(t.steps.reduce((a, s) => a + s.kvmIoctls, 0)).toBe(t.kvmIoctls);
  for (const s of t.steps) expect(s.ms).toBeGreaterThanOrEqual(0);
  expect(t.startMs).not.toBeNull();
  expect(t.firstEntryMs!).toBeGreaterThanOrEqual(t.startMs!);
  expect(t.firstOutputMs!).toBeGreaterThanOrEqual(t.firstEntryMs!);
}

describe('operation traces', () => {
  it('a boot names its steps and counts its KVM ioctls, also after the guest has exited', async () => {
    const guest = await startGuest('hello');
    await guest.vm.exited;
    const t = guest.vm.trace();
    expect(names(t)).toEqual(
      expect.arrayContaining(['memory slots', 'vCPUs (CPUID, MSRs, FPU, LAPIC)', 'kernel and boot data']),
    );
    // A prepared KVM VM (docs/snapshots.md, "Prepared VMs") or a new one.
    expect(names(t).filter((n) => n.startsWith('KVM VM ('))).toHaveLength(1);
    // A memory slot and one vCPU's CPUID, MSRs, FPU and LAPIC at least.
    expect(t.kvmIoctls).toBeGreaterThanOrEqual(5);
    expect(t.steps.find((s) => s.step === 'memory slots')!.kvmIoctls).toBe(1);
    expectWhole(t);
  });

  it('a restore traces opening the snapshot, the KVM state and each device it loads', async () => {
    const guest = await startGuest('echo');
    await guest.waitFor(/./);
    const dir = path.join(work, 'snap');
    await guest.vm.checkpoint(dir);
    await guest.vm.kill();
    const vm = await Vm.restore(dir);
    const watched = watchConsole(vm);
    vm.start();
    vm.write('x');
    await watched.waitFor(/x/);
    const t = vm.trace();
    expect(names(t)).toEqual(
      expect.arrayContaining([
        'open snapshot: state',
        'open snapshot: memory layer',
        'guest RAM (map layers)',
        'set KVM state (vCPUs)',
        'load com1',
        'clone hygiene vmgenid',
      ]),
    );
    expectWhole(t);
    await vm.kill();
  });

  it('a checkpoint traces its pause and then its write: the copy, each fsync and the rename', async () => {
    const guest = await startGuest('dirty', { cmdline: 'mib=1' });
    await guest.waitFor(/./);
    await guest.vm.checkpoint(path.join(work, 'ck-full'));
    guest.vm.write('d');
    await guest.waitFor(/dirty=1\n/);
    const { trace: t, kind } = await guest.vm.checkpoint(path.join(work, 'ck-diff'));
    expect(kind).toBe('diff');
    const steps = names(t);
    const at = (name: string) => steps.findIndex((n) => n.startsWith(name));
    // The pause's steps come before the write's, and the write's in the order they run.
    const order = [
      'checkpoint: park the vCPUs',
      'checkpoint: freeze memory',
      'checkpoint: resume',
      'write: copy the memory layer',
      'write: the state',
      'write: fsync the memory layer',
      'write: fsync the state and directory',
      'write: rename, fsync the parent',
    ].map(at);
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    const sum = t.steps.reduce((a, s) => a + s.ms, 0);
    expect(sum).toBeCloseTo(t.totalMs, 6);
    // The capture's KVM ioctls are the checkpoint's; the write makes none.
    expect(t.steps.find((s) => s.step === 'checkpoint: capture KVM state')!.kvmIoctls).toBeGreaterThan(0);
    expect(t.steps.filter((s) => s.step.startsWith('write:')).every((s) => s.kvmIoctls === 0)).toBe(true);
    expect(t.startMs).toBeNull();
    await guest.vm.kill();
  });

  it('each fork child carries the checkpoint, the time of its elder siblings and its own restore', async () => {
    const guest = await startGuest('echo');
    await guest.waitFor(/./);
    const children = await guest.vm.fork(3);
    for (const child of children) {
      const watched = watchConsole(child);
      child.write('x');
      await watched.waitFor(/x/);
    }
    const [first, , last] = children.map((c) => c.trace());
    expect(names(first!)).toContain('checkpoint: capture KVM state');
    expect(names(first!)).not.toContain('fork: the children before this one');
    expect(names(last!)).toContain('fork: the children before this one');
    // One checkpoint for all: the children's traces share its steps.
    const checkpoint = (t: VmTrace) => t.steps.filter((s) => s.step.startsWith('checkpoint:'));
    expect(checkpoint(last!)).toEqual(checkpoint(first!));
    for (const t of [first!, last!]) expectWhole(t);
    await Promise.all([...children, guest.vm].map((vm) => vm.kill()));
  });
});
