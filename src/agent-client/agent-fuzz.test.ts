// The host's decoder of agent frames under mutation (agent-fuzz.ts; docs/fuzzing.md, "The agent protocol"). This
// file plays a hostile agent on a real Unix socket (with and without the vsock muxer's `OK` line) and drives the
// real AgentClient and AgentConnection against it: each case is one connection, its HELLO and one request answered
// by a mutated reply, then the agent hangs up. The property: nothing throws out of the client (no uncaught
// exception, no unhandled rejection); every request settles, with a well-formed result or an AgentError whose
// message says what was wrong; a frame length over the limit is refused from its header, before its bytes arrive;
// the frame parser gives the same frames however the stream is cut. In `npm test` 2,000 cases from a fixed seed;
// `npm run fuzz -- --target agent --seconds N` (or `--executions N`) runs it from a fresh seed (SMOL_FUZZ_SECONDS,
// SMOL_FUZZ_RUNS, SMOL_FUZZ_SEED) and keeps a case that breaks the property in native/out/fuzz/crashes/.
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keepFinding, prng } from '../engine/smolmachine-fuzz.js';
import { AgentClient } from './agent-client.js';
import { AgentConnection } from './agent-connection.js';
import { mutant, type Mutant } from './agent-fuzz.js';
import { AgentError, FrameParser, MAX_PAYLOAD } from './agent-protocol.js';

const scratch = mkdtempSync(path.join(tmpdir(), 'smol-agent-fuzz-'));
const socketPath = path.join(scratch, 'agent.sock');

const seconds = Number(process.env.SMOL_FUZZ_SECONDS ?? 0);
// A count of cases (SMOL_FUZZ_RUNS, `npm run fuzz -- --executions N`) takes as long as it takes.
const timeout = seconds ? (seconds + 120) * 1000 : process.env.SMOL_FUZZ_RUNS ? 24 * 3600_000 : 120_000;
const runsWanted = Number(process.env.SMOL_FUZZ_RUNS ?? (seconds ? Infinity : 2000));
const seed = Number(process.env.SMOL_FUZZ_SEED ?? (seconds || process.env.SMOL_FUZZ_RUNS ? Date.now() % 2 ** 31 : 22));

/** The case the agent end serves next, and what escaped the client while it ran. */
let current: Mutant | null = null;
/** The message the last case's request was refused with, or null when it succeeded. */
let lastError: string | null = null;
const escaped: string[] = [];
const onUncaught = (error: Error) => escaped.push(`uncaught: ${error.stack ?? error.message}`);
const onUnhandled = (reason: unknown) => escaped.push(`unhandled rejection: ${(reason as Error)?.stack ?? reason}`);
let server: net.Server;
/** Resolves when the agent end of the current case's connection has closed. */
let agentClosed: Promise<void> = Promise.resolve();

/** Writes `bytes` in pieces cut at the case's split points (the parser must not care where a read ends). */
function writeSplit(socket: net.Socket, bytes: Buffer, splits: number[]): void {
  let at = 0;
  for (const size of splits) {
    if (at >= bytes.length) break;
    socket.write(bytes.subarray(at, at + 1 + size));
    at += 1 + size;
  }
  if (at < bytes.length) socket.write(bytes.subarray(at));
}

/** The hostile agent: the muxer line, the HELLO, and after the host's first request frame, the reply; then EOF. */
function serveCase(socket: net.Socket): void {
  const mutantNow = current!;
  let closed!: () => void;
  agentClosed = new Promise((resolve) => (closed = resolve));
  socket.on('close', () => closed());
  socket.on('error', () => {});
  let received = Buffer.alloc(0);
  let stage: 'connect' | 'request' | 'done' = mutantNow.muxer ? 'connect' : 'request';
  const greet = () => {
    writeSplit(socket, mutantNow.hello, mutantNow.splits);
    if (mutantNow.scenario !== 'hello') return;
    stage = 'done';
    socket.end();
  };
  if (!mutantNow.muxer) greet();
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    if (stage === 'connect') {
      const newline = received.indexOf(0x0a);
      if (newline < 0) return;
      received = received.subarray(newline + 1);
      socket.write(mutantNow.line);
      stage = 'request';
      greet();
    }
    if (stage === 'request' && received.length >= 12) {
      stage = 'done';
      writeSplit(socket, mutantNow.reply(received.readUInt32LE(8)), mutantNow.splits);
      socket.end();
    }
  });
}

