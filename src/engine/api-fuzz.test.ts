// The API request parser under mutation (api-fuzz.ts; docs/fuzzing.md, "The API request parser"): a real engine in
// this process (Engine.open on an empty data dir, its named tokens and remote engines as the engine process has
// them) behind the real API server on a Unix socket, sent mutants of a valid request for every route. The property:
// every answer is a success, or a 4xx with a JSON error whose message says what is wrong (a 400 names the field or
// parameter first, `count: expected …`); never a 5xx, never a request left unanswered, nothing thrown out of the
// engine; and it still answers after. In `npm test` 3,000 mutants from a fixed seed; `npm run fuzz -- --target api
// --seconds N` (or `--executions N`) runs it from a fresh seed (SMOL_FUZZ_SECONDS, SMOL_FUZZ_RUNS, SMOL_FUZZ_SEED)
// and keeps a mutant that breaks the property in native/out/fuzz/crashes/.
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from './api-server.js';
import { ApiTokens } from './api-tokens.js';
import { mutantRequest, seedRequests, type FuzzRequest } from './api-fuzz.js';
import { Engine } from './engine.js';
import { keepFinding, prng } from './smolmachine-fuzz.js';
import { RemoteEngines } from './remote-engines.js';

const scratch = mkdtempSync(path.join(tmpdir(), 'smol-api-fuzz-'));
const home = path.join(scratch, 'home');
const socketPath = path.join(scratch, 'engine.sock');

const seconds = Number(process.env.SMOL_FUZZ_SECONDS ?? 0);
// A count of mutants (SMOL_FUZZ_RUNS, `npm run fuzz -- --executions N`) takes as long as it takes.
const timeout = seconds ? (seconds + 120) * 1000 : process.env.SMOL_FUZZ_RUNS ? 24 * 3600_000 : 120_000;
const runsWanted = Number(process.env.SMOL_FUZZ_RUNS ?? (seconds ? Infinity : 3000));
const seed = Number(process.env.SMOL_FUZZ_SEED ?? (seconds || process.env.SMOL_FUZZ_RUNS ? Date.now() % 2 ** 31 : 8));
/** Requests in flight at once (each its own keep-alive connection). */
const PARALLEL = 4;

let engine: Engine;
let server: ApiServer;
let shutdowns = 0;
const escaped: string[] = [];
const onUncaught = (error: Error) => escaped.push(`uncaught: ${error.stack ?? error.message}`);
const onUnhandled = (reason: unknown) => escaped.push(`unhandled rejection: ${(reason as Error)?.stack ?? reason}`);
const agent = new http.Agent({ keepAlive: true, maxSockets: PARALLEL });

interface Answer {
  status: number;
  type: string;
  text: string;
}

function send(request: { method: string; path: string; body: Buffer | null }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        socketPath,
        agent,
        method: request.method,
        path: request.path,
        // A length always: without one, Node sends a GET's or DELETE's body unframed, as the next request.
        headers: { 'content-type': 'application/json', 'content-length': request.body?.length ?? 0 },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            type: String(res.headers['content-type'] ?? ''),
            text: Buffer.concat(chunks).toString(),
          }),
        );
        res.on('error', reject);
      },
    );
    // The guard for a request the engine never answers (a finding, not a measure of speed).
    req.setTimeout(30_000, () => req.destroy(new Error('no answer within 30 s')));
    req.on('error', reject);
    req.end(request.body ?? undefined);
  });
}

/** What is wrong with one answer, or null. */
function judge(request: FuzzRequest, answer: Answer): string | null {
  const { status } = answer;
  // The one 5xx allowed: this engine has no TCP listeners to open (they are the engine process's).
  if (status === 503 && answer.text.includes('this engine cannot open TCP listeners')) return null;
  if (status >= 500) return `HTTP ${status}: ${answer.text.slice(0, 500)}`;
  if (status < 400) return null;
  if (!answer.type.startsWith('application/json')) return `HTTP ${status} as ${answer.type || 'no content type'}`;
  if (request.method === 'HEAD') return null; // no body to read
  let message: unknown;
  try {
    message = (JSON.parse(answer.text) as { error?: { message?: unknown } }).error?.message;
  } catch {
    return `HTTP ${status} with a body that is not JSON: ${answer.text.slice(0, 200)}`;
  }
  if (typeof message !== 'string' || message.trim().length < 8)
    return `HTTP ${status} without a reason: ${answer.text}`;
  if (/undefined|\[object Object\]/.test(message)) return `HTTP ${status} that says nothing: ${message}`;
  // A refusal by the schemas names what is wrong first: a field, a parameter, the body or the path ("count: expected
  // …"); the engine's own 400s are sentences about the thing (the registry, the Smolfile).
  const schemas = /: (expected|missing|unknown (field|query parameter)|malformed)/.test(message);
  if (
    status === 400 &&
    schemas &&
    !/^the Smolfile/.test(message) &&
    !/^("(?:[^"\\]|\\.)*"|[^\s:"]+)[^\s:]*: /.test(message)
  )
    return `a 400 that names no field: ${message.slice(0, 300)}`;
  return null;
}

/** The image cache is shared by every data dir (~/.cache/smol-studio/guest/images): the fuzzer's is its own. */
const cacheBefore = process.env.SMOL_CACHE;

