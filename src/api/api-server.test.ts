// The API's transport: routing, validation, errors, the TCP gate, WebSockets and the Unix socket, through the real
// ApiClient. The engine behind it is a small in-memory EngineApi here; the engine itself (VMs, snapshots, consoles)
// is tested end to end elsewhere (tests/engine/).
import { mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changedLabels } from '../engine/labels.js';
import { startApiServer, type ApiServer } from '../engine/api-server.js';
import { ApiClient, ApiClientError } from './api-client.js';
import { ApiFailure, type ConsoleViewer, type EngineApi } from './engine-api.js';
import { CodedError } from './error-codes.js';
import { FILE_ROUTE, ROUTES, WEBSOCKET_ROUTES } from './routes.js';
import * as s from './schema.js';

const EP = 'ep-aaaaaaaaaa';
const VM = 'vm-aaaaaaaaaa';
const BROKEN = 'vm-bbbbbbbbbb';
const SN = 'sn-aaaaaaaaaa';
const now = '2025-01-01T00:00:00.000Z';

const vm = (id: string, name: string): s.Vm => ({
  ...{ id, name, episode: EP, state: 'running', snapshot: SN, parentVm: null, created: now, runningSince: now },
  ...{ exit: null, cpus: 1, memoryMiB: 256, agent: 'none' as const },
  ...{ ports: [{ host: 41235, guest: 80, url: 'http://127.0.0.1:41235/' }], network: { enabled: true, refused: 0 } },
});
const snapshot = (id = SN): s.Snapshot => ({
  ...{ id, episode: EP, parent: null, layerParent: null, vm: VM, kind: 'manual', name: 'one', note: '' },
  ...{ created: now, diskBytes: 4096, memoryBytes: 1 << 20, cpus: 1, deleted: false },
});
const episode = (): s.Episode => ({
  ...{ id: EP, name: 'demo', state: 'running', smolfile: { path: '/w/Smolfile', text: 'image = "x"' } },
  ...{ created: now, base: SN, vms: [vm(VM, 'main'), vm(BROKEN, 'broken')], snapshotCount: 1, diskBytes: 4096 },
});

