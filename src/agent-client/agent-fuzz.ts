// The host's decoder of agent frames under mutation (docs/fuzzing.md, "The agent protocol"): a hostile guest writes
// these bytes. Each case is a real reply of the agent to one request (exec, file read and write, init, remint,
// poweroff, or the connection's HELLO), built with the protocol's own encoder and then mutated: field values of the
// wrong size, huge or NUL-laden, fields overrunning their frame, frame types, ids, flags and lengths changed, frames
// dropped, repeated and reordered, bytes flipped, the stream cut short, and all of it delivered in odd-sized chunks.
// agent-fuzz.test.ts plays the agent on a real Unix socket and drives the real AgentConnection against it.
import {
  encodeFields,
  encodeFrame,
  Field,
  FLAG_EOF,
  FrameType,
  HEADER_SIZE,
  MAX_PAYLOAD,
  type FieldValue,
} from './agent-protocol.js';
import { prng } from '../engine/smolmachine-fuzz.js';

/** The request the host makes in a case; `hello` is a connection whose HELLO is the mutant. */
export type Scenario = 'hello' | 'exec' | 'read' | 'write' | 'init' | 'remint' | 'poweroff';
export const SCENARIOS: readonly Scenario[] = ['hello', 'exec', 'read', 'write', 'init', 'remint', 'poweroff'];

/** A frame before encoding: `REQ` as its id stands for the id the host gave the request. */
export interface FrameSpec {
  type: number;
  id: number;
  flags: number;
  fields?: [number, FieldValue][];
  data?: Buffer;
}

export const REQ = -1;

export function helloFrame(): FrameSpec {
  return {
    type: FrameType.HELLO,
    id: 0,
    flags: 0,
    fields: [
      [Field.PROTOCOL, 1],
      [Field.VERSION, '0.3.0'],
      [Field.BOOT_ID, '5b0c3e7e-9f2a-4c55-8a7e-0f6f3b1d2c44'],
      [Field.GENERATION, 0],
      [Field.INIT_STATE, 2],
      [Field.WINDOW, 256 << 10],
      [Field.MAX_PAYLOAD, MAX_PAYLOAD],
      [Field.FEATURE, 'exec-user'],
      [Field.FEATURE, 'exec-tty'],
    ],
  };
}

const ok = (fields: [number, FieldValue][]): FrameSpec => ({ type: FrameType.OK, id: REQ, flags: 0, fields });
const data = (type: number, text: string, flags = 0): FrameSpec => ({
  type,
  id: REQ,
  flags,
  data: Buffer.from(text),
});

/** What a well-behaved agent answers to the scenario's request (docs/agent.md, "Requests and streams"). */
export function replyFrames(scenario: Scenario, random: (n: number) => number): FrameSpec[] {
  const error: FrameSpec = {
    type: FrameType.ERROR,
    id: REQ,
    flags: 0,
    fields: [
      [Field.ERRNO, 2],
      [Field.ERRNAME, 'ENOENT'],
      [Field.MESSAGE, 'open /no/such/file: No such file or directory'],
      [Field.PATH, '/no/such/file'],
    ],
  };
  if (random(6) === 0 && scenario !== 'hello') return [error];
  switch (scenario) {
    case 'hello':
      return [];
    case 'exec':
      return [
        { type: FrameType.STARTED, id: REQ, flags: 0, fields: [[Field.PID, 4242]] },
        data(FrameType.STDOUT, 'hello from the guest\n'),
        data(FrameType.STDERR, 'a warning\n'),
        { type: FrameType.WINDOW, id: REQ, flags: 0, fields: [[Field.WINDOW, 4096]] },
        {
          type: FrameType.EXIT,
          id: REQ,
          flags: 0,
          fields: random(2)
            ? [[Field.EXIT_CODE, 7]]
            : [
                [Field.SIGNAL, 9],
                [Field.TIMED_OUT, 1],
              ],
        },
      ];
    case 'read':
      return [
        ok([
          [Field.SIZE, 11],
          [Field.MODE, 0o100644],
        ]),
        data(FrameType.FILE_DATA, 'hello '),
        data(FrameType.FILE_DATA, 'world', FLAG_EOF),
      ];
    case 'write':
      return [
        ok([]),
        { type: FrameType.WINDOW, id: REQ, flags: 0, fields: [[Field.WINDOW, 65536]] },
        ok([[Field.SIZE, 5]]),
      ];
    case 'init':
      return [
        ok([
          [Field.INIT_STATE, 2],
          [Field.ALREADY_RAN, 0],
          [Field.COMMAND, 'apt-get install -y curl'],
          [Field.EXIT_CODE, 0],
          [Field.OUTPUT, 'Setting up curl\n'],
          [Field.COMMAND, 'false'],
          [Field.SIGNAL, 9],
          [Field.TIMED_OUT, 1],
        ]),
      ];
    case 'remint':
      return [
        ok([
          [Field.GENERATION, 3],
          [Field.APPLIED, 'hostname'],
          [Field.APPLIED, 'machine-id'],
          [Field.SKIPPED, 'entropy'],
        ]),
      ];
    case 'poweroff':
      return [ok([])];
  }
}

