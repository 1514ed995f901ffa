// The host's client against a hostile agent: what the agent-protocol fuzzer found (agent-fuzz.test.ts,
// docs/fuzzing.md, "The agent protocol"), each replayed on a real Unix socket. Before the fixes, a field of the
// wrong size in STARTED or in an ERROR's ERRNO threw out of the socket's 'data' handler and ended the process (the
// engine, when a guest sends it); a bad frame right behind a file read's OK did the same through an 'error' event
// nobody heard; a bad SIZE hung the read; an init report's 3-byte EXIT_CODE was a RangeError; and a frame dripped
// in small reads was copied once per read.
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { AgentClient } from './agent-client.js';
import { AgentError, encodeFields, encodeFrame, Field, FLAG_EOF, FrameParser, FrameType } from './agent-protocol.js';

const scratch = mkdtempSync(path.join(tmpdir(), 'smol-agent-hostile-'));
const socketPath = path.join(scratch, 'agent.sock');
const HELLO = encodeFrame(
  FrameType.HELLO,
  0,
  encodeFields([
    [Field.PROTOCOL, 1],
    [Field.VERSION, '0.3.0'],
    [Field.WINDOW, 256 << 10],
  ]),
);
/** What the hostile agent answers the next request with (given its id), before it hangs up. */
let answer: (id: number) => Buffer = () => Buffer.alloc(0);
let server: net.Server;
const escaped: Error[] = [];
const onUncaught = (error: Error) => escaped.push(error);

beforeAll(async () => {
  process.on('uncaughtException', onUncaught);
  server = net.createServer((socket) => {
    socket.on('error', () => {});
    socket.write(HELLO);
    let got = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      if (got.length >= 12 && got.length - chunk.length < 12) socket.end(answer(got.readUInt32LE(8)));
    });
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
});

afterEach(() => expect(escaped.map((e) => e.stack)).toEqual([]));

afterAll(async () => {
  process.off('uncaughtException', onUncaught);
  await new Promise((resolve) => server.close(resolve));
  rmSync(scratch, { recursive: true, force: true });
});

const u32 = (n: number) => Buffer.from(new Uint32Array([n]).buffer);

/** The request's refusal, which must be an AgentError. */
async function refusal(work: (client: AgentClient) => Promise<unknown>): Promise<AgentError> {
  const client = new AgentClient({ socketPath });
  await client.ready();
  try {
    const error = await work(client).then(
      () => new Error('the client took it'),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AgentError);
    // A throw from a socket handler shows up once its events have run.
    await new Promise((resolve) => setImmediate(resolve));
    return error as AgentError;
  } finally {
    client.close();
  }
}

describe('the agent client against a hostile agent', () => {
  it('a STARTED whose PID is 4 bytes fails the exec, naming the field, and the process goes on', async () => {
    answer = (id) => encodeFrame(FrameType.STARTED, id, encodeFields([[Field.PID, u32(4242)]]));
    const error = await refusal((client) => client.exec(['true']));
    expect(error).toMatchObject({ code: 'EPROTO', message: 'exec true: the PID field (tag 15) is 4 bytes, not a u64' });
  });

  it('an EXIT whose EXIT_CODE is 4 bytes fails the exec (it used to leave it waiting forever)', async () => {
    answer = (id) => encodeFrame(FrameType.EXIT, id, encodeFields([[Field.EXIT_CODE, u32(0)]]));
    const error = await refusal((client) => client.exec(['true']));
    expect(error.message).toBe('exec true: the EXIT_CODE field (tag 16) is 4 bytes, not a u64');
  });

  it('an ERROR whose ERRNO is 4 bytes fails the request with what was wrong', async () => {
    answer = (id) =>
      encodeFrame(
        FrameType.ERROR,
        id,
        encodeFields([
          [Field.ERRNO, u32(2)],
          [Field.MESSAGE, 'no such file'],
        ]),
      );
    const error = await refusal((client) => client.poweroff());
    expect(error).toMatchObject({
      code: 'EPROTO',
      message: 'poweroff: the ERRNO field (tag 30) is 4 bytes, not a u64',
    });
  });

  it('a bad frame in the same read as a file read’s OK fails the read', async () => {
    answer = (id) =>
      Buffer.concat([encodeFrame(FrameType.OK, id, encodeFields([[Field.SIZE, 5]])), encodeFrame(0x05, id)]);
    const error = await refusal((client) => client.readFile('/etc/hostname'));
    expect(error.message).toBe('read /etc/hostname: unexpected frame 5');
  });

  it('a file read’s OK with a SIZE of 3 bytes fails the read (it used to hang)', async () => {
    answer = (id) =>
      Buffer.concat([
        encodeFrame(FrameType.OK, id, encodeFields([[Field.SIZE, Buffer.from([1, 2, 3])]])),
        encodeFrame(FrameType.FILE_DATA, id, Buffer.from('hello'), FLAG_EOF),
      ]);
    const error = await refusal((client) => client.readFile('/etc/hostname'));
    expect(error.message).toBe('read /etc/hostname: the SIZE field (tag 23) is 3 bytes, not a u64');
  });

  it('an init report whose EXIT_CODE is 4 bytes is an AgentError naming it, not a RangeError', async () => {
    answer = (id) =>
      encodeFrame(
        FrameType.OK,
        id,
        encodeFields([
          [Field.COMMAND, 'true'],
          [Field.EXIT_CODE, u32(0)],
        ]),
      );
    const error = await refusal((client) => client.initReport(['true']));
    expect(error).toMatchObject({
      code: 'EPROTO',
      message: 'init: the EXIT_CODE field (tag 16) is 4 bytes, not a u64',
    });
  });

  it('a final OK before the data was sent fails the write saying so', async () => {
    answer = (id) =>
      Buffer.concat([encodeFrame(FrameType.OK, id), encodeFrame(FrameType.OK, id, encodeFields([[Field.SIZE, 5]]))]);
    const error = await refusal((client) => client.writeFile('/tmp/x', 'hello'));
    expect(error.message).toBe('write /tmp/x: the agent ended the write before all the data was sent');
  });

  it('a 1 MiB frame dripped in 40-byte reads is joined once, not once per read', () => {
    const frame = encodeFrame(FrameType.STDOUT, 1, Buffer.alloc(1 << 20, 0x61));
    const parser = new FrameParser();
    const concat = vi.spyOn(Buffer, 'concat');
    const frames = [];
    try {
      for (let at = 0; at < frame.length; at += 40) frames.push(...parser.push(frame.subarray(at, at + 40)));
      expect(concat.mock.calls.length).toBeLessThanOrEqual(2);
    } finally {
      concat.mockRestore();
    }
    expect(frames.map((f) => f.payload.length)).toEqual([1 << 20]);
    expect(parser.pending).toBe(0);
  });
});