/** Just enough of an engine for the transport: one episode with two VMs and a snapshot, in memory. */
function fakeEngine() {
  const listeners = new Set<(event: s.EngineEvent) => void>();
  const viewers: ConsoleViewer[] = [];
  const typed: string[] = [];
  let detached = 0;
  let spawning = 0;
  const find = <T extends { id: string; name: string }>(items: T[], ref: string): T => {
    const found = items.find((item) => item.id === ref || item.name === ref || item.id.startsWith(ref));
    if (!found) throw new ApiFailure(404, `no such thing: ${ref}`);
    return found;
  };
  const getVm = (ref: string) => find(episode().vms, ref);
  const lifecycle = async (ref: string) => getVm(ref);
  const api: EngineApi = {
    health: () => ({ version: '0.1.0', pid: process.pid, home: '/home/smol', started: now }),
    listEpisodes: () => [episode()],
    getEpisode: (ref) => find([episode()], ref),
    createEpisode: async () => ({ episode: episode(), vm: vm(VM, 'main') }),
    deleteEpisode: async (ref, force) => {
      if (!force) throw new ApiFailure(409, `${find([episode()], ref).id} has running VMs; use force`);
    },
    listVms: () => episode().vms,
    getVm,
    updateVm: async (ref, { labels }) => ({ ...getVm(ref), labels: changedLabels({}, labels, ref) }),
    network: async (ref, after = 0) => ({
      ...{ vm: getVm(ref).id, enabled: true, ports: getVm(ref).ports, refused: 2, rules: { host: 2 } },
      ...{ frames: null, sockets: null },
      events: [1, 2]
        .map((seq) => ({
          seq,
          at: now,
          destination: '10.0.2.2',
          port: 9090,
          protocol: 'tcp' as const,
          rule: 'host' as const,
        }))
        .filter((event) => event.seq > after),
    }),
    checkpoint: async (ref, request) => {
      await new Promise((resolve) => setTimeout(resolve, 20)); // long enough for many requests to overlap
      return { ...snapshot(), vm: getVm(ref).id, name: request.name ?? 'auto' };
    },
    forkVm: async (ref, count) => ({
      children: Array.from({ length: count }, (_, i) => ({
        ...vm(`vm-ccccc${String.fromCharCode(97 + (i % 26)).repeat(5)}`, `c${i}`),
        parentVm: ref,
      })),
      snapshot: snapshot(),
    }),
    forkSnapshot: async () => ({ children: [vm('vm-cccccccccc', 'from-snapshot')], snapshot: null }),
    restore: async (ref) => ({ vm: getVm(ref), savedAs: snapshot() }),
    ...{ stop: lifecycle, start: lifecycle, resume: lifecycle },
    // As the vmhost's errors arrive: a CodedError with the VMM's errno name.
    pause: async (ref) => {
      if (getVm(ref).id !== BROKEN) return getVm(ref);
      throw new CodedError({ name: 'Error', message: 'cannot pause: a checkpoint is in progress', code: 'EBUSY' });
    },
    reset: async (ref) => {
      if (getVm(ref).id !== BROKEN) return getVm(ref);
      throw Object.assign(new Error('writing the memory layer: No space left on device'), { code: 'ENOSPC' });
    },
    removeVm: async (ref) => void getVm(ref),
    memoryStats: async (ref) => {
      if (getVm(ref).id === BROKEN) throw new Error('the VMM failed: EIO');
      return { guestBytes: 1, residentBytes: 1, privateBytes: 1, sharedBytes: 0 };
    },
    metrics: (ref) => ({ vm: getVm(ref).id, intervalMs: 2000, samples: [] }),
    exec: async (ref, request) => {
      getVm(ref);
      return { exitCode: 0, signal: null, timedOut: false, stdout: request.argv.join(' '), stderr: '' };
    },
    spawn: async (_ref, request) => {
      // `hang`: an agent that is still being reached, so the command never starts.
      if (request.argv[0] === 'hang') return await new Promise<never>(() => void spawning++);
      throw new ApiFailure(409, 'no agent here');
    },
    readFile: async () => {
      throw new ApiFailure(409, 'no agent here');
    },
    writeFile: async () => {
      throw new ApiFailure(409, 'no agent here');
    },
    logs: (_ref, tail) => ({ text: tail ? `last ${tail}` : 'all', truncated: false }),
    screen: () => ({ text: '$ ', serialized: '$ ' }),
    recording: () => '{"version":2,"width":80,"height":24}\n[0.1,"o","hi"]\n',
    writeConsole: (_ref, data) => void typed.push(data),
    attachConsole: (ref, viewer) => {
      getVm(ref);
      viewers.push(viewer);
      viewer.screen('\x1b[H$ ', 'attach');
      return { write: (data) => void typed.push(data.toString()), detach: () => void detached++ };
    },
    listSnapshots: () => [snapshot()],
    getSnapshot: (ref) => find([snapshot()], ref),
    updateSnapshot: async (ref, { labels, ...request }) => ({
      ...find([snapshot()], ref),
      ...request,
      ...(labels && { labels: changedLabels({}, labels, ref) }),
    }),
    deleteSnapshot: async (ref) => void find([snapshot()], ref),
    packMachine: async ({ path }) => ({ path, bytes: 4096, snapshot: snapshot(), memoryData: 0, layers: 1 }),
    openMachine: async () => ({ episode: episode(), vm: vm(VM, 'main') }),
    inspectMachine: async ({ path }) => ({
      ...{ path, bytes: 12903, format: 2, layers: 2, memoryData: 61440, raw: 70000, stored: 9000, chunks: 5 },
      made: { smol: '0.1.0', host: 'h', platform: 'Linux 6.1 x86_64', at: now, from: 'main' },
      snapshot: { id: SN, name: 'checkpoint-1', kind: 'manual', created: now, cpus: 1, memoryBytes: 16 << 20 },
      boot: [{ role: 'kernel', name: 'count.elf', bytes: 7024 }],
      ...{ disks: [], console: true, smolfile: { name: 'count.smolfile', text: 'memory = 16\n' } },
      cpu: { vendor: 'GenuineIntel', model: 'x', features: 90, missing: [] },
    }),
    diff: async (query) => ({
      from: { id: query.from, name: 'one', vm: VM },
      to: { id: query.to, name: 'two', vm: VM },
      disks: [],
      console: { text: 'between\r\n', note: null },
      timings: { exportMs: 0, readMs: 0 },
    }),
    gc: async () => ({ removed: [], freedBytes: 0 }),
    images: {
      list: () => [],
      pull: async ({ reference }) => ({
        reference,
        name: 'oci-0123456789abcdef',
        file: '/c/oci-0123456789abcdef.ext4',
        digest: `sha256:${'0'.repeat(64)}`,
        cached: false,
        size: 4096,
        allocated: 4096,
        seconds: 1,
      }),
      remove: async () => ({ removed: [], inUse: false }),
      prune: async () => ({ removed: [] }),
    },
    subscribe: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    shutdown: async () => {},
    listen: async ({ port }) => ({ url: `http://127.0.0.1:${port || 4242}/?token=t`, port: port || 4242 }),
    unlisten: async (port) => {
      if (port !== 4242) throw new ApiFailure(404, `no TCP listener on port ${port}`);
    },
    // Named tokens and their gate are tested against a real engine in tests/engine/remote.test.ts.
    listTokens: () => [],
    listEngines: () => [],
    probeEngine: async (url) => ({ url, fingerprint: null, pinned: null }),
    addEngine: async ({ name, url }) => ({ name, url, fingerprint: null, added: now, version: '0.1.0' }),
    // Forwarding to a real remote engine is tested in tests/engine/remote-engines.test.ts.
    removeEngine: (name) => {
      if (name !== 'node-a') throw new ApiFailure(404, `no engine named ${name}`);
    },
    createToken: ({ name, scope }) => ({ name, scope, created: now, lastUsed: null, token: 'smol_x' }),
    removeToken: (name) => {
      if (name !== 'ci') throw new ApiFailure(404, `no token named ${name}`);
    },
  };
  // Every call the server makes into the engine, by name (what a refused request must never reach).
  const calls: string[] = [];
  const counted = new Proxy(api, {
    get: (target, name: keyof EngineApi) => {
      const value = target[name];
      return typeof value === 'function'
        ? (...args: unknown[]) => (calls.push(name), (value as (...a: unknown[]) => unknown).apply(target, args))
        : value;
    },
  });
  return { api: counted, calls, listeners, viewers, typed, detached: () => detached, spawning: () => spawning };
}

