// Tier 2: a fork of 256 children at once (issue 16, docs/snapshots.md "Prepared VMs") on real KVM: one checkpoint,
// 256 VMs made from it in one call, the prepared VMs the first one asked for taken by the second. Every child runs
// on its own: it echoes input typed to it alone, and no child (nor the parent) shows another's.
import { describe, expect, it } from 'vitest';
import { loadNative } from '../../src/vmm/native.js';
import type { Vm } from '../../src/vmm/vm.js';
import { startGuest, watchConsole } from './guests.js';

const N = 256;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function forkAndCheck(parent: Vm): Promise<void> {
  const children = await parent.fork(N);
  expect(children).toHaveLength(N);
  const watched = children.map((vm) => ({ vm, ...watchConsole(vm) }));
  for (let i = 0; i < N; i += 32) {
    const wave = watched.slice(i, i + 32);
    wave.forEach((c, k) => c.vm.write(`child-${i + k};`));
    await Promise.all(wave.map((c, k) => c.waitFor(new RegExp(`child-${i + k};`))));
  }
  // Each child's console starts empty at the fork (the parent's output is the parent's) and holds its own line only.
  watched.forEach((c, i) => expect(c.output()).toBe(`child-${i};`));
  await Promise.all(children.map((vm) => vm.kill()));
}

describe(`fork(${N})`, () => {
  it(`makes ${N} children that all run and stay apart, twice, the second time from prepared VMs`, async () => {
    const parent = await startGuest('echo');
    await parent.waitFor(/ready\n/);
    await forkAndCheck(parent.vm);
    // The pool tops itself up in the background: wait until it holds what the first batch asked for.
    const want = Math.min(N, loadNative().vmPool().max);
    for (let i = 0; i < 600 && loadNative().vmPool().ready < want; i++) await sleep(50);
    const before = loadNative().vmPool();
    expect(before.ready).toBe(want);
    await forkAndCheck(parent.vm);
    const after = loadNative().vmPool();
    // The first fork asked for a batch of 256: the pool kept its max of them, and the second fork took them (and
    // more: the pool makes VMs while a batch needs more than it holds).
    expect(after.taken - before.taken).toBeGreaterThanOrEqual(want);
    parent.vm.write('parent;');
    await parent.waitFor(/parent;/);
    expect(parent.output()).toBe('echo: ready\nparent;');
    await parent.vm.kill();
  });
});
