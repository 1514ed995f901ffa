// Tier 2, end to end: the engine's whole episode lifecycle through the real `smol` CLI, with tiny guests in real VMs
// (docs/engine.md). The engine is started by the first command, as it is for a user.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Episode, Snapshot, Vm } from '../../src/api/schema.js';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome, eventually } from './engine-home.js';

// Each `smol` run costs seconds inside the KVM lab (Node under emulation), so the commands under test run through
// the CLI once each, and the waiting in between reads the engine through the SDK.
const home = new EngineHome();
afterAll(() => home.destroy(), 120_000);
let smol: Smol;

const counts = (text: string) => [...text.matchAll(/count=(\d+)/g)].map((m) => Number(m[1]));
/**
 * Counts on whole lines only. A pause can fall in the middle of `count=1234\n`: the part the UART had sent shows
 * before a marker, the rest (from the snapshot's FIFO) after it, and neither half is a count.
 */
const wholeCounts = (text: string) => [...text.matchAll(/(?<=^|\n)count=(\d+)\r?\n/g)].map((m) => Number(m[1]));

async function lastCount(vm: string): Promise<number> {
  return counts((await smol.logs(vm)).text).at(-1) ?? 0;
}

/** The counts the VM printed before and after the last recording marker that matches `marker`. */
async function countsAround(vm: string, marker: RegExp): Promise<{ before: number[]; after: number[] }> {
  const recording = await smol.api.call('recording', { params: { vm } });
  let before = '';
  let after = '';
  let seen = false;
  for (const line of recording.split('\n').slice(1)) {
    if (!line) continue;
    const [, kind, data] = JSON.parse(line) as [number, string, string];
    if (kind === 'm' && marker.test(data)) [before, after, seen] = [before + after, '', true];
    else if (kind === 'o') after += data;
  }
  return seen ? { before: wholeCounts(before), after: wholeCounts(after) } : { before: wholeCounts(after), after: [] };
}

async function countsSince(vm: string, marker: RegExp): Promise<number[]> {
  return (await countsAround(vm, marker)).after;
}

