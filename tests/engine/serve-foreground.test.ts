// `smol serve` and `npm start` as a user runs them: they stay in the foreground, serving, until Ctrl-C (or SIGTERM,
// or the terminal closing), then close the engine's TCP listener and exit 0. Once they exited at once with status 13
// (Node's "unsettled top-level await") and left the token-guarded port open inside the engine. An engine that stops
// under `smol serve` is waited out: the next one is served at the same URL with the same token.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { EngineHome, eventually, root, sleep } from './engine-home.js';

interface Served {
  child: ChildProcess;
  url: URL;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output: () => string;
}

function start(home: EngineHome, argv: string[]): Promise<Served> {
  const child = spawn(process.execPath, argv, { cwd: root, env: { ...process.env, SMOL_HOME: home.dir } });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return eventually(
    'the URL on stdout',
    async () => {
      const match = /(http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]+)/.exec(output);
      if (child.exitCode !== null) throw new Error(`exited ${child.exitCode} before serving:\n${output}`);
      return match ? { child, url: new URL(match[1]!), exit, output: () => output } : undefined;
    },
    60_000,
  );
}

/** The status of an API request on the served port, or 'closed' when nothing listens there any more. */
async function probe(url: URL, token = true): Promise<number | 'closed'> {
  const target = new URL('/api/v1/episodes', url);
  if (token) target.searchParams.set('token', url.searchParams.get('token')!);
  try {
    return (await fetch(target)).status;
  } catch {
    return 'closed';
  }
}

describe('serving in the foreground', () => {
  let home: EngineHome;
  afterEach(async () => {
    await home.destroy();
  });

  for (const [name, argv] of [
    ['smol serve', [path.join(root, 'bin', 'smol.js'), 'serve']],
    ['npm start (web mode where Electron is missing)', [path.join(root, 'scripts', 'start.js')]],
  ] as const) {
    it(`${name} keeps serving until Ctrl-C, then closes its port and exits 0`, async () => {
      home = new EngineHome();
      const served = await start(home, [...argv]);
      await sleep(3000);
      expect(served.child.exitCode, served.output()).toBeNull();
      expect(await probe(served.url)).toBe(200);
      expect(await probe(served.url, false)).toBe(401);

      served.child.kill('SIGINT');
      expect(await served.exit).toEqual({ code: 0, signal: null });
      expect(await probe(served.url)).toBe('closed');
    });
  }

  it('smol serve stops on SIGTERM and on its terminal closing (SIGHUP) the same way', async () => {
    home = new EngineHome();
    for (const signal of ['SIGTERM', 'SIGHUP'] as const) {
      const served = await start(home, [path.join(root, 'bin', 'smol.js'), 'serve']);
      expect(await probe(served.url)).toBe(200);
      served.child.kill(signal);
      expect(await served.exit).toEqual({ code: 0, signal: null });
      expect(await probe(served.url)).toBe('closed');
    }
  });

  it('smol serve waits out an engine restart and serves the next engine at the same URL, token and all', async () => {
    home = new EngineHome();
    const served = await start(home, [path.join(root, 'bin', 'smol.js'), 'serve']);
    expect((await home.smol(['engine', 'stop'])).status).toBe(0);
    await eventually('the port to close', async () => ((await probe(served.url)) === 'closed' ? true : undefined));
    await eventually(
      'the wait to be said',
      async () => /waiting for the next engine/.test(served.output()) || undefined,
    );
    expect(served.child.exitCode).toBeNull();
    // The next engine, started as any command starts one: the same URL answers again, with the same token.
    expect((await home.smol(['ls'])).status).toBe(0);
    await eventually('the same URL to answer', async () => ((await probe(served.url)) === 200 ? true : undefined));
    expect(await probe(served.url, false)).toBe(401);
    served.child.kill('SIGINT');
    expect(await served.exit).toEqual({ code: 0, signal: null });
    expect(await probe(served.url)).toBe('closed');
  });

  it('a token replaced with smol serve --rotate-token opens nothing, on listeners already open too', async () => {
    home = new EngineHome();
    const first = await start(home, [path.join(root, 'bin', 'smol.js'), 'serve']);
    // A stream opened with the old token is closed by the rotation, not left running.
    const events = new URL(first.url);
    events.protocol = 'ws:';
    events.pathname = '/api/v1/events';
    const stream = new WebSocket(events);
    await new Promise((resolve, reject) => stream.once('open', resolve).once('error', reject));
    const closed = new Promise<[number, string]>((resolve) =>
      stream.once('close', (code, reason) => resolve([code, reason.toString()])),
    );
    const second = await start(home, [path.join(root, 'bin', 'smol.js'), 'serve', '--rotate-token']);
    expect(await closed).toEqual([1008, 'the serve token was rotated']);
    const token = second.url.searchParams.get('token')!;
    expect(token).not.toBe(first.url.searchParams.get('token'));
    // The first serve's port was this data dir's: taken, so the second says it took another.
    expect(second.url.port).not.toBe(first.url.port);
    expect(second.output()).toMatch(
      new RegExp(`port ${first.url.port}, where this data dir was served before, is taken`),
    );
    expect(await probe(first.url)).toBe(401);
    const renewed = new URL(first.url);
    renewed.searchParams.set('token', token);
    expect(await probe(renewed)).toBe(200);
    for (const served of [first, second]) {
      served.child.kill('SIGINT');
      expect(await served.exit).toEqual({ code: 0, signal: null });
    }
  });
});
