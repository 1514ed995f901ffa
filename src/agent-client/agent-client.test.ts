// The real agent binary (native/out/agent/smol-agent, run on this host with --listen unix:) and the real client:
// only the socket family differs from the guest, where the agent listens on vsock.
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../package-root.js';
import { AgentClient, AgentError } from './agent-client.js';
import { startHostAgent, type HostAgent } from './host-agent.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'smol-agent-'));
let agent: HostAgent;
let client: AgentClient;

beforeAll(async () => {
  const make = spawnSync('make', ['-C', path.join(packageRoot, 'native'), 'agent'], { encoding: 'utf8' });
  if (make.status !== 0) throw new Error(`make -C native agent failed:\n${make.stdout}${make.stderr}`);
  agent = startHostAgent(dir);
  client = new AgentClient({ socketPath: agent.socketPath });
  await client.ready();
}, 60_000);

afterAll(async () => {
  client?.close();
  await agent?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

describe('agent exec', () => {
  it('HELLO names the protocol, the agent version and the boot', () => {
    expect(client.hello).toMatchObject({ protocol: 1, version: '0.3.0', initState: 'not-run', window: 256 * 1024 });
    expect(client.hello.bootId).toMatch(/^[0-9a-f-]{36}$/);
    expect(client.hello.features).toEqual(['exec-user', 'exec-tty']);
  });

  it("sh -c 'echo hi; exit 7' prints hi and exits 7", async () => {
    const result = await client.exec(['sh', '-c', 'echo hi; exit 7']);
    expect(result).toMatchObject({ exitCode: 7, signal: null, timedOut: false });
    expect(result.stdout.toString()).toBe('hi\n');
    expect(result.stderr.toString()).toBe('');
  });

  it('keeps stderr apart from stdout and streams both to callbacks', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const result = await client.exec(['sh', '-c', 'echo to-out; echo to-err >&2; echo more-out'], {
      onStdout: (chunk) => out.push(chunk.toString()),
      onStderr: (chunk) => err.push(chunk.toString()),
    });
    expect(result.exitCode).toBe(0);
    expect(out.join('')).toBe('to-out\nmore-out\n');
    expect(err.join('')).toBe('to-err\n');
  });

  it('passes argv untouched, env, and cwd', async () => {
    const result = await client.exec(['sh', '-c', 'printf "%s|" "$1" "$GREETING" "$(pwd)"', 'sh', 'a b; $c'], {
      env: { GREETING: 'héllo wörld' },
      cwd: dir,
    });
    expect(result.stdout.toString()).toBe(`a b; $c|héllo wörld|${dir}|`);
  });

  it('pipes stdin, more of it than one window, and ends it', async () => {
    const input = randomBytes(3 * 1024 * 1024 + 17);
    const result = await client.exec(['sha256sum'], { stdin: input });
    expect(result.stdout.toString().split(' ')[0]).toBe(sha256(input));
    const lines = await client.exec(['cat'], { stdin: 'one\ntwo\n' });
    expect(lines.stdout.toString()).toBe('one\ntwo\n');
  });

  it('a process that stops reading stdin early does not hang the exec', async () => {
    const result = await client.exec(['head', '-c', '5'], { stdin: randomBytes(2 * 1024 * 1024) });
    expect(result.exitCode).toBe(0);
    expect(result.stdout.length).toBe(5);
  });

  it('a signal ends the process and everything it started, and is reported', async () => {
    const proc = client.spawn(['sh', '-c', 'sleep 100; echo never']);
    expect(await proc.pid).toBeGreaterThan(0);
    await proc.kill('SIGTERM');
    const result = await proc.result;
    expect(result).toMatchObject({ exitCode: null, signal: 'SIGTERM', timedOut: false });
    expect(result.stdout.toString()).toBe('');
  });

  it('a timeout kills the process group and says so', async () => {
    const started = Date.now();
    const result = await client.exec(['sh', '-c', 'sleep 100 & sleep 100'], { timeoutMs: 300 });
    expect(result).toMatchObject({ exitCode: null, signal: 'SIGKILL', timedOut: true });
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('a background process left holding stdout does not hold the exec once the command has exited', async () => {
    const started = Date.now();
    const result = await client.exec(['sh', '-c', 'sleep 8 & echo started']);
    expect(result).toMatchObject({ exitCode: 0, timedOut: false });
    expect(result.stdout.toString()).toBe('started\n');
    expect(Date.now() - started).toBeLessThan(6000); // about 1 s of silence, not the 8 s of sleep
  });

  it('runs 8 execs at once on one connection', async () => {
    const barrier = mkdtempSync(path.join(dir, 'barrier-'));
    // Each waits until all 8 have started: this finishes only if they run concurrently.
    const script = 'touch "$B/$N"; while [ "$(ls "$B" | wc -l)" -lt 8 ]; do sleep 0.02; done; echo "done $N"';
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, n) =>
        client.exec(['sh', '-c', script], { env: { B: barrier, N: String(n) }, timeoutMs: 20_000 }),
      ),
    );
    expect(results.map((r) => [r.exitCode, r.stdout.toString()])).toEqual(
      Array.from({ length: 8 }, (_, n) => [0, `done ${n}\n`]),
    );
  });

  it('a program that does not exist is ENOENT naming it; a missing cwd names the directory', async () => {
    await expect(client.exec(['/no/such/program'])).rejects.toMatchObject({
      code: 'ENOENT',
      path: '/no/such/program',
      message: expect.stringContaining('exec /no/such/program: No such file or directory'),
    });
    await expect(client.exec(['true'], { cwd: '/no/such/dir' })).rejects.toMatchObject({
      code: 'ENOENT',
      message: expect.stringContaining('chdir /no/such/dir'),
    });
  });
});

