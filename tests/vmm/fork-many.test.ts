// Tier 2: a fork of 256 children at once (issue 16, docs/snapshots.md "Prepared VMs") on real KVM: one checkpoint,
// 256 VMs made from it in one call (on several threads), the prepared VMs the first one asked for taken by the
// second. Every child runs on its own: it echoes input typed to it alone, no child (nor the parent) shows another's,
// and each has a VM generation ID of its own, read back from its checkpoint's memory.
import { closeSync, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadNative } from '../../src/vmm/native.js';
import type { Vm } from '../../src/vmm/vm.js';
import { startGuest, watchConsole } from './guests.js';

const N = 256;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const work = mkdtempSync(path.join(tmpdir(), 'smol-fork-many-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Where the VMM puts the 16-byte VM generation ID in guest RAM (native/vmm/acpi.h, VMGENID_ADDR). */
const VMGENID_ADDR = 0xef000;

/**
 * The VM generation ID in a snapshot's memory layer (docs/snapshots.md, "memory"), as hex. The layer must be full:
 * a fork's layers were never written, so each child's first checkpoint writes all its non-zero pages.
 */
function vmgenidOf(snapshotDir: string): string {
  const fd = openSync(path.join(snapshotDir, 'memory'), 'r');
  try {
    const header = Buffer.alloc(64);
    readSync(fd, header, 0, 64, 0);
    expect(header.subarray(0, 8).toString('latin1')).toBe('SMOLMEM\0');
    expect(header.readUInt32LE(12)).toBe(1); // MEM_LAYER_FULL
    const id = Buffer.alloc(16);
    readSync(fd, id, 0, 16, Number(header.readBigUInt64LE(24)) + VMGENID_ADDR);
    return id.toString('hex');
  } finally {
    closeSync(fd);
  }
}

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
  it(`gives each of ${N} children of one parent a VM generation ID of its own, none the parent's`, async () => {
    const parent = await startGuest('echo');
    await parent.waitFor(/ready\n/);
    const children = await parent.vm.fork(N);
    expect(children).toHaveLength(N);
    // Each child runs: it echoes what is typed to it.
    const watched = children.map((vm) => ({ vm, ...watchConsole(vm) }));
    for (let i = 0; i < N; i += 32) {
      const wave = watched.slice(i, i + 32);
      wave.forEach((c, k) => c.vm.write(`id-${i + k};`));
      await Promise.all(wave.map((c, k) => c.waitFor(new RegExp(`id-${i + k};`))));
    }
    // Each child's ID is in its RAM, which its checkpoint writes out, and so is the parent's.
    const ids: string[] = [];
    for (let i = 0; i < N; i += 32) {
      const wave = children.slice(i, i + 32);
      const infos = await Promise.all(wave.map((vm, k) => vm.checkpoint(path.join(work, `child-${i + k}`))));
      ids.push(...infos.map((info) => vmgenidOf(info.dir)));
    }
    const parentId = vmgenidOf((await parent.vm.checkpoint(path.join(work, 'parent'))).dir);
    expect(parentId).not.toBe('0'.repeat(32));
    expect(new Set(ids).size).toBe(N);
    expect(ids).not.toContain(parentId);
    await Promise.all([...children, parent.vm].map((vm) => vm.kill()));
  });

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