/** How each case's refusal begins: the request it failed (or, for a HELLO, who said what). */
const NAMES: Record<Mutant['scenario'], RegExp> = {
  hello: /^(the agent|the vsock muxer|no HELLO)/,
  exec: /^exec sh -c "echo hi": /,
  read: /^read \/etc\/hostname: /,
  write: /^write \/tmp\/fuzz: /,
  init: /^init: /,
  remint: /^remint: /,
  poweroff: /^poweroff: /,
};

/** What is wrong with how the client took one case, or null. */
async function judge(m: Mutant): Promise<string | null> {
  current = m;
  escaped.length = 0;
  lastError = null;
  const endpoint = { socketPath, vsockPort: m.muxer ? 52 : undefined };
  let outcome: unknown;
  let failed: unknown = null;
  const client = new AgentClient(endpoint);
  const work = async (): Promise<unknown> => {
    if (m.scenario === 'hello') {
      const connection = await AgentConnection.open(endpoint, 10_000);
      const hello = connection.hello;
      connection.close();
      return hello;
    }
    await client.ready({ timeoutMs: 10_000 });
    switch (m.scenario) {
      case 'exec':
        return client.exec(['sh', '-c', 'echo hi'], { timeoutMs: 1000 });
      case 'read':
        return client.readFile('/etc/hostname');
      case 'write':
        return client.writeFile('/tmp/fuzz', 'hello');
      case 'init':
        return client.initReport(['true']);
      case 'remint':
        return client.remint({ hostname: 'fuzz' });
      default:
        return client.poweroff();
    }
  };
  // The agent hangs up after its reply, so every request settles; a guard names one that never does.
  let guard: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => (guard = setTimeout(() => resolve('hung'), 10_000)));
  try {
    outcome = await Promise.race([work(), hung]);
  } catch (error) {
    failed = error;
  } finally {
    clearTimeout(guard);
    client.close();
  }
  await agentClosed;
  // Let the socket's last events run (a throw from a 'data' or 'close' handler shows up as uncaught here).
  await new Promise((resolve) => setImmediate(resolve));
  if (escaped.length) return escaped.join('\n');
  if (outcome === 'hung') return 'the request never settled after the agent hung up';
  if (failed !== null) {
    if (!(failed instanceof AgentError))
      return `the client failed with a ${(failed as Error)?.name ?? typeof failed}, not an AgentError: ${(failed as Error)?.stack ?? failed}`;
    if (failed.message.trim().length < 10 || typeof failed.code !== 'string')
      return `an AgentError without a reason: ${JSON.stringify({ message: failed.message, code: failed.code })}`;
    if (/undefined|NaN|\[object/.test(failed.message)) return `an AgentError that says nothing: ${failed.message}`;
    const request = NAMES[m.scenario];
    if (!request.test(failed.message))
      return `an AgentError that does not name its request (${request}): ${failed.message}`;
    lastError = failed.message;
    return null;
  }
  return checkResult(m, outcome);
}