// Several `smol` runs per test, each up to tens of seconds inside the lab.
describe('an episode of the counting guest through the CLI', { timeout: 300_000 }, () => {
  let smolfile: string;
  let episode: { id: string; name: string; vm: { id: string; name: string; state: string } };

  beforeAll(async () => {
    smolfile = home.smolfile('count', `kernel = "@guests@/count.elf"\ncmdline = "hz=50"\nmemory = 16\n`);
    episode = await home.json(['up', '-f', smolfile, '--name', 'counter']);
    smol = await home.client();
  });

  it('up starts the engine, prints the new episode and its running VM', () => {
    expect(episode.id).toMatch(/^ep-[a-z2-7]{10}$/);
    expect(episode.name).toBe('counter');
    expect(episode.vm.id).toMatch(/^vm-/);
    expect(episode.vm.state).toBe('running');
    expect(home.enginePid()).not.toBeNull();
  });

  it('ls lists the VM as running, for people and as JSON', async () => {
    const listed = await home.json<{ episodes: Episode[] }>(['ls']);
    const mine = listed.episodes.find((ep) => ep.id === episode.id);
    expect(mine?.vms.map((vm) => [vm.id, vm.state])).toEqual([[episode.vm.id, 'running']]);
    const text = await home.smol(['ls']);
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`${episode.vm.id}\\s+counter\\s+counter\\s+running`));
  });

  it('logs shows the guest counting, and --tail cuts it to the last lines', async () => {
    await eventually('count=20 in the logs', async () => ((await lastCount('counter')) >= 20 ? true : undefined));
    const tail = await home.smol(['logs', 'counter', '--tail', '3']);
    expect(tail.status).toBe(0);
    expect(tail.stdout.trimEnd().split('\n')).toHaveLength(3);
  });

  it('checkpoint with a note, then restore goes back to that count and saves where the VM was', async () => {
    const beforeCheckpoint = await lastCount('counter');
    const snap = await home.json<{ id: string; name: string; snapshot: Snapshot }>([
      'checkpoint',
      'counter',
      '-m',
      'after twenty',
    ]);
    expect(snap.id).toMatch(/^sn-/);
    expect(snap.snapshot.note).toBe('after twenty');
    // The guest went on counting during the checkpoint: it was captured between these two counts.
    const atMarker = (await countsAround('counter', /^checkpoint .*: after twenty$/)).before.at(-1)!;
    expect(atMarker).toBeGreaterThanOrEqual(beforeCheckpoint);
    await eventually('the count to move on', async () =>
      (await lastCount('counter')) > atMarker + 50 ? true : undefined,
    );
    const before = await lastCount('counter');
    const restored = await home.json<{ vm: Vm; savedAs: Snapshot }>(['restore', 'counter', snap.id]);
    expect(restored.vm.snapshot).toBe(snap.id);
    expect(restored.savedAs.kind).toBe('restore-point');
    // After the restore the guest prints counts from the checkpoint on again: lower than where it was.
    const after = await eventually('counts after the restore', async () => {
      const since = await countsSince('counter', /^restore /);
      return since.length >= 3 ? since : undefined;
    });
    expect(after[0]).toBeLessThan(before);
    expect(after[0]).toBeGreaterThanOrEqual(beforeCheckpoint);
    expect(after[0]).toBeLessThanOrEqual(atMarker + 2); // +2: the line the capture split is neither's
  });

  it('fork -n 2 prints two children, and snapshots --tree shows them at the fork point', async () => {
    const forked = await home.json<{ children: Array<{ id: string; name: string }> }>(['fork', 'counter', '-n', '2']);
    expect(forked.children).toHaveLength(2);
    const states = (await smol.episode(episode.id)).vms.map((vm) => vm.state);
    expect(states).toEqual(['running', 'running', 'running']);
    for (const child of forked.children) {
      await eventually(`${child.name} counting`, async () => ((await lastCount(child.id)) > 0 ? true : undefined));
    }
    const tree = await home.smol(['snapshots', 'counter', '--tree']);
    expect(tree.status).toBe(0);
    for (const child of forked.children) expect(tree.stdout).toContain(child.name);
    expect(tree.stdout).toMatch(/fork-1 \[fork\]/);
    // Three counting guests share the lab's one vCPU with Node: keep only the parent running.
    for (const child of forked.children) await smol.removeVm(child.id);
  });

  it('stop suspends to a snapshot, start continues from it', async () => {
    const stopped = await home.json<Vm>(['stop', 'counter']);
    expect(stopped.state).toBe('suspended');
    const started = await home.json<Vm>(['start', 'counter']);
    expect(started.state).toBe('running');
    const { before, after } = await eventually('counts after start', async () => {
      const around = await countsAround('counter', /^resume from /);
      return around.after.length >= 2 ? around : undefined;
    });
    // The VM was paused before its suspend snapshot: the count goes on from the last one it printed (+2 when the
    // pause split a line, which then is whole on neither side).
    const atStop = before.at(-1)!;
    expect(after[0]).toBeGreaterThan(atStop);
    expect(after[0]).toBeLessThanOrEqual(atStop + 2);
  });

  it('reset boots the bare kernel afresh: the count starts over', async () => {
    const reset = await home.json<Vm>(['reset', 'counter']);
    expect(reset.state).toBe('running');
    const after = await eventually('counts after reset', async () => {
      const since = await countsSince('counter', /^reset$/);
      return since.length > 0 ? since : undefined;
    });
    expect(after[0]).toBe(1);
  });

  it('a command on something that does not exist exits 3 and says what it looked for', async () => {
    const result = await home.smol(['checkpoint', 'no-such-vm']);
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(/no VM named or with id no-such-vm/);
  });

  it('rm refuses a running VM without --force (exit 4), removes it with --force', async () => {
    const refused = await home.smol(['rm', 'counter']);
    expect(refused.status).toBe(4);
    expect(refused.stderr).toMatch(/--force/);
    const removed = await home.smol(['rm', 'counter', '--force']);
    expect(removed.status, removed.stderr).toBe(0);
    expect((await smol.episode(episode.id)).vms.map((vm) => vm.name)).not.toContain('counter');
  });

  it('rm --all --force removes every episode with its snapshots', async () => {
    const result = await home.smol(['rm', '--all', '--force']);
    expect(result.status, result.stderr).toBe(0);
    expect(await smol.episodes()).toEqual([]);
  });
});

describe('a Smolfile with errors', () => {
  it('up prints every problem with its line and exits 1, and no episode is made', async () => {
    const bad = home.smolfile('bad', `kernel = "@guests@/count.elf"\ncpus = "two"\nmemroy = 16\n`);
    const result = await home.smol(['up', '-f', bad]);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/:2:\d+: error: .*cpus/);
    expect(result.stderr).toMatch(/:3:\d+: error: .*memroy.*memory/);
    expect(await smol.episodes()).toEqual([]);
  });
});