/** Field values a hostile agent sends: integers of the wrong size, the largest u64, NUL, bad UTF-8, long strings. */
const HOSTILE: (() => FieldValue)[] = [
  () => Buffer.alloc(0),
  () => Buffer.from([1, 2, 3, 4]),
  () => Buffer.alloc(7, 0xff),
  () => Buffer.alloc(9, 0xff),
  () => Buffer.alloc(8, 0xff), // 2^64 - 1
  () => 2n ** 63n,
  () => 2 ** 53 + 1,
  () => 0,
  () => 1,
  () => 0xffffffff,
  () => 'a\0b',
  () => Buffer.from([0xc3, 0x28, 0xff, 0xfe]),
  () => 'x'.repeat(70_000),
  () => '',
  () => '../../etc/shadow',
];
const TAGS = [...Object.values(Field), 0, 9, 99, 0xffff];
const TYPES = [...Object.values(FrameType), 0, 0x05, 0x99, 0xffff];

export function encodeSpec(frame: FrameSpec, requestId: number): Buffer {
  const payload = frame.data ?? encodeFields(frame.fields ?? []);
  const id = frame.id === REQ ? requestId : frame.id;
  // encodeFrame refuses payloads over MAX_PAYLOAD; a hostile agent's are written by hand.
  if (payload.length <= MAX_PAYLOAD) return encodeFrame(frame.type, id >>> 0, payload, frame.flags);
  const head = Buffer.alloc(HEADER_SIZE);
  head.writeUInt32LE(payload.length, 0);
  head.writeUInt16LE(frame.type, 4);
  head.writeUInt16LE(frame.flags, 6);
  head.writeUInt32LE(id >>> 0, 8);
  return Buffer.concat([head, payload]);
}

/** One change to a frame's fields or header. */
function mutateFrame(frame: FrameSpec, random: (n: number) => number): string {
  const pick = <T>(list: readonly T[]) => list[random(list.length)]!;
  const fields = frame.fields;
  switch (random(fields ? 9 : 5)) {
    case 0:
      frame.type = pick(TYPES);
      return `type ${frame.type}`;
    case 1:
      frame.id = pick([0, REQ, 1, 2, 0xffffffff, 12345]);
      return `id ${frame.id}`;
    case 2:
      frame.flags = pick([0, FLAG_EOF, 0xffff, 2]);
      return `flags ${frame.flags}`;
    case 3:
      frame.data = Buffer.alloc(random(3) ? random(64) : MAX_PAYLOAD - 1 + random(3), 0x41);
      return `data of ${frame.data.length} bytes`;
    case 4:
      frame.data = Buffer.concat([encodeFields(fields ?? [[Field.WINDOW, 1]]), Buffer.from([1, 0, 9, 9, 9])]);
      return 'a field that overruns its frame';
    case 5: {
      const at = random(fields!.length + 1);
      if (at < fields!.length) fields![at] = [fields![at]![0], pick(HOSTILE)()];
      return `field ${at} given a hostile value`;
    }
    case 6:
      fields!.splice(random(fields!.length + 1), 0, [pick(TAGS), pick(HOSTILE)()]);
      return 'a field inserted';
    case 7:
      fields!.splice(random(fields!.length), 1);
      return 'a field removed';
    default:
      if (fields!.length) fields!.push(fields![random(fields!.length)]!);
      return 'a field repeated';
  }
}

