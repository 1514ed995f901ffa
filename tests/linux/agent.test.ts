// Tier 3: the guest agent through the engine, with the Linux guest (docs/agent.md): `smol run` and `smol exec`
// relay output and exit statuses, the SDK's exec, readFile and writeFile, concurrent execs, a 64 MiB file both
// ways, and the agent answering again after a restore, a reset and in every fork (each fork with its own identity).
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome, root } from '../engine/engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 180_000);
const shell = path.join(root, 'smolfiles', 'shell.smolfile');
const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

/** `smol ARGS` against this test's engine: its status and output. */
function smolCli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(root, 'bin', 'smol.js'), ...args], {
      env: { ...process.env, SMOL_HOME: home.dir },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

const text = async (smol: Smol, vm: string, script: string) =>
  (await smol.exec(vm, ['sh', '-c', script])).stdout.toString();

describe('the guest agent through the engine', () => {
  let smol: Smol;
  let vm: string;
  let episode: string;

  beforeAll(async () => {
    smol = await home.client();
    const created = await smol.up(shell, { name: 'agent' });
    vm = created.vm.id;
    episode = created.episode.id;
  }, 600_000);

  it('smol run boots a fresh episode, relays the output, exits with the status and deletes it', async () => {
    const before = (await smol.episodes()).length;
    const result = await smolCli(['run', '-f', shell, '--', 'sh', '-c', 'echo hi; echo oops >&2; exit 7']);
    expect(result.stdout).toBe('hi\n');
    expect(result.stderr).toContain('oops\n');
    expect(result.status).toBe(7);
    expect((await smol.episodes()).length).toBe(before);
  }, 600_000);

  it('smol exec runs in a running VM, in the Smolfile environment it asks for', async () => {
    const ok = await smolCli(['exec', '-e', 'WHO=agent', '-w', '/work', vm, '--', 'sh', '-c', 'echo $WHO $(pwd)']);
    expect(ok).toMatchObject({ status: 0, stdout: 'agent /work\n' });
    const missing = await smolCli(['exec', vm, '--', '/no/such/program']);
    expect(missing.status).not.toBe(0);
    expect(missing.stderr).toMatch(/no\/such\/program/);
    const killed = await smolCli(['exec', '--timeout', '1', vm, '--', 'sleep', '30']);
    expect(killed.status).toBe(124);
  }, 300_000);

  it('runs 8 commands at once and moves a 64 MiB file both ways intact', async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => smol.exec(vm, ['sh', '-c', `sleep 0.3; echo ${i}`])),
    );
    expect(results.map((r) => r.stdout.toString())).toEqual(Array.from({ length: 8 }, (_, i) => `${i}\n`));

    const data = randomBytes(64 << 20);
    expect(await smol.writeFile(vm, '/tmp/big.bin', data)).toEqual({ bytes: data.length });
    expect((await text(smol, vm, 'sha256sum /tmp/big.bin')).split(' ')[0]).toBe(sha256(data));
    expect(sha256(await smol.readFile(vm, '/tmp/big.bin'))).toBe(sha256(data));
    await expect(smol.readFile(vm, '/no/such/file')).rejects.toThrow(/ENOENT|No such file/);
  }, 600_000);

  it('answers again after a checkpoint and restore, and after a reset', async () => {
    await smol.writeFile(vm, '/work/state.txt', 'before\n');
    const snapshot = await smol.checkpoint(vm, { name: 'with-state' });
    await smol.writeFile(vm, '/work/state.txt', 'after\n');
    await smol.restore(vm, snapshot.id);
    expect(await text(smol, vm, 'cat /work/state.txt')).toBe('before\n');
    await smol.reset(vm);
    expect(await text(smol, vm, 'ls /work')).toBe('hello.txt\n');
  }, 600_000);

  it('answers in every fork, each with its own hostname and machine-id, their files apart', async () => {
    const { children } = await smol.fork(vm, 3);
    const ids = await Promise.all(
      children.map(async (child, i) => {
        await smol.writeFile(child.id, '/work/who', `child ${i}\n`);
        return text(smol, child.id, 'hostname; cat /etc/machine-id; cat /work/who');
      }),
    );
    ids.forEach((out, i) => expect(out).toBe(`${children[i]!.name}\n${out.split('\n')[1]}\nchild ${i}\n`));
    expect(new Set(ids.map((out) => out.split('\n')[1])).size).toBe(3);
    expect(await text(smol, vm, 'ls /work')).toBe('hello.txt\n');
    const listed = (await smol.episode(episode)).vms.filter((v) => children.some((c) => c.id === v.id));
    expect(listed.map((v) => v.agent)).toEqual(['ready', 'ready', 'ready']);
  }, 600_000);
});
