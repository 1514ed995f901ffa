// The host side of the guest agent's wire protocol (docs/agent.md; the agent's copy is native/agent/proto.h):
// 12-byte frame headers, TLV fields in control frames, raw bytes in data frames.

export const PROTOCOL_VERSION = 1;
export const HEADER_SIZE = 12;
export const MAX_PAYLOAD = 1 << 20;
/** Data frames the client sends carry at most this much. */
export const DATA_CHUNK = 64 << 10;
export const FLAG_EOF = 0x1;
/** A terminal's rows and columns are each 1 to this (the agent's PROTO_TTY_MAX). */
export const TTY_MAX = 1000;

export const FrameType = {
  HELLO: 0x01,
  OK: 0x02,
  ERROR: 0x03,
  WINDOW: 0x04,
  EXEC: 0x10,
  STDIN: 0x11,
  KILL: 0x12,
  STARTED: 0x13,
  STDOUT: 0x14,
  STDERR: 0x15,
  EXIT: 0x16,
  RESIZE: 0x17,
  FILE_READ: 0x20,
  FILE_WRITE: 0x21,
  FILE_DATA: 0x22,
  INIT: 0x30,
  REMINT: 0x40,
  POWEROFF: 0x50,
} as const;

export const Field = {
  PROTOCOL: 1,
  VERSION: 2,
  BOOT_ID: 3,
  GENERATION: 4,
  INIT_STATE: 5,
  WINDOW: 6,
  MAX_PAYLOAD: 7,
  FEATURE: 8,
  ARGV: 10,
  ENV: 11,
  CWD: 12,
  TIMEOUT_MS: 13,
  STDIN: 14,
  PID: 15,
  EXIT_CODE: 16,
  SIGNAL: 17,
  TIMED_OUT: 18,
  USER: 19,
  PATH: 20,
  MODE: 21,
  MKDIRS: 22,
  SIZE: 23,
  TTY: 24,
  ROWS: 25,
  COLS: 26,
  ERRNO: 30,
  ERRNAME: 31,
  MESSAGE: 32,
  COMMAND: 40,
  OUTPUT: 41,
  ALREADY_RAN: 42,
  HOSTNAME: 50,
  MACHINE_ID: 51,
  ENTROPY: 52,
  REBOOT: 53,
  APPLIED: 54,
  SKIPPED: 55,
} as const;

export const INIT_STATES = ['not-run', 'running', 'done', 'failed'] as const;
export type InitState = (typeof INIT_STATES)[number];

export function frameTypeName(type: number): string {
  const name = Object.entries(FrameType).find(([, value]) => value === type)?.[0];
  return name ?? `0x${type.toString(16)}`;
}

/** A field as messages name it: "the SIZE field (tag 23)". */
export function fieldName(tag: number): string {
  const name = Object.entries(Field).find(([, value]) => value === tag)?.[0];
  return name ? `the ${name} field (tag ${tag})` : `field ${tag}`;
}

export interface Frame {
  type: number;
  flags: number;
  id: number;
  payload: Buffer;
}

/** A field value: a string, bytes, or an unsigned integer (encoded as u64). */
export type FieldValue = string | Uint8Array | number | bigint;

export function encodeFields(fields: [number, FieldValue][]): Buffer {
  const parts: Buffer[] = [];
  for (const [tag, value] of fields) {
    let bytes: Buffer;
    if (typeof value === 'string') bytes = Buffer.from(value, 'utf8');
    else if (typeof value === 'number' || typeof value === 'bigint') {
      bytes = Buffer.alloc(8);
      bytes.writeBigUInt64LE(BigInt(value));
    } else bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    const head = Buffer.alloc(6);
    head.writeUInt16LE(tag, 0);
    head.writeUInt32LE(bytes.length, 2);
    parts.push(head, bytes);
  }
  return Buffer.concat(parts);
}

export function encodeFrame(type: number, id: number, payload: Uint8Array = Buffer.alloc(0), flags = 0): Buffer {
  if (payload.length > MAX_PAYLOAD) throw new Error(`a ${frameTypeName(type)} frame of ${payload.length} bytes`);
  const frame = Buffer.alloc(HEADER_SIZE + payload.length);
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt16LE(type, 4);
  frame.writeUInt16LE(flags, 6);
  frame.writeUInt32LE(id, 8);
  frame.set(payload, HEADER_SIZE);
  return frame;
}