describe('agent files', () => {
  it('a 64 MiB file round-trips with the same sha256, and the agent never holds it in memory', async () => {
    const source = path.join(dir, 'big.bin');
    const data = randomBytes(64 * 1024 * 1024);
    writeFileSync(source, data);
    const hash = sha256(data);
    const target = path.join(dir, 'copied', 'big.bin');
    const written = await client.writeFile(target, createReadStream(source), { mkdirs: true, mode: 0o600 });
    expect(written.bytes).toBe(data.length);
    expect(statSync(target).mode & 0o777).toBe(0o600);
    const inGuest = await client.exec(['sha256sum', target]);
    expect(inGuest.stdout.toString().split(' ')[0]).toBe(hash);

    const reader = await client.openFile(target);
    expect(reader.size).toBe(data.length);
    const digest = createHash('sha256');
    for await (const chunk of reader.stream) digest.update(chunk as Buffer);
    expect(digest.digest('hex')).toBe(hash);

    const status = readFileSync(`/proc/${agent.process.pid}/status`, 'utf8');
    const peakKiB = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]);
    expect(peakKiB).toBeLessThan(16 * 1024); // a few MiB of buffers, not the 64 MiB file
  }, 120_000);

  it('file transfers and 8 execs streaming output share the connection at once', async () => {
    const data = randomBytes(16 * 1024 * 1024);
    const target = path.join(dir, 'shared.bin');
    const execs = Array.from({ length: 8 }, (_, n) =>
      client.exec(['sh', '-c', `head -c ${(n + 1) * 512 * 1024} /dev/zero`]),
    );
    const [written, ...results] = await Promise.all([client.writeFile(target, data), ...execs]);
    expect(written.bytes).toBe(data.length);
    expect(results.map((r) => r.stdout.length)).toEqual(Array.from({ length: 8 }, (_, n) => (n + 1) * 512 * 1024));
    const [back, again] = await Promise.all([client.readFile(target), client.readFile(target)]);
    expect(sha256(back)).toBe(sha256(data));
    expect(sha256(again)).toBe(sha256(data));
  }, 60_000);

  it('a reader that gives up cancels its transfer in the agent (70 of them do not use up its 64 requests)', async () => {
    const target = path.join(dir, 'cancelled.bin');
    await client.writeFile(target, randomBytes(4 * 1024 * 1024));
    for (let i = 0; i < 70; i++) {
      const reader = await client.openFile(target);
      await new Promise((resolve) => reader.stream.once('data', resolve));
      reader.stream.destroy();
    }
    expect((await client.readFile(target)).length).toBe(4 * 1024 * 1024);
  });

  it('reading a missing file names the path and ENOENT', async () => {
    const missing = path.join(dir, 'no-such-file');
    const error = await client.readFile(missing).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AgentError);
    expect(error).toMatchObject({ code: 'ENOENT', path: missing });
    expect((error as Error).message).toContain(`read ${missing}: No such file or directory`);
  });

  it('reading a directory is EISDIR, a device is refused, and so is a relative path', async () => {
    await expect(client.readFile(dir)).rejects.toMatchObject({ code: 'EISDIR', path: dir });
    await expect(client.readFile('/dev/zero')).rejects.toMatchObject({
      code: 'EINVAL',
      message: expect.stringContaining('read /dev/zero: not a regular file'),
    });
    await expect(client.writeFile('/dev/null', 'x')).rejects.toMatchObject({
      code: 'EINVAL',
      message: expect.stringContaining('write /dev/null: not a regular file'),
    });
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true);
    expect((await client.readFile('/proc/self/stat')).toString()).toMatch(/^\d+ \(smol-agent\)/);
    await expect(client.readFile('relative/file')).rejects.toMatchObject({
      code: 'EINVAL',
      message: expect.stringContaining('needs an absolute path'),
    });
  });

  it('writing into a missing directory is ENOENT unless asked to create it', async () => {
    const target = path.join(dir, 'a', 'b', 'c.txt');
    await expect(client.writeFile(target, 'x')).rejects.toMatchObject({ code: 'ENOENT', path: target });
    await client.writeFile(target, 'made\n', { mkdirs: true });
    expect(readFileSync(target, 'utf8')).toBe('made\n');
    expect((await client.readFile(target)).toString()).toBe('made\n');
  });

  it('replaces a file whole, leaving no temporary file behind', async () => {
    const target = path.join(dir, 'replace.txt');
    await client.writeFile(target, 'first version, longer\n');
    await client.writeFile(target, 'second\n');
    expect(readFileSync(target, 'utf8')).toBe('second\n');
    const left = spawnSync('ls', ['-a', dir], { encoding: 'utf8' }).stdout;
    expect(left).not.toMatch(/\.smol-/);
  });

  it('a failing source cancels the write and keeps the old file', async () => {
    const target = path.join(dir, 'kept.txt');
    await client.writeFile(target, 'old\n');
    async function* failing() {
      yield Buffer.from('partial');
      throw new Error('the source broke');
    }
    await expect(client.writeFile(target, failing())).rejects.toThrow('the source broke');
    expect(readFileSync(target, 'utf8')).toBe('old\n');
    await expect(client.exec(['true'])).resolves.toMatchObject({ exitCode: 0 }); // the connection is fine
  });
});