type Raw = { status: number; headers: http.IncomingHttpHeaders; text: string };
/** A request exactly as written (for what ApiClient would never send). */
function raw(where: { socketPath: string } | { port: number }, method: string, url: string, init = {} as RawInit) {
  return new Promise<Raw>((resolve, reject) => {
    const req = http.request({ ...where, host: '127.0.0.1', method, path: url, headers: init.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString() }),
      );
    });
    req.on('error', reject);
    req.end(init.body);
  });
}
type RawInit = { body?: string | Buffer; headers?: Record<string, string> };

const until = async (what: string, check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
};

/** The 400 (or other) an ApiClient request rejects with. */
async function failure(promise: Promise<unknown>): Promise<{ status: number; message: string }> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiClientError);
  return { status: (error as ApiClientError).status, message: (error as ApiClientError).message };
}

describe('API transport', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'smol-api-'));
  const socketPath = path.join(dir, 'engine.sock');
  const token = 'secret-token-123';
  const engine = fakeEngine();
  let server: ApiServer;
  let client: ApiClient;
  let port: number;

  beforeAll(async () => {
    server = await startApiServer({ api: engine.api, socketPath, tcp: { host: '127.0.0.1', port: 0, token } });
    client = new ApiClient({ socketPath });
    port = Number(new URL(server.url!).port);
  });
  afterAll(async () => {
    client.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers every route with a body its response schema accepts', async () => {
    const params = { episode: EP, vm: VM, snapshot: SN, token: 'ci', engine: 'node-a' };
    const bodies: Record<string, unknown> = {
      createEpisode: { smolfile: '/w/Smolfile', name: 'demo' },
      checkSmolfile: { text: 'cpus = 1\n' },
      checkpoint: { name: 'before-install', note: 'clean' },
      forkVm: { count: 3 },
      restore: { snapshot: SN },
      writeConsole: { data: 'ls\n' },
      updateSnapshot: { note: 'kept' },
      updateVm: { labels: { reward: 0.83 } },
      exec: { argv: ['echo', 'hi'] },
      pullImage: { reference: 'python:3.12-slim' },
      packMachine: { source: 'main', path: '/w/main.smolmachine' },
      openMachine: { path: '/w/main.smolmachine' },
      inspectMachine: { path: '/w/main.smolmachine' },
      createToken: { name: 'ci' },
      probeEngine: { url: 'http://127.0.0.1:7443' },
      addEngine: { name: 'node-a', url: 'http://127.0.0.1:7443', token: 'smol_x' },
    };
    for (const route of ROUTES) {
      const url = route.path.replace(/:(\w+)/g, (_, name: keyof typeof params) => params[name]);
      const query = route.query?.shape.reference
        ? '?reference=python:3.12-slim&force=true'
        : route.query?.shape.force
          ? '?force=true'
          : route.query?.shape.port
            ? '?port=4242'
            : route.query?.shape.from
              ? '?from=one&to=two'
              : '';
      const body = await client.request(route.method, url + query, bodies[route.operation]);
      if (route.response) expect(() => route.response!.parse(body), `${route.method} ${url}`).not.toThrow();
      else expect(body, `${route.method} ${url}`).toBeUndefined();
    }
    expect(
      (await client.request<s.ForkResponse>('POST', `/api/v1/vms/${VM}/fork`, { count: 3 })).children,
    ).toHaveLength(3);
    expect(engine.typed).toContain('ls\n');
  });

  it('says the status and media type the contract names', async () => {
    const sock = { socketPath };
    const created = await raw(sock, 'POST', '/api/v1/episodes', { body: '{"smolfile":"/w/Smolfile"}' });
    expect(created.status).toBe(201);
    expect(s.CreateEpisodeResponse.parse(JSON.parse(created.text)).vm.id).toBe(VM);
    expect((await raw(sock, 'POST', `/api/v1/vms/${VM}/checkpoint`)).status).toBe(201);
    expect((await raw(sock, 'POST', `/api/v1/vms/main/console`, { body: '{"data":"x"}' })).status).toBe(204);
    expect((await raw(sock, 'POST', '/api/v1/engine/shutdown')).status).toBe(202);
    const recording = await raw(sock, 'GET', `/api/v1/vms/${VM}/recording`);
    expect(recording.headers['content-type']).toBe('application/x-asciicast');
    expect(recording.text.split('\n')[0]).toBe('{"version":2,"width":80,"height":24}');
    expect(await client.request('GET', `/api/v1/vms/${VM}/logs?tail=5`)).toEqual({ text: 'last 5', truncated: false });
  });

  it('answers a VM’s network with its refusals after a seq, and names a bad `after`', async () => {
    const network = s.VmNetwork.parse(await client.request('GET', `/api/v1/vms/${VM}/network?after=1`));
    expect(network.events.map((event) => event.seq)).toEqual([2]);
    expect(network.ports).toEqual([{ host: 41235, guest: 80, url: 'http://127.0.0.1:41235/' }]);
    expect((await failure(client.request('GET', `/api/v1/vms/${VM}/network?after=-1`))).message).toBe(
      'after: expected a number of at least 0',
    );
  });

  it('names the field and what it expects when a request is malformed', async () => {
    const bad = await raw({ socketPath }, 'POST', `/api/v1/vms/${VM}/fork`, { body: '{"count":' });
    expect(bad.status).toBe(400);
    expect(s.ApiError.parse(JSON.parse(bad.text)).error).toMatchObject({ code: 400, message: /^body: malformed JSON/ });
    const fork = (body: unknown) => failure(client.request('POST', `/api/v1/vms/${VM}/fork`, body));
    expect(await fork({ count: 0 })).toEqual({ status: 400, message: 'count: expected a number from 1 to 1024' });
    expect(await fork({ count: '2' })).toEqual({ status: 400, message: 'count: expected a number from 1 to 1024' });
    expect((await fork({ count: 2.5 })).message).toBe('count: expected a whole number from 1 to 1024');
    expect((await fork([])).message).toBe('body: expected a JSON object');
    const up = (body: unknown) => failure(client.request('POST', '/api/v1/episodes', body));
    expect((await up({ smolfile: 5 })).message).toBe('smolfile: expected a string of 1 to 4096 characters');
    expect((await up({})).message).toBe('body: give either smolfile (a path) or text (the Smolfile itself), not both');
    expect((await up({ smolfile: '/w/S', colour: 'red' })).message).toBe(
      'colour: unknown field (expected smolfile, text, directory, name)',
    );
    expect((await up({ text: 'cpus = 1', directory: 'rel' })).message).toBe(
      'directory: an absolute path on the engine’s machine',
    );
    expect((await up({ smolfile: '/w/S', name: '-x' })).message).toMatch(/^name: expected letters, digits/);
    expect((await failure(client.request('POST', `/api/v1/vms/${VM}/stop`, { now: true }))).message).toBe(
      'now: unknown field (body takes none)',
    );
    expect((await failure(client.request('GET', `/api/v1/vms/${VM}/logs?tail=lots`))).message).toBe(
      'tail: expected a number from 1 to 1000000',
    );
    expect((await failure(client.request('GET', `/api/v1/vms?all=1`))).message).toBe(
      'all: unknown query parameter (query takes none)',
    );
    // Found by the API fuzzer (docs/fuzzing.md): an empty or odd name made the message start with ": unknown" or
    // with the name's own spaces; a path that another route's pattern decoded first was a 500 (URIError); a URL the
    // engine-URL pattern let through failed to parse later, a 500 too.
    expect((await failure(client.request('GET', `/api/v1/vms?=1`))).message).toBe(
      '"": unknown query parameter (query takes none)',
    );
    expect((await failure(client.request('POST', `/api/v1/vms/${VM}/stop`, { 'a b': 1 }))).message).toBe(
      '"a b": unknown field (body takes none)',
    );
    const undecodable = await raw({ socketPath }, 'POST', '/api/v1/vms/%u0041/resume', {});
    expect(undecodable.status).toBe(400);
    expect(JSON.parse(undecodable.text).error.message).toBe(
      'path: malformed percent-encoding in /api/v1/vms/%u0041/resume',
    );
    expect(
      (await failure(client.request('POST', '/api/v1/engines/probe', { url: 'http://12\ufffd7.0.0.1:1' }))).message,
    ).toBe('url: an engine URL such as https://10.0.0.2:7443 (this one does not parse)');
    const big = { data: 'x'.repeat((1 << 20) + 10) };
    expect(await failure(client.request('POST', `/api/v1/vms/${VM}/console`, big))).toEqual({
      status: 400,
      message: 'body: larger than 1 MiB',
    });
  });

  it('answers 404 for an unknown path or id and 405 for a wrong method', async () => {
    expect(await failure(client.request('GET', '/api/v1/nothing'))).toEqual({
      status: 404,
      message: 'no such endpoint: GET /api/v1/nothing',
    });
    expect(await failure(client.request('GET', '/api/v1/vms/vm-zzzzzzzzzz'))).toMatchObject({ status: 404 });
    const wrong = await raw({ socketPath }, 'PUT', `/api/v1/vms/${VM}`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.allow).toBe('GET, PATCH, DELETE');
    expect(s.ApiError.parse(JSON.parse(wrong.text)).error.code).toBe(405);
    expect((await raw({ socketPath }, 'GET', '/api/v1/events')).status).toBe(426);
  });

  it('maps an ApiFailure to its status and any other error to 500, and keeps serving', async () => {
    expect(await failure(client.request('DELETE', `/api/v1/episodes/${EP}`))).toEqual({
      status: 409,
      message: `${EP} has running VMs; use force`,
    });
    expect(await client.request('DELETE', `/api/v1/episodes/${EP}?force=true`)).toBeUndefined();
    expect(await failure(client.request('GET', `/api/v1/vms/${BROKEN}/memory`))).toEqual({
      status: 500,
      message: 'the VMM failed: EIO',
    });
    expect(s.Health.parse(await client.request('GET', '/api/v1/health')).pid).toBe(process.pid);
  });

  it('gives an error with an errno name the status of its kind, and the name as `reason` (the client: `code`)', async () => {
    const busy = await client.request('POST', `/api/v1/vms/${BROKEN}/pause`).catch((e: unknown) => e);
    expect(busy).toMatchObject({ status: 409, code: 'EBUSY', message: 'cannot pause: a checkpoint is in progress' });
    const full = await raw({ socketPath }, 'POST', `/api/v1/vms/${BROKEN}/reset`);
    expect(full.status).toBe(507);
    expect(s.ApiError.parse(JSON.parse(full.text)).error).toEqual({
      code: 507,
      message: 'writing the memory layer: No space left on device',
      reason: 'ENOSPC',
    });
    const plain = await client.request('GET', `/api/v1/vms/${BROKEN}/memory`).catch((e: unknown) => e);
    expect((plain as ApiClientError).code).toBeUndefined();
  });

  it('answers 100 concurrent requests', async () => {
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        client.request('POST', `/api/v1/vms/${VM}/checkpoint`, { name: `c${i}` }).then((b) => s.Snapshot.parse(b)),
      ),
    );
    expect(answers.map((answer) => answer.name)).toEqual(Array.from({ length: 100 }, (_, i) => `c${i}`));
  });

  it('makes the Unix socket mode 0600, takes over only a stale socket file, and removes it on close', async () => {
    expect(statSync(socketPath).isSocket()).toBe(true);
    expect(statSync(socketPath).mode & 0o777).toBe(0o600);
    await expect(startApiServer({ api: engine.api, socketPath })).rejects.toThrow(/already answers/);
    writeFileSync(path.join(dir, 'notes.txt'), 'mine');
    await expect(startApiServer({ api: engine.api, socketPath: path.join(dir, 'notes.txt') })).rejects.toThrow(
      /is not a socket/,
    );
    // A socket file nothing listens on (its engine died): bind one elsewhere, move it, stop listening.
    const stale = path.join(dir, 'stale.sock');
    const dead = net.createServer().listen(path.join(dir, 'bound.sock'));
    await new Promise((resolve) => dead.once('listening', resolve));
    renameSync(path.join(dir, 'bound.sock'), stale);
    await new Promise((resolve) => dead.close(resolve));
    const second = await startApiServer({ api: engine.api, socketPath: stale });
    expect(await new ApiClient({ socketPath: stale }).request('GET', '/api/v1/health')).toMatchObject({
      pid: process.pid,
    });
    // Closing ends open streams with a reason and removes the socket file.
    const why = new Promise<string>((resolve) => {
      new ApiClient({ socketPath: stale }).events(() => {}, { onOpen: () => void second.close(), onClose: resolve });
    });
    expect(await why).toBe('the engine is stopping');
    await second.close();
    expect(() => statSync(stale)).toThrow(/ENOENT/);
  });

  it('asks for the token on TCP: header, query or cookie, compared with the real one', async () => {
    const tcp = { port };
    const health = '/api/v1/health';
    const none = await raw(tcp, 'GET', health);
    expect(none.status).toBe(401);
    expect(s.ApiError.parse(JSON.parse(none.text)).error.code).toBe(401);
    expect((await raw(tcp, 'GET', health, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await raw(tcp, 'GET', `${health}?token=${token}x`)).status).toBe(401);
    expect((await raw(tcp, 'GET', health, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    expect((await raw(tcp, 'GET', `${health}?token=${token}`)).status).toBe(200);
    expect((await raw(tcp, 'GET', health, { headers: { cookie: `theme=dark; smol_token=${token}` } })).status).toBe(
      200,
    );
    expect(server.url).toBe(`http://127.0.0.1:${port}/?token=${token}`);
    const remote = new ApiClient({ url: server.url!, token });
    expect(s.EpisodeList.parse(await remote.request('GET', '/api/v1/episodes')).episodes).toHaveLength(1);
    expect(await failure(new ApiClient({ url: server.url!, token: 'nope' }).request('GET', health))).toEqual({
      status: 401,
      message: 'wrong token',
    });
    remote.close();
  });

  it('refuses a request from a foreign Origin on TCP', async () => {
    const headers = (origin: string) => ({ headers: { authorization: `Bearer ${token}`, origin } });
    const foreign = await raw({ port }, 'GET', '/api/v1/vms', headers('http://evil.example'));
    expect(foreign.status).toBe(403);
    expect(s.ApiError.parse(JSON.parse(foreign.text)).error.message).toMatch(/evil\.example/);
    expect((await raw({ port }, 'GET', '/api/v1/vms', headers(`http://127.0.0.1:${port}`))).status).toBe(200);
  });

  it('refuses every route, WebSocket and file path on TCP without the token, and from a foreign Origin', async () => {
    const params = { episode: EP, vm: VM, snapshot: SN };
    const paths = [
      ...ROUTES.map((route) => ({ method: route.method, path: route.path })),
      ...WEBSOCKET_ROUTES.map((ws) => ({ method: 'GET', path: ws.path })),
      { method: 'GET', path: FILE_ROUTE.path },
      { method: 'PUT', path: FILE_ROUTE.path },
    ];
    const calls = engine.calls.length;
    for (const { method, path: pattern } of paths) {
      const url = pattern.replace(/:(\w+)/g, (_, name: keyof typeof params) => params[name]);
      const what = `${method} ${url}`;
      expect((await raw({ port }, method, url)).status, what).toBe(401);
      const foreign = { authorization: `Bearer ${token}`, origin: `http://127.0.0.1:${port + 1}` };
      expect((await raw({ port }, method, url, { headers: foreign })).status, what).toBe(403);
    }
    expect(engine.calls.length, 'no refused request reached the engine').toBe(calls);
  });

  it('refuses what another page of the browser loads (Fetch Metadata), but lets a link open the page', async () => {
    const cookie = { cookie: `smol_token_${port}=${token}` };
    const load = (site: string, mode: string, dest: string, url = '/api/v1/episodes') =>
      raw({ port }, 'GET', url, {
        headers: { ...cookie, 'sec-fetch-site': site, 'sec-fetch-mode': mode, 'sec-fetch-dest': dest },
      });
    const image = await load('same-site', 'no-cors', 'image');
    expect(image.status).toBe(403);
    expect(s.ApiError.parse(JSON.parse(image.text)).error.message).toBe(
      'a same-site image of /api/v1/episodes is refused',
    );
    expect((await load('cross-site', 'no-cors', 'script')).status).toBe(403);
    expect((await load('same-site', 'navigate', 'document')).status).toBe(403); // a link straight into the API
    expect((await load('same-origin', 'cors', 'empty')).status).toBe(200); // the page's own requests
    expect((await load('none', 'navigate', 'document')).status).toBe(200); // typed into the address bar
    expect((await load('cross-site', 'navigate', 'document', '/')).status).not.toBe(403); // a link to the page
  });

  it('refuses a WebSocket on TCP without the token or from a foreign Origin, before upgrading', async () => {
    const closed = (target: ApiClient) =>
      new Promise<string>((resolve) => target.events(() => {}, { onClose: resolve }));
    expect(await closed(new ApiClient({ url: server.url!, token: 'nope' }))).toBe('refused (401): wrong token');
    const upgrade = (headers: Record<string, string>) =>
      raw({ port }, 'GET', '/api/v1/events', {
        headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', ...headers },
      });
    const key = { 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' };
    expect((await upgrade(key)).status).toBe(401);
    expect((await upgrade({ ...key, cookie: `smol_token=${token}`, origin: 'http://evil.example' })).status).toBe(403);
    expect(engine.listeners.size).toBe(0);
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    const remote = new ApiClient({ url: server.url!, token });
    const stream = remote.events(() => {}, { onOpen: opened });
    await open;
    await until('the TCP events stream to subscribe', () => engine.listeners.size === 1);
    stream.close();
    await until('it to unsubscribe', () => engine.listeners.size === 0);
  });

  it('streams events in order and unsubscribes when the viewer leaves', async () => {
    const got: s.EngineEvent[] = [];
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    const stream = client.events((event) => got.push(event), { onOpen: opened });
    await open;
    await until('the stream to subscribe', () => engine.listeners.size === 1);
    const sent: s.EngineEvent[] = Array.from({ length: 50 }, (_, i) => ({
      ...{ type: 'progress', operation: 'fork', vm: VM, done: i, total: 50 },
    }));
    for (const event of sent) for (const listener of engine.listeners) listener(event);
    await until('every event', () => got.length === sent.length);
    expect(got.map((event) => s.EngineEvent.parse(event))).toEqual(sent);
    stream.close();
    await until('the stream to unsubscribe', () => engine.listeners.size === 0);
  });

  it('lets an exec stream be given up before its command started, which ends it with the reason', async () => {
    const running = client.exec(VM, { argv: ['hang'] }, { onStdout: () => {}, onStderr: () => {} });
    await until('the engine to be asked', () => engine.spawning() === 1);
    expect(running.started()).toBe(false);
    running.close();
    await expect(running.exit).rejects.toThrow(/closed by the client/);
  });

  it('gives a console viewer the screen first, then output, and passes its typing on', async () => {
    const seen: string[] = [];
    let closed!: (why: string) => void;
    const ended = new Promise<string>((resolve) => (closed = resolve));
    const before = engine.viewers.length;
    const stream = client.console('main', {
      onScreen: (screen, reason) => seen.push(`screen ${reason} ${JSON.stringify(screen)}`),
      onData: (data) => seen.push(`data ${data.toString()}`),
      onClose: closed,
    });
    stream.write('uname -a\n'); // before the socket opens: sent once it does
    await until('the viewer to attach', () => engine.viewers.length === before + 1);
    const viewer = engine.viewers.at(-1)!;
    viewer.output(Buffer.from('hello '));
    viewer.output(Buffer.from('world'));
    stream.write(Buffer.from([0x03]));
    await until('the output', () => seen.length === 3);
    expect(seen).toEqual(['screen attach "\\u001b[H$ "', 'data hello ', 'data world']);
    await until('the typing', () => engine.typed.includes('\x03'));
    expect(engine.typed).toContain('uname -a\n');
    expect(viewer.backlog()).toBe(0);
    viewer.closed('the VM powered off');
    expect(await ended).toBe('the VM powered off');
    const detached = engine.detached();
    const unknown = await new Promise<string>((resolve) =>
      client.console('nope', { onData: () => {}, onClose: resolve }),
    );
    expect(unknown).toBe('refused (404): no such thing: nope');
    const leaving = client.console(VM, { onData: () => {} });
    await until('the second viewer', () => engine.viewers.length === before + 2);
    leaving.close();
    await until('it to detach', () => engine.detached() === detached + 1);
  });

  it('serves its OpenAPI document', async () => {
    const document = await client.request<{ openapi: string; paths: Record<string, object> }>(
      'GET',
      '/api/v1/openapi.json',
    );
    expect(document.openapi).toBe('3.1.0');
    expect(Object.keys(document.paths)).toContain('/api/v1/vms/{vm}/checkpoint');
  });
});