beforeAll(async () => {
  // Before anything reads it: a mutant that prunes or removes images must not reach another engine's cache.
  process.env.SMOL_CACHE = path.join(scratch, 'cache');
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUnhandled);
  const log = () => {};
  engine = await Engine.open({ home, version: '0.0.0-fuzz', log });
  // What the engine process gives it (engine-process.ts); no TCP listeners: `listen` is refused (503).
  engine.tokens = new ApiTokens(home, log);
  engine.remotes = new RemoteEngines(path.join(scratch, 'engines.json'), log);
  // A stop asked for: the engine process would end after answering; here it is counted and the engine goes on.
  engine.onShutdownRequest = () => void shutdowns++;
  server = await startApiServer({ api: engine, socketPath, tokens: engine.tokens as ApiTokens });
}, 60_000);

afterAll(async () => {
  process.off('uncaughtException', onUncaught);
  process.off('unhandledRejection', onUnhandled);
  agent.destroy();
  await server?.close();
  await engine?.suspendAll();
  if (cacheBefore === undefined) delete process.env.SMOL_CACHE;
  else process.env.SMOL_CACHE = cacheBefore;
  rmSync(scratch, { recursive: true, force: true });
}, 60_000);

describe('the API request parser under mutation', { timeout }, () => {
  it('answers every seed request without a 5xx (the seeds are valid requests)', async () => {
    for (const seedRequest of seedRequests()) {
      const request = {
        ...seedRequest,
        body: seedRequest.body === undefined ? null : Buffer.from(JSON.stringify(seedRequest.body)),
        how: 'the seed',
      };
      const query = new URLSearchParams(seedRequest.query).toString();
      const answer = await send({ ...request, path: `${request.path}${query ? `?${query}` : ''}` });
      expect(judge(request, answer), `${seedRequest.operation}: ${answer.text.slice(0, 300)}`).toBeNull();
      // A seed passes validation: what refuses it is the engine (no such VM), never the schema.
      if (answer.status === 400)
        expect(answer.text, seedRequest.operation).not.toMatch(/expected|unknown (field|query)/);
    }
  });

  it(`every mutant is answered with a success or a 4xx that says what is wrong (seed ${seed})`, async () => {
    const random = prng(seed);
    const seeds = seedRequests();
    const until = seconds ? Date.now() + seconds * 1000 : Infinity;
    const statuses = new Map<number, number>();
    const messages = new Set<string>();
    let runs = 0;
    let finding: string | null = null;
    const worker = async () => {
      while (!finding && runs < runsWanted && Date.now() < until) {
        const n = runs++;
        const request = mutantRequest(random, seeds);
        let why: string | null;
        let answer: Answer | null = null;
        try {
          answer = await send(request);
          why = judge(request, answer);
        } catch (error) {
          why = `the request failed: ${(error as Error).message}`;
        }
        if (!why && escaped.length) why = escaped.join('\n');
        if (why) {
          const kept = keepFinding(
            `api-${seed}-${n}.http`,
            Buffer.concat([Buffer.from(`${request.method} ${request.path}\n\n`), request.body ?? Buffer.alloc(0)]),
          );
          finding ??= `mutant ${n} (${request.how}) broke the property, kept as ${kept}: ${why}`;
          return;
        }
        statuses.set(answer!.status, (statuses.get(answer!.status) ?? 0) + 1);
        if (answer!.status >= 400 && request.method !== 'HEAD') {
          const message = (JSON.parse(answer!.text) as { error: { message: string } }).error.message;
          messages.add(
            message
              .replace(/"[^"]*"/g, 'S')
              .replace(/\d+/g, 'N')
              .slice(0, 120),
          );
        }
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    if (finding) expect.fail(finding);
    // The engine still answers, and has made nothing it should not have: no episode, no VM.
    const health = await send({ method: 'GET', path: '/api/v1/health', body: null });
    expect(health.status).toBe(200);
    expect(engine.listEpisodes()).toEqual([]);
    const counts = [...statuses].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`);
    process.stdout.write(
      `fuzz api: ${runs} mutants from seed ${seed}: ${counts.join(', ')}; ${messages.size} kinds of refusal; ` +
        `${shutdowns} stops asked for\n`,
    );
    expect(messages.size).toBeGreaterThan(30);
  });

  it('no mutant names a host off this machine for the engine to reach, nor an image to pull', () => {
    const random = prng(99);
    const seeds = seedRequests();
    let outbound = 0;
    for (let i = 0; i < 20_000; i++) {
      const { body } = mutantRequest(random, seeds);
      let fields: Record<string, unknown>;
      try {
        fields = JSON.parse(body?.toString('utf8') ?? 'null') as Record<string, unknown>;
      } catch {
        continue;
      }
      if (!fields || typeof fields !== 'object') continue;
      if (typeof fields.url === 'string') {
        outbound++;
        expect(fields.url).toMatch(/^https?:\/\/(127\.[\d.]+|\[::1\])(:\d+)?\/?$/);
      }
      if (typeof fields.reference === 'string') {
        outbound++;
        expect(fields.reference).toMatch(/^(127\.[\d.]+|\[::1\]):\d+\//);
      }
      if (typeof fields.text === 'string') expect(fields.text).not.toMatch(/image/i);
    }
    expect(outbound).toBeGreaterThan(100);
  });
});
