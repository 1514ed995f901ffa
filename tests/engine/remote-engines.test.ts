// Tier 2: the app's several engines (docs/remote.md, "The app with several engines"). Two real engines, each in its
// own data dir through the real `smol` CLI: A serves on the loopback (as `smol serve` does for the web app), B over
// TLS with a named token. B is added to A through A's API (probe, fingerprint confirmed), then reached only through
// A: REST, the events and console WebSockets and exec, with A's gate deciding what a read-only caller may do; a
// stopped B is a quick 502 naming it while A's own API goes on.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { CreatedToken, Episode, EngineEvent } from '../../src/api/schema.js';
import { EngineHome } from './engine-home.js';
import { startServe } from './smol-serve.js';

const scratch = mkdtempSync(path.join(tmpdir(), 'smol-engines-'));
// The engines file A keeps its remote engines in (the one `smol engine add` writes), inherited by every engine here.
const enginesFile = path.join(scratch, 'engines.json');
process.env.SMOL_CLIENT_CONFIG = enginesFile;
const local = new EngineHome();
const remote = new EngineHome();
const serving: ChildProcess[] = [];
afterAll(async () => {
  for (const child of serving) if (child.exitCode === null) child.kill('SIGKILL');
  await Promise.all([local.destroy(), remote.destroy()]);
  rmSync(scratch, { recursive: true, force: true });
}, 120_000);

interface Served {
  child: ChildProcess;
  base: string;
  token: string;
  fingerprint: string | null;
}

async function serve(home: EngineHome, args: string[]): Promise<Served> {
  const { child, url, fingerprint } = await startServe(home, args, (started) => serving.push(started));
  return { child, base: `${url.protocol}//${url.host}`, token: url.searchParams.get('token')!, fingerprint };
}

interface Answer {
  status: number;
  body: { error?: { code: number; message: string; reason?: string } } & Record<string, unknown>;
}

/** One request to engine A with `token`; the status and the parsed JSON body. */
async function call(a: Served, method: string, where: string, body?: unknown, token = a.token): Promise<Answer> {
  const response = await fetch(`${a.base}/api/v1${where}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Answer['body']) : {} };
}

/** A WebSocket of engine A: open, or the refusal's status and message. */
function socket(a: Served, where: string, token = a.token): Promise<WebSocket | { status: number; message: string }> {
  const ws = new WebSocket(`${a.base.replace(/^http/, 'ws')}/api/v1${where}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  keepEarlyMessages(ws);
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_request, response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.on('end', () => {
        const message = (JSON.parse(text) as { error: { message: string } }).error.message;
        resolve({ status: response.statusCode ?? 0, message });
      });
    });
    ws.once('error', reject);
  });
}

function opened(result: WebSocket | { status: number; message: string }): WebSocket {
  if (!(result instanceof WebSocket)) throw new Error(`refused ${result.status}: ${result.message}`);
  return result;
}

/**
 * Text messages a socket got before its first `next`: a frame that comes in the same read as the upgrade's answer is
 * emitted before the code awaiting 'open' runs (a clean-clone CI hung 180 s on the console's first screen so,
 * through the relay under load). After the first `next`, each `next` sees only what comes after it, as before.
 */
const early = new WeakMap<WebSocket, { kept: Array<Record<string, unknown>>; stop: () => void }>();

function keepEarlyMessages(ws: WebSocket): void {
  const kept: Array<Record<string, unknown>> = [];
  const onMessage = (data: Buffer, isBinary: boolean) => {
    if (!isBinary) kept.push(JSON.parse(data.toString()) as Record<string, unknown>);
  };
  ws.on('message', onMessage);
  early.set(ws, { kept, stop: () => ws.off('message', onMessage) });
}

/** The next text message of `ws` that `pick` accepts (the first call also looks at what came before it). */
function next<T>(ws: WebSocket, pick: (message: Record<string, unknown>) => T | undefined): Promise<T> {
  return new Promise((resolve) => {
    const before = early.get(ws);
    if (before) {
      early.delete(ws);
      before.stop();
      for (const message of before.kept) {
        const picked = pick(message);
        if (picked !== undefined) return resolve(picked);
      }
    }
    const onMessage = (data: Buffer, isBinary: boolean) => {
      if (isBinary) return;
      const picked = pick(JSON.parse(data.toString()) as Record<string, unknown>);
      if (picked === undefined) return;
      ws.off('message', onMessage);
      resolve(picked);
    };
    ws.on('message', onMessage);
  });
}