/** A field's value as the u64 it must be; an AgentError (EPROTO) naming the field when it is not 8 bytes. */
export function u64(tag: number, value: Buffer): number {
  if (value.length !== 8) throw new AgentError(`${fieldName(tag)} is ${value.length} bytes, not a u64`, 'EPROTO');
  return Number(value.readBigUInt64LE(0));
}

/** The fields of a control frame, in order. Throws on a field that overruns the payload. */
export class Fields {
  readonly list: { tag: number; value: Buffer }[] = [];

  constructor(payload: Buffer) {
    let at = 0;
    while (at < payload.length) {
      if (payload.length - at < 6) throw new Error(`a field header is cut off at byte ${at}`);
      const tag = payload.readUInt16LE(at);
      const len = payload.readUInt32LE(at + 2);
      if (len > payload.length - at - 6) throw new Error(`field ${tag} (${len} bytes) overruns the frame`);
      this.list.push({ tag, value: payload.subarray(at + 6, at + 6 + len) });
      at += 6 + len;
    }
  }

  bytes(tag: number): Buffer | undefined {
    return this.list.find((f) => f.tag === tag)?.value;
  }

  str(tag: number): string | undefined {
    return this.bytes(tag)?.toString('utf8');
  }

  strs(tag: number): string[] {
    return this.list.filter((f) => f.tag === tag).map((f) => f.value.toString('utf8'));
  }

  num(tag: number): number | undefined {
    const value = this.bytes(tag);
    return value === undefined ? undefined : u64(tag, value);
  }
}

/**
 * Splits a byte stream into frames. Bytes are kept as the chunks they came in until a whole frame (or header) is
 * there: joining every chunk onto what waits made a frame dripped in small pieces cost its size squared in copies
 * (a 1 MiB frame in 40-byte reads took seconds).
 */
export class FrameParser {
  #chunks: Buffer[] = [];
  #size = 0;
  /** Bytes needed before anything can be parsed: a header, or the frame whose header is here. */
  #need = HEADER_SIZE;

  /** Returns the complete frames in `chunk` (and before it); throws on a length over MAX_PAYLOAD. */
  push(chunk: Buffer): Frame[] {
    if (chunk.length) this.#chunks.push(chunk);
    this.#size += chunk.length;
    if (this.#size < this.#need) return [];
    const buf = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#size);
    const frames: Frame[] = [];
    let at = 0;
    this.#need = HEADER_SIZE;
    while (buf.length - at >= HEADER_SIZE) {
      const len = buf.readUInt32LE(at);
      if (len > MAX_PAYLOAD) throw new Error(`the agent sent a frame of ${len} bytes (the limit is ${MAX_PAYLOAD})`);
      if (buf.length - at - HEADER_SIZE < len) {
        this.#need = HEADER_SIZE + len;
        break;
      }
      frames.push({
        type: buf.readUInt16LE(at + 4),
        flags: buf.readUInt16LE(at + 6),
        id: buf.readUInt32LE(at + 8),
        payload: buf.subarray(at + HEADER_SIZE, at + HEADER_SIZE + len),
      });
      at += HEADER_SIZE + len;
    }
    const rest = buf.subarray(at);
    this.#chunks = rest.length ? [rest] : [];
    this.#size = rest.length;
    return frames;
  }

  /** Bytes of a frame not yet complete. */
  get pending(): number {
    return this.#size;
  }
}

/** A failed agent request or a lost connection: `code` is the errno name (ENOENT, ECONNRESET, EPROTO, …). */
export class AgentError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly path?: string,
    readonly errno?: number,
  ) {
    super(message);
    this.name = 'AgentError';
  }

  static fromFrame(fields: Fields, what: string): AgentError {
    const code = fields.str(Field.ERRNAME) ?? 'EPROTO';
    const message = fields.str(Field.MESSAGE) ?? 'the agent gave no reason';
    return new AgentError(`${what}: ${message} (${code})`, code, fields.str(Field.PATH), fields.num(Field.ERRNO));
  }
}
