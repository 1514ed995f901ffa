// Tier 3: a Linux guest with its root disk packed into a .smolmachine in one data dir and started from the file in
// another (docs/smolmachine.md, "Disks"): its running process goes on counting from where it was, the files it
// wrote to its disk are there, a later checkpoint and restore in the new store work, and both stores check clean.
// The guest is smolfiles/shell.smolfile's with 128 MiB and one vCPU: a pack reads and compares every page of guest
// RAM (docs/smolmachine.md, "What the figures say"), twice here, and the lab has one vCPU; with 512 MiB and two vCPUs
// this file took 409 s of CI's lab time.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome, root } from '../engine/engine-home.js';

const a = new EngineHome();
const b = new EngineHome();
const scratch = mkdtempSync(path.join(tmpdir(), 'smol-linux-machine-'));
afterAll(async () => {
  await a.destroy();
  await b.destroy();
  rmSync(scratch, { recursive: true, force: true });
}, 180_000);

const sh = async (smol: Smol, vm: string, script: string) =>
  (await smol.exec(vm, ['sh', '-c', script])).stdout.toString();

describe('a Linux guest with a disk, packed and opened elsewhere', () => {
  let one: Smol;
  let two: Smol;
  let vm: string;
  const file = path.join(scratch, 'linux.smolmachine');

  beforeAll(async () => {
    // Both engines start at once (each loads its modules over the lab's 9p).
    [one, two] = await Promise.all([a.client(), b.client()]);
    const shell = readFileSync(path.join(root, 'smolfiles', 'shell.smolfile'), 'utf8');
    const small = shell.replace(/^cpus = 2$/m, 'cpus = 1').replace(/^memory = 512 # MiB$/m, 'memory = 128 # MiB');
    expect(small).toMatch(/^cpus = 1\nmemory = 128 # MiB$/m);
    vm = (await one.up(a.smolfile('shell', small), { name: 'packed' })).vm.id;
  }, 600_000);

  it('keeps its running process and its disk changes', async () => {
    // 5 MiB of data on the root disk (/work is on /dev/vda) and a process that counts in the background.
    await sh(
      one,
      vm,
      'head -c 5242880 /dev/urandom > /work/blob && sha256sum /work/blob > /work/blob.sum && echo kept > /work/note',
    );
    await sh(
      one,
      vm,
      "setsid sh -c 'i=0; while true; do i=$((i+1)); echo $i > /work/count; sleep 0.2; done' </dev/null >/dev/null 2>&1 &",
    );
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const packed = await one.pack(vm, file);
    expect(packed.bytes).toBeGreaterThan(5 << 20); // the random blob does not compress
    const atPack = Number(await sh(one, vm, 'cat /work/count'));
    expect(atPack).toBeGreaterThan(0);

    const opened = await two.upFrom(file, { name: 'opened' });
    const other = opened.vm.id;
    expect(await sh(two, other, 'cat /work/note; cd /work && sha256sum -c blob.sum')).toBe('kept\n/work/blob: OK\n');
    const first = Number(await sh(two, other, 'cat /work/count'));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const later = Number(await sh(two, other, 'cat /work/count'));
    expect(later).toBeGreaterThan(first); // the process runs on in the new store
    expect(first).toBeGreaterThan(0);

    // The new store's snapshots are its own: a checkpoint, a change and a restore.
    const snap = await two.checkpoint(other, { name: 'after-open' });
    await sh(two, other, 'rm /work/note');
    await two.restore(other, snap.id);
    expect(await sh(two, other, 'cat /work/note')).toBe('kept\n');
  }, 600_000);

  it('opens a later pack of the same VM into the same store, on the snapshots and disk files it has', async () => {
    // The second pack's memory diffs against the first's snapshot, which the other store opened (and relocated).
    await sh(one, vm, 'echo later > /work/later');
    const again = path.join(scratch, 'later.smolmachine');
    await one.pack(vm, again);
    const opened = await two.upFrom(again, { name: 'opened-again' });
    expect(await sh(two, opened.vm.id, 'cat /work/note /work/later')).toBe('kept\nlater\n');
  }, 600_000);

  it('leaves both stores clean', async () => {
    const checks = await Promise.all([a, b].map((home) => home.smol(['store', 'check', '--quick'])));
    for (const check of checks) expect(check.status, check.stdout + check.stderr).toBe(0);
  });
});