/** Changes to the encoded bytes: the length word, flipped bytes, inserted bytes, the stream cut short. */
function mutateBytes(bytes: Buffer, random: (n: number) => number): { bytes: Buffer; how: string } {
  const at = random(bytes.length + 1);
  switch (random(4)) {
    case 0: {
      const copy = Buffer.from(bytes);
      // A frame header's length word: the first, or at a random offset (another frame's, or the middle of one).
      const where = random(2) ? 0 : Math.min(at, Math.max(0, copy.length - 4));
      const len = [0xffffffff, MAX_PAYLOAD + 1, MAX_PAYLOAD, 0, 5, 1 << 30][random(6)]!;
      if (copy.length >= where + 4) copy.writeUInt32LE(len, where);
      return { bytes: copy, how: `length ${len} at byte ${where}` };
    }
    case 1: {
      const copy = Buffer.from(bytes);
      for (let n = 1 + random(8); n > 0 && copy.length; n--) copy[random(copy.length)] = random(256);
      return { bytes: copy, how: 'bytes flipped' };
    }
    case 2: {
      const extra = Buffer.from(Array.from({ length: 1 + random(16) }, () => random(256)));
      return { bytes: Buffer.concat([bytes.subarray(0, at), extra, bytes.subarray(at)]), how: `bytes at ${at}` };
    }
    default:
      return { bytes: bytes.subarray(0, at), how: `cut at ${at} of ${bytes.length}` };
  }
}

export interface Mutant {
  scenario: Scenario;
  /** With the vsock muxer's `OK <port>` line first (and its mutant, when `line` is given). */
  muxer: boolean;
  line: string;
  /** The HELLO's bytes, then the reply's, given the request id the host chose. */
  hello: Buffer;
  reply: (requestId: number) => Buffer;
  /** Where the stream is cut into writes. */
  splits: number[];
  how: string;
}

const LINES = ['OK 1073741824\n', 'OK 1073741824', 'OK\n', 'NO 1\n', `OK ${'9'.repeat(80)}\n`, '\n', 'OK 1\r\n'];

export function mutant(random: (n: number) => number): Mutant {
  const scenario = SCENARIOS[random(SCENARIOS.length)]!;
  const muxer = random(2) === 0;
  const hello = helloFrame();
  const frames = replyFrames(scenario, random);
  const hows: string[] = [];
  const target = scenario === 'hello' ? [hello] : frames;
  for (let n = 1 + random(3); n > 0; n--) {
    const choice = random(10);
    if (choice < 6 && target.length) {
      const at = random(target.length);
      hows.push(`frame ${at}: ${mutateFrame(target[at]!, random)}`);
    } else if (choice === 6 && target.length > 1) {
      target.splice(random(target.length), 1);
      hows.push('a frame dropped');
    } else if (choice === 7 && target.length) {
      target.splice(random(target.length + 1), 0, structuredClone(target[random(target.length)]!));
      hows.push('a frame repeated');
    } else if (choice === 8 && target.length > 1) {
      const [a, b] = [random(target.length), random(target.length)];
      [target[a], target[b]] = [target[b]!, target[a]!];
      hows.push(`frames ${a} and ${b} swapped`);
    } else {
      target.push({ type: pick(TYPES, random), id: pick([0, REQ], random), flags: 0, fields: [[Field.MESSAGE, 'x']] });
      hows.push('a frame added');
    }
  }
  // The line only in a HELLO case: the client retries a connection the muxer refused until its timeout.
  const line = muxer && scenario === 'hello' && random(4) === 0 ? pick(LINES, random) : LINES[0]!;
  if (line !== LINES[0]) hows.push(`muxer line ${JSON.stringify(line)}`);
  const byteLevel = random(3) === 0;
  const byteSeed = random(2 ** 30);
  const helloBytes = encodeSpec(hello, 0);
  const reply = (requestId: number): Buffer => {
    const bytes = Buffer.concat(frames.map((f) => encodeSpec(f, requestId)));
    return byteLevel && scenario !== 'hello' ? mutateBytes(bytes, prng(byteSeed)).bytes : bytes;
  };
  let helloOut = helloBytes;
  if (byteLevel) {
    const mutated = mutateBytes(helloBytes, prng(byteSeed));
    if (scenario === 'hello') helloOut = mutated.bytes;
    hows.push(mutated.how);
  }
  const splits = Array.from({ length: random(4) }, () => random(64));
  return { scenario, muxer, line, hello: helloOut, reply, splits, how: `${scenario}: ${hows.join(', ')}` };
}

function pick<T>(list: readonly T[], random: (n: number) => number): T {
  return list[random(list.length)]!;
}
