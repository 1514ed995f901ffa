// Tier 3: the engine with the Linux guest. `smolfiles/shell.smolfile` boots (its base snapshot baked: boot, then
// `init`), reset goes back to the base without running `init` again, and the fan-out example in examples/ runs.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol } from '../../sdk/typescript/smol.js';
import { consoleRun, EngineHome, root } from '../engine/engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 180_000);
const shell = path.join(root, 'smolfiles', 'shell.smolfile');

const run = consoleRun;

describe('an episode of smolfiles/shell.smolfile', () => {
  let smol: Smol;
  let vm: string;
  let episode: string;

  beforeAll(async () => {
    smol = await home.client();
    const created = await smol.up(shell, { name: 'shell' });
    vm = created.vm.id;
    episode = created.episode.id;
  }, 600_000);

  it('boots to a shell whose init ran once, with the Smolfile env and workdir', async () => {
    expect(await run(smol, vm, 'cat /work/hello.txt; pwd; echo $EDITOR', 1)).toBe('made by init\n/work\nvi\n');
    const base = (await smol.snapshots(episode)).find((s) => s.kind === 'base');
    expect(base?.note).toContain('mkdir -p /work');
  });

  it('reset goes back to the base: what the VM wrote is gone and init did not run again', async () => {
    await run(smol, vm, 'echo dirty > /work/mess; echo again >> /work/hello.txt', 2);
    await smol.reset(vm);
    expect(await run(smol, vm, 'ls /work; cat /work/hello.txt', 3)).toBe('hello.txt\nmade by init\n');
  });

  it('a second episode of the same Smolfile starts from the same base snapshot instead of booting', async () => {
    const second = await smol.up(shell, { name: 'shell-again' });
    const first = await smol.episode(episode);
    expect(second.episode.base).toBe(first.base);
    expect(await run(smol, second.vm.id, 'cat /work/hello.txt', 4)).toBe('made by init\n');
    await smol.destroy(second.episode.id);
  });
});

describe('examples/fanout.mjs', () => {
  it('forks a warm VM, scores each branch and keeps the best one', async () => {
    const result = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [path.join(root, 'examples', 'fanout.mjs'), shell, '3'], {
        env: { ...process.env, SMOL_HOME: home.dir },
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });
    expect(result.status, result.stderr).toBe(0);
    const summary = JSON.parse(result.stdout) as {
      episode: string;
      scores: Array<{ vm: string; score: number }>;
      best: { vm: string; score: number; snapshot: string };
    };
    expect(summary.scores).toHaveLength(3);
    expect(summary.best.score).toBe(Math.max(...summary.scores.map((s) => s.score)));
    const smol = await home.client();
    const vms = (await smol.episode(summary.episode)).vms.map((vm) => vm.id);
    expect(vms).toContain(summary.best.vm);
    for (const { vm } of summary.scores) if (vm !== summary.best.vm) expect(vms).not.toContain(vm);
    const best = (await smol.snapshots(summary.episode)).find((s) => s.id === summary.best.snapshot);
    expect(best?.note).toBe(`best of 3: score ${summary.best.score}`);
  }, 600_000);
});