/** A success must be well formed: numbers that are numbers, strings that are strings. */
function checkResult(m: Mutant, outcome: unknown): string | null {
  const finite = (n: unknown) => typeof n === 'number' && Number.isFinite(n);
  const o = outcome as Record<string, unknown>;
  switch (m.scenario) {
    case 'hello':
      return finite(o.window) && finite(o.generation) && Array.isArray(o.features) ? null : `a HELLO of ${String(o)}`;
    case 'exec':
      if (o.exitCode !== null && !finite(o.exitCode)) return `exit code ${String(o.exitCode)}`;
      return Buffer.isBuffer(o.stdout) && Buffer.isBuffer(o.stderr) ? null : 'exec output is not bytes';
    case 'read':
      return Buffer.isBuffer(outcome) ? null : 'a read that gave no bytes';
    case 'write':
      return finite(o.bytes) ? null : `a write of ${String(o.bytes)} bytes`;
    case 'init':
      return Array.isArray(o.commands) && typeof o.state === 'string' ? null : 'an init report without commands';
    case 'remint':
      return finite(o.generation) && Array.isArray(o.applied) ? null : 'a remint result without its generation';
    default:
      return null;
  }
}

/** The frame parser gives the same frames (or the same refusal) whether the bytes come whole or in pieces. */
function chunkInvariant(bytes: Buffer, random: (n: number) => number): string | null {
  const parse = (pieces: Buffer[]) => {
    const parser = new FrameParser();
    const frames: string[] = [];
    try {
      for (const piece of pieces)
        for (const f of parser.push(piece)) frames.push(`${f.type}/${f.id}/${f.payload.toString('hex')}`);
    } catch (error) {
      return { frames, error: (error as Error).message };
    }
    return { frames, error: null };
  };
  // Up to 16 cuts anywhere: inside headers, length words, fields.
  const cuts = Array.from({ length: 1 + random(16) }, () => random(bytes.length + 1)).sort((a, b) => a - b);
  const pieces = [0, ...cuts].map((from, i) => bytes.subarray(from, cuts[i] ?? bytes.length));
  const whole = parse([bytes]);
  const cut = parse(pieces);
  // A refusal loses the frames before it in the same read; the connection ends there anyway.
  if (whole.error !== cut.error || (whole.error === null && whole.frames.join() !== cut.frames.join()))
    return `the parser differs in pieces: ${whole.error ?? whole.frames.length} vs ${cut.error ?? cut.frames.length}`;
  return null;
}

beforeAll(async () => {
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUnhandled);
  server = net.createServer(serveCase);
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
});

afterAll(async () => {
  process.off('uncaughtException', onUncaught);
  process.off('unhandledRejection', onUnhandled);
  await new Promise((resolve) => server.close(resolve));
  rmSync(scratch, { recursive: true, force: true });
});

describe('the host side of the agent protocol under mutation', { timeout }, () => {
  it('refuses a frame over the limit from its header alone, naming the length', () => {
    const head = Buffer.alloc(12);
    head.writeUInt32LE(0xffffffff, 0);
    expect(() => new FrameParser().push(head)).toThrow(`a frame of 4294967295 bytes (the limit is ${MAX_PAYLOAD})`);
  });

  it(`never throws out of the client, and every request settles with a result or a reason (seed ${seed})`, async () => {
    const random = prng(seed);
    const until = seconds ? Date.now() + seconds * 1000 : Infinity;
    const messages = new Set<string>();
    let runs = 0;
    let refused = 0;
    for (; runs < runsWanted && Date.now() < until; runs++) {
      const m = mutant(random);
      const why = (await judge(m)) ?? chunkInvariant(Buffer.concat([m.hello, m.reply(1)]), random);
      if (why) {
        const kept = keepFinding(
          `agent-${seed}-${runs}.bin`,
          Buffer.concat([Buffer.from(`${m.muxer ? m.line : ''}`), m.hello, m.reply(1)]),
        );
        expect.fail(`case ${runs} (${m.how}) broke the property, kept as ${kept} (its HELLO and reply): ${why}`);
      }
      const last = lastError;
      if (last) {
        refused++;
        messages.add(last.replace(/\d+/g, 'N').replace(/"[^"]*"/g, 'S'));
      }
    }
    process.stdout.write(
      `fuzz agent: ${runs} cases from seed ${seed}: ${refused} refused (${messages.size} kinds of message), ` +
        `${runs - refused} succeeded\n`,
    );
    expect(refused).toBeGreaterThan(runs / 4);
    expect(messages.size).toBeGreaterThan(10);
  });
});
