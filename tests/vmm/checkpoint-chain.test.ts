// Tier 2: one VM checkpointed hundreds of times with old snapshots deleted, as `keep` does (docs/snapshots.md,
// "How long chains get"): the VMM's open files, the chains on disk and the memory every kept snapshot restores to.
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CheckpointInfo } from '../../src/vmm/native.js';
import { Vm } from '../../src/vmm/vm.js';
import { startGuest, watchConsole } from './guests.js';

const work = mkdtempSync(path.join(tmpdir(), 'smol-chain-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const CHECKPOINTS = 300;
const KEEP = 10;

/** This process's open fds: how many, and how many are files under `work` that were deleted. */
function openFiles(): { all: number; deleted: number } {
  let all = 0;
  let deleted = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue; // the directory's own fd, closed by now
    }
    all++;
    if (target.startsWith(work) && target.endsWith(' (deleted)')) deleted++;
  }
  return { all, deleted };
}

/** The snapshot's chain on disk: itself and every parent, newest first. */
function chainOf(info: CheckpointInfo, byDir: Map<string, CheckpointInfo>): string[] {
  const chain = [info.dir];
  for (let p = info.parentDir; p; p = byDir.get(p)!.parentDir) chain.push(p);
  return chain;
}

/** Restores (or takes) a dirty guest and checks that its memory holds round `round` whole. */
async function verifyRound(vm: Vm, round: number): Promise<void> {
  const guest = { vm, ...watchConsole(vm) };
  if (vm.state !== 'running') vm.start();
  vm.write('v');
  await guest.waitFor(/verify=(ok|bad)\n/);
  expect(guest.output(), `round ${round}`).toContain('verify=ok');
  vm.write('d'); // the next round is one more: the memory was this round's
  await guest.waitFor(/dirty=\d+\n/);
  expect(guest.output()).toContain(`dirty=${round + 1}\n`);
  await vm.kill();
}

describe('hundreds of checkpoints of one VM', () => {
  it('keep open files, chains and memory bounded, and every kept snapshot restores its own memory', async () => {
    const guest = await startGuest('dirty', { memoryMiB: 32, cmdline: 'mib=1' });
    await guest.waitFor(/dirty: ready\n/);
    const byDir = new Map<string, CheckpointInfo>();
    const rounds = new Map<string, number>();
    const living: CheckpointInfo[] = [];
    const fds: number[] = [];
    let round = 0;
    for (let i = 1; i <= CHECKPOINTS; i++) {
      if (i % 7 !== 0) {
        // every 7th checkpoint has nothing new: an empty diff over the one before
        guest.vm.write('d');
        round++;
        await guest.waitFor(new RegExp(`dirty=${round}\\n`));
      }
      const info = await guest.vm.checkpoint(path.join(work, `sn-${i}`)); // a failure fails the test
      byDir.set(info.dir, info);
      rounds.set(info.dir, round);
      living.push(info);
      if (living.length > KEEP) {
        // `keep`: the oldest goes unless a living snapshot's chain still needs it
        const needed = new Set(living.slice(1).flatMap((s) => chainOf(s, byDir)));
        const [oldest] = living.splice(0, 1);
        for (const dir of chainOf(oldest!, byDir).filter((d) => !needed.has(d)))
          rmSync(dir, { recursive: true, force: true });
      }
      // The chain on disk stays short: a full snapshot when the nearest one's chain is long.
      expect(chainOf(info, byDir).length).toBeLessThanOrEqual(8);
      if (i % 75 === 0) {
        // a fork of the running VM maps the chain as the VMM holds it now
        const [child] = await guest.vm.fork(1);
        await verifyRound(child!, round);
      }
      const files = openFiles();
      fds.push(files.all);
      expect(files.deleted, `checkpoint ${i}: fds of deleted snapshots`).toBe(0);
    }
    // Bounded: the last 100 checkpoints left no more open than checkpoints 21 to 100 did (it was one more fd per
    // checkpoint): the same median, and peaks (a flat copy being made, a fork's child going) a few fds apart.
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    const early = fds.slice(2 * KEEP, 100);
    const late = fds.slice(-100);
    expect(median(late), `fds: ${fds.join(' ')}`).toBeLessThanOrEqual(median(early) + 1);
    expect(Math.max(...late), `fds: ${fds.join(' ')}`).toBeLessThanOrEqual(Math.max(...early) + 4);
    const kinds = [...byDir.values()].map((s) => s.kind);
    expect(kinds.filter((k) => k === 'full').length).toBeGreaterThanOrEqual(CHECKPOINTS / 10); // empty diffs add no depth
    await guest.vm.kill();

    // Every snapshot still kept, and the chains they need, restore to the memory of their own round.
    const onDisk = new Set(readdirSync(work).map((d) => path.join(work, d)));
    expect(living.every((s) => onDisk.has(s.dir))).toBe(true);
    expect(onDisk.size).toBeLessThanOrEqual(KEEP + 8);
    for (const s of living) await verifyRound(await Vm.restore(s.dir), rounds.get(s.dir)!);
  }, 600_000);
});
