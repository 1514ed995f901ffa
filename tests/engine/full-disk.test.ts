// A data dir on a small file system (a loop-mounted ext4 image this test makes): a checkpoint that does not fit fails with
// "no space left" and the sizes, the VM goes on running with its memory whole, nothing is published half-written and
// the store checks clean; with room made, the next checkpoint works. Below the engine's reserve a checkpoint is
// refused before anything is written. Needs root (mount); elsewhere it is skipped, saying so.
import { execFileSync } from 'node:child_process';
import { readdirSync, rmSync, statfsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ApiClientError } from '../../src/api/api-client.js';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome, eventually } from './engine-home.js';

const canMount = process.getuid?.() === 0;
const mounted: Array<{ home: EngineHome; image: string }> = [];

/**
 * A data dir on an ext4 file system of its own (a loop-mounted image) with `freeMiB` left free: a filler file takes
 * the rest, and removing it is how the test makes room. Its engine starts with `env`; its VM (the `dirty` guest)
 * has dirtied 64 MiB of its 128, so a full checkpoint of it cannot fit in 40 MiB.
 */
async function smallHome(freeMiB: number, env: Record<string, string>) {
  const home = new EngineHome();
  const image = `${home.dir}.ext4`;
  execFileSync('truncate', ['-s', '512M', image]);
  execFileSync('mkfs.ext4', ['-q', '-F', '-m', '0', image]);
  execFileSync('mount', ['-o', 'loop', image, home.dir]);
  mounted.push({ home, image });
  const { bavail, bsize } = statfsSync(home.dir);
  const filler = path.join(home.dir, 'filler');
  execFileSync('fallocate', ['-l', String(bavail * bsize - freeMiB * 1024 * 1024), filler]);
  const smolfile = home.smolfile('dirty', `kernel = "@guests@/dirty.elf"\ncmdline = "mib=64"\nmemory = 128\n`);
  Object.assign(process.env, env);
  let vm: string;
  let smol: Smol;
  try {
    vm = (await home.json<{ vm: { id: string } }>(['up', '-f', smolfile, '--name', 'full'])).vm.id;
    smol = await home.client();
  } finally {
    for (const key of Object.keys(env)) delete process.env[key];
  }
  await smol.waitForOutput(vm, /dirty: ready/);
  await smol.write(vm, 'd');
  await smol.waitForOutput(vm, /dirty=1/);
  return { home, smol, vm, makeRoom: () => rmSync(filler) };
}

afterAll(async () => {
  for (const { home, image } of mounted) {
    // destroy() kills the engine and its vmhosts; the directory can go only once the file system is unmounted.
    await home.destroy().catch(() => undefined);
    execFileSync('umount', ['-l', home.dir]);
    rmSync(image, { force: true });
    await home.destroy();
  }
}, 120_000);

/** The snapshot directories in the store (a half-written one would show here). */
function snapshotDirs(home: EngineHome): string[] {
  try {
    return readdirSync(path.join(home.dir, 'snapshots'));
  } catch {
    return [];
  }
}

/** `line` then `next` on the console: in output as printed (CR LF) or in the screen as serialized (cursor moves). */
const afterLine = (line: string, next: string) => new RegExp(`${line}(?:\\r?\\n|\\x1b\\[\\d*[A-Za-z])+${next}`);

async function refusal(promise: Promise<unknown>): Promise<ApiClientError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, 'the checkpoint was expected to be refused').toBeInstanceOf(ApiClientError);
  return error as ApiClientError;
}

describe.skipIf(!canMount)('a data dir on a full file system', { timeout: 300_000 }, () => {
  it('fails a checkpoint that runs out of space mid-write with the sizes, keeps nothing, and the VM goes on', async () => {
    const { home, smol, vm, makeRoom } = await smallHome(40, { SMOL_DISK_RESERVE: '0' });
    const before = snapshotDirs(home);

    const error = await refusal(smol.checkpoint(vm, { name: 'too-big' }));
    expect(error.status).toBe(507);
    expect(error.message).toMatch(
      /^no space left on device: the checkpoint of \S+ needed up to 128 MiB \(its memory\) and .+ was free in /,
    );
    expect(error.message).toMatch(/nothing was kept and the VM goes on/);
    expect(snapshotDirs(home)).toEqual(before);

    // The guest runs on with its memory whole, and the store is as valid as before.
    await smol.write(vm, 'v');
    await smol.waitForOutput(vm, afterLine('dirty=1', 'verify=ok'));
    expect((await smol.vm(vm)).state).toBe('running');
    const check = await home.smol(['store', 'check', '--quick']);
    expect(check.stdout, check.stderr).toMatch(/no problems/);
    expect(check.status).toBe(0);

    // Stopping the engine would suspend the VM to a snapshot that cannot fit: the engine stays, the VM runs on.
    const stop = await home.smol(['engine', 'stop']);
    expect(stop.status).toBe(1);
    expect(stop.stderr).toMatch(
      /the engine did not stop: a VM could not be suspended \(any others are\)\. full \(vm-\w+\): no space left on device: /,
    );
    expect(stop.stderr).toMatch(/; it goes on running\. /);
    expect(stop.stderr).toMatch(/Make room and stop again, or stop with force \(smol engine stop --force\)/);
    expect((await smol.vm(vm)).state).toBe('running');
    await smol.write(vm, 'v');
    await smol.waitForOutput(vm, afterLine('verify=ok', 'verify=ok'));

    // Room made, the same VM checkpoints and its snapshot is whole.
    makeRoom();
    const snapshot = await smol.checkpoint(vm, { name: 'with-room' });
    expect(snapshotDirs(home).sort()).toEqual([...before, snapshot.id].sort());
    const full = await home.smol(['store', 'check']);
    expect(full.stdout, full.stderr).toMatch(/no problems/);
    await smol.write(vm, 'dv');
    await smol.waitForOutput(vm, afterLine('dirty=2', 'verify=ok'));

    // Now a stop suspends it, and the next engine resumes it with its memory whole.
    const stopped = await home.smol(['engine', 'stop']);
    expect(stopped.status, stopped.stderr).toBe(0);
    const again = await home.client();
    await eventually('the VM resumed', async () => ((await again.vm(vm)).state === 'running' ? true : undefined));
    // Its round counter goes on from 2, and every page dirtied before the stop holds its round.
    await again.write(vm, 'dv');
    await again.waitForOutput(vm, afterLine('dirty=3', 'verify=ok'));
  });

  it('refuses a checkpoint below the reserve before writing anything, and the VM goes on', async () => {
    // The default reserve (at least 256 MiB) is more than this file system holds.
    const { home, smol, vm } = await smallHome(40, {});
    const before = snapshotDirs(home);

    const error = await refusal(smol.checkpoint(vm, { name: 'below-reserve' }));
    expect(error.status).toBe(507);
    expect(error.message).toMatch(/^no space left on device for a checkpoint of \S+: .+ free in /);
    expect(error.message).toMatch(/at or below the .+ the engine keeps in reserve \(SMOL_DISK_RESERVE\)/);
    expect(snapshotDirs(home)).toEqual(before);

    await smol.write(vm, 'v');
    await smol.waitForOutput(vm, afterLine('dirty=1', 'verify=ok'));
  });
});