describe('the app with several engines', () => {
  it('reach a remote engine through the local one, with the local caller’s scope', async () => {
    const b = await serve(remote, ['--tls']);
    const bToken = await remote.json<CreatedToken>(['token', 'create', 'studio']);
    const a = await serve(local, []);
    expect(a.base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    // Probe: the certificate B presents, from a handshake that sends nothing.
    const probe = await call(a, 'POST', '/engines/probe', { url: b.base });
    expect(probe).toEqual({ status: 200, body: { url: b.base, fingerprint: b.fingerprint, pinned: null } });

    // Refused: a fingerprint not B's, a token B does not know, the name `local`; nothing is kept of them.
    const zeros = Array(32).fill('00').join(':');
    const wrongPin = await call(a, 'POST', '/engines', {
      name: 'b',
      url: b.base,
      token: bToken.token,
      fingerprint: zeros,
    });
    expect(wrongPin.status).toBe(400);
    expect(wrongPin.body.error!.message).toContain(`presented a certificate with SHA-256 fingerprint ${b.fingerprint}`);
    const wrongToken = await call(a, 'POST', '/engines', {
      name: 'b',
      url: b.base,
      token: 'smol_not-a-token-of-b',
      fingerprint: b.fingerprint,
    });
    expect([wrongToken.status, wrongToken.body.error!.reason]).toEqual([400, 'EWRONGTOKEN']);
    expect(wrongToken.body.error!.message).toBe(`the engine at ${b.base} refuses the token (wrong token)`);
    const named = await call(a, 'POST', '/engines', { name: 'local', url: b.base, token: bToken.token });
    expect(named.status).toBe(400);
    expect(named.body.error!.message).toContain('local is the app’s name for its own engine');
    expect((await call(a, 'GET', '/engines')).body).toEqual({ engines: [] });

    // Added with the fingerprint the person confirmed; listed without its token; a second `b` is a 409.
    const added = await call(a, 'POST', '/engines', {
      name: 'b',
      url: b.base,
      token: bToken.token,
      fingerprint: b.fingerprint,
    });
    expect(added.status, JSON.stringify(added.body)).toBe(201);
    expect(added.body).toMatchObject({ name: 'b', url: b.base, fingerprint: b.fingerprint });
    const again = await call(a, 'POST', '/engines', { name: 'b', url: b.base, token: bToken.token });
    expect(again.status).toBe(409);
    const list = await call(a, 'GET', '/engines');
    expect(list.body).toEqual({
      engines: [{ name: 'b', url: b.base, fingerprint: b.fingerprint, added: added.body.added }],
    });
    expect(JSON.stringify(list.body)).not.toContain(bToken.token);
    expect(readFileSync(enginesFile, 'utf8')).toContain(bToken.token); // kept by A, for A only

    // REST through A: an episode created on B, listed there, not on A; B's own 404 comes back as it is.
    const events = opened(await socket(a, '/engines/b/events'));
    const created = next(events, (m) => ((m as EngineEvent).type === 'episode.created' ? m : undefined));
    const smolfile = remote.smolfile('echo', 'kernel = "@guests@/echo.elf"\nmemory = 16\n');
    const up = await call(a, 'POST', '/engines/b/episodes', { smolfile, name: 'far' });
    expect(up.status, JSON.stringify(up.body)).toBe(201);
    const vm = (up.body as unknown as { vm: { id: string } }).vm.id;
    const episodes = await call(a, 'GET', '/engines/b/episodes');
    expect((episodes.body.episodes as Episode[]).map((e) => e.name)).toEqual(['far']);
    expect(((await call(a, 'GET', '/episodes')).body.episodes as Episode[]).length).toBe(0);
    const missing = await call(a, 'GET', '/engines/b/episodes/no-such-episode');
    expect(missing.status).toBe(404);
    expect(missing.body.error!.message).toContain('no-such-episode');
    expect(await created).toMatchObject({ type: 'episode.created' });
    const unknown = await call(a, 'GET', '/engines/nobody/episodes');
    expect([unknown.status, unknown.body.error!.reason]).toEqual([404, 'ENOENGINE']);

    // The console through A: the screen on attach, and what is typed echoed back by the guest.
    const console = opened(await socket(a, `/engines/b/vms/${vm}/console`));
    const echoed = new Promise<void>((resolve) => {
      let seen = '';
      console.on('message', (data: Buffer, isBinary: boolean) => {
        if (isBinary) seen += data.toString();
        if (seen.includes('through-a')) resolve();
      });
    });
    await next(console, (m) => (m.type === 'screen' ? m : undefined));
    console.send(Buffer.from('through-a\r'), { binary: true });
    await echoed;
    console.close();

    // Exec through A reaches B's exec (the echo guest has no agent: B's own answer comes back through the relay).
    const exec = opened(await socket(a, `/engines/b/vms/${vm}/exec`));
    const execAnswer = next(exec, (m) => (m.type === 'error' || m.type === 'exit' ? m : undefined));
    exec.send(JSON.stringify({ argv: ['true'] }));
    expect(await execAnswer).toMatchObject({ type: 'error' });
    exec.close();

    // A read-only token of A reads through A, and nothing more, whatever B's token may do.
    const viewer = await local.json<CreatedToken>(['token', 'create', 'viewer', '--read-only']);
    expect((await call(a, 'GET', '/engines/b/episodes', undefined, viewer.token)).status).toBe(200);
    const write = await call(a, 'POST', '/engines/b/episodes', { smolfile }, viewer.token);
    expect([write.status, write.body.error!.message]).toEqual([
      403,
      'the token viewer is read-only: POST /api/v1/engines/b/episodes needs a full token',
    ]);
    expect((await call(a, 'GET', '/engines/b/tokens', undefined, viewer.token)).status).toBe(403);
    expect((await call(a, 'POST', '/engines', { name: 'c', url: b.base, token: 'x' }, viewer.token)).status).toBe(403);
    expect((await call(a, 'DELETE', '/engines/b', undefined, viewer.token)).status).toBe(403);
    expect((await call(a, 'POST', '/engines/probe', { url: b.base }, viewer.token)).status).toBe(403);
    expect((await call(a, 'GET', '/engines', undefined, viewer.token)).status).toBe(200);
    expect(await socket(a, `/engines/b/vms/${vm}/exec`, viewer.token)).toEqual({
      status: 403,
      message: 'the token viewer is read-only: running a command in a guest needs a full token',
    });
    const watching = opened(await socket(a, `/engines/b/vms/${vm}/console`, viewer.token));
    await next(watching, (m) => (m.type === 'screen' ? m : undefined));
    const refusedTyping = next(watching, (m) => (m.type === 'error' ? m.message : undefined));
    watching.send(Buffer.from('x'), { binary: true });
    expect(await refusedTyping).toBe('the token viewer is read-only: typing needs a full token');
    watching.close();

    // B's token revoked there: a 502 that says so, never a 401 the page would take for its own.
    const spare = await remote.json<CreatedToken>(['token', 'create', 'spare']);
    expect((await call(a, 'POST', '/engines', { name: 'b2', url: b.base, token: spare.token })).status).toBe(201);
    expect((await remote.smol(['token', 'rm', 'spare'])).status).toBe(0);
    const revoked = await call(a, 'GET', '/engines/b2/episodes');
    expect([revoked.status, revoked.body.error!.reason]).toEqual([502, 'EREMOTETOKEN']);
    expect(revoked.body.error!.message).toBe(
      'the engine b2 refuses the token it was added with (wrong token): add it again with a valid token',
    );
    expect((await call(a, 'DELETE', '/engines/b2')).status).toBe(204);

    // B stopped: its event stream ends, a request for it is a quick 502 naming it, and A answers as before.
    const ended = new Promise((resolve) => events.once('close', resolve));
    b.child.kill('SIGKILL');
    process.kill(remote.enginePid()!, 'SIGKILL');
    await ended;
    const started = Date.now();
    const gone = await call(a, 'GET', '/engines/b/episodes');
    expect(Date.now() - started).toBeLessThan(1000);
    expect([gone.status, gone.body.error!.reason]).toEqual([502, 'EUNREACHABLE']);
    expect(gone.body.error!.message).toMatch(new RegExp(`^the engine b \\(${b.base}\\) is unreachable: `));
    expect(await socket(a, '/engines/b/events')).toMatchObject({ status: 502 });
    expect((await call(a, 'GET', '/episodes')).status).toBe(200);
    expect((await call(a, 'GET', '/health')).status).toBe(200);

    // Removed: gone from the list, and its routes say there is no such engine.
    expect((await call(a, 'DELETE', '/engines/b')).status).toBe(204);
    expect((await call(a, 'GET', '/engines')).body).toEqual({ engines: [] });
    expect((await call(a, 'GET', '/engines/b/episodes')).status).toBe(404);
    expect((await call(a, 'DELETE', '/engines/b')).status).toBe(404);
  }, 180_000);
});
