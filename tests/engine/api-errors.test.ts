// Tier 2, end to end: a failure the VMM reports keeps its kind through the binding, the vmhost and the API, and
// becomes the right HTTP status with the errno name as `error.reason` (the SDK's `err.code`); a known condition is
// never a 500 (docs/engine.md, "API errors"). Real conditions on real VMs of the echo guest.
import { execFileSync } from 'node:child_process';
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClientError } from '../../src/api/api-client.js';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome } from './engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 120_000);

/** What a call to the engine failed with: its status, `code` and message. */
async function refused(work: Promise<unknown>): Promise<{ status: number; code?: string; message: string }> {
  const error = await work.then(
    () => new Error('the engine did not refuse it'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiClientError);
  const { status, code, message } = error as ApiClientError;
  return { status, code, message };
}

describe('the API answers a VMM failure with the status of its kind', () => {
  let smol: Smol;
  let echo: string;

  beforeAll(async () => {
    smol = await home.client();
    echo = home.smolfile('echo', `kernel = "@guests@/echo.elf"\nmemory = 16\n`);
  });

  it('a kernel that is not one is a 400 ENOEXEC, and the VM is crashed with the reason', async () => {
    const notKernel = path.join(home.dir, 'not-a-kernel.elf');
    writeFileSync(notKernel, 'this is not a kernel\n'.repeat(20));
    const smolfile = home.smolfile('bad-kernel', `kernel = "${notKernel}"\nmemory = 16\n`);
    const failure = await refused(smol.up(smolfile, { name: 'bad-kernel' }));
    expect(failure).toMatchObject({ status: 400, code: 'ENOEXEC', message: /not-a-kernel\.elf: not an ELF64/ });
    const [vm] = (await smol.episode('bad-kernel')).vms;
    expect(vm).toMatchObject({ state: 'crashed', exit: { message: /not an ELF64/ } });
  });

  it('restoring a snapshot whose files are gone is a 404 ENOENT', async () => {
    const { vm } = await smol.up(echo, { name: 'gone' });
    const snapshot = await smol.checkpoint(vm.id, { name: 'doomed' });
    await smol.stop(vm.id); // a stopped VM is restored without a restore point first
    rmSync(path.join(home.dir, 'snapshots', snapshot.id), { recursive: true, force: true });
    const failure = await refused(smol.restore(vm.id, snapshot.id));
    expect(failure).toMatchObject({ status: 404, code: 'ENOENT', message: new RegExp(snapshot.id) });
  });

  it('a vmhost out of file descriptors answers a checkpoint with 503 EMFILE, and checkpoints again once it has them', async () => {
    const { episode, vm } = await smol.up(echo, { name: 'starved' });
    const pid = home.vmhosts().get(episode.id);
    expect(pid, 'the episode has a vmhost').toBeDefined();
    // The lowest free descriptor number is the limit: the process can open nothing more.
    const open = new Set(readdirSync(`/proc/${pid}/fd`).map(Number));
    let lowestFree = 0;
    while (open.has(lowestFree)) lowestFree++;
    const limits = (soft: number | string) => execFileSync('prlimit', [`--pid=${pid}`, `--nofile=${soft}:`]);
    const before = execFileSync('prlimit', [`--pid=${pid}`, '--nofile', '--raw', '--noheadings', '--output=SOFT'])
      .toString()
      .trim();
    limits(lowestFree);
    try {
      const failure = await refused(smol.checkpoint(vm.id, { name: 'starved' }));
      expect(failure).toMatchObject({ status: 503, code: 'EMFILE' });
    } finally {
      limits(before);
    }
    expect((await smol.checkpoint(vm.id, { name: 'fed' })).name).toBe('fed');
    expect((await smol.vm(vm.id)).state).toBe('running');
  });

  it('checkpoints asked for at once are taken one after the other: neither is refused as busy', async () => {
    const { vm } = await smol.up(echo, { name: 'twice' });
    const both = await Promise.all([smol.checkpoint(vm.id, { name: 'a' }), smol.checkpoint(vm.id, { name: 'b' })]);
    expect(both.map((s) => s.name)).toEqual(['a', 'b']);
  });
});