describe('agent init and identity', () => {
  it('runs init once and answers with the same report afterwards', async () => {
    const counter = path.join(dir, 'init-count');
    const commands = [`echo ran >> ${counter}; echo one`, 'echo two >&2', 'uname -s'];
    const first = await client.initReport(commands);
    expect(first).toMatchObject({ state: 'done', alreadyRan: false });
    expect(first.commands).toEqual([
      { command: commands[0], exitCode: 0, signal: null, timedOut: false, output: 'one\n' },
      { command: commands[1], exitCode: 0, signal: null, timedOut: false, output: 'two\n' },
      { command: commands[2], exitCode: 0, signal: null, timedOut: false, output: 'Linux\n' },
    ]);
    const again = await client.initReport(commands);
    expect(again).toMatchObject({ state: 'done', alreadyRan: true, commands: first.commands });
    expect(readFileSync(counter, 'utf8')).toBe('ran\n');
  });

  it('re-mints the machine-id and hostname files, and says what it could not do outside a guest', async () => {
    const result = await client.remint({ hostname: 'fork-7', machineId: 'ab'.repeat(16) });
    expect(result.generation).toBe(1);
    expect(result.applied).toEqual(['hostname-file', 'machine-id']);
    expect(result.skipped).toEqual([
      "hostname: not the guest's init (needs --system)",
      "entropy: not the guest's init (needs --system)",
    ]);
    expect(readFileSync(path.join(dir, 'machine-id'), 'utf8')).toBe(`${'ab'.repeat(16)}\n`);
    expect(readFileSync(path.join(dir, 'hostname'), 'utf8')).toBe('fork-7\n');
    expect((await client.remint()).generation).toBe(2);
    await expect(client.remint({ machineId: 'not-hex' })).rejects.toMatchObject({
      code: 'EINVAL',
      message: expect.stringContaining("machine-id 'not-hex' is not 32 lowercase hex digits"),
    });
    await expect(client.remint({ hostname: 'bad host' })).rejects.toMatchObject({ code: 'EINVAL' });
  });
});
