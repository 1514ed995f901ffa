// A process in the guest, started through the agent: stdin pumped under the agent's window, stdout and stderr
// delivered as they arrive (the window granted back once each chunk is handed over), kill, exit status; with `tty`,
// on a pseudo-terminal of the agent's (its output all arrives as stdout), resized with resize().
import os from 'node:os';
import type { AgentConnection, AgentStream } from './agent-connection.js';
import {
  AgentError,
  DATA_CHUNK,
  encodeFields,
  encodeFrame,
  Field,
  Fields,
  FLAG_EOF,
  FrameType,
  TTY_MAX,
  type FieldValue,
} from './agent-protocol.js';

export interface ExecOptions {
  /** Added to (and overriding) the agent's environment. */
  env?: Record<string, string>;
  cwd?: string;
  /**
   * Who runs it: "name", "uid", "name:group" or "uid:gid" (OCI's forms), looked up in the guest's /etc/passwd and
   * /etc/group; root without it. An agent whose HELLO lacks the "exec-user" feature would ignore it, so it is refused
   * (ENOTSUP) before anything is sent, unless it names root (0, 0:0, root), as which that agent runs everything.
   */
  user?: string;
  /** Without it the process reads /dev/null. */
  stdin?: string | Uint8Array | AsyncIterable<Uint8Array>;
  /** The agent SIGKILLs the process group after this long; the result then has `timedOut`. */
  timeoutMs?: number;
  /**
   * Run it on a pseudo-terminal of this size (its controlling terminal: a shell gets job control, Ctrl-C typed as
   * 0x03 reaches its foreground job). Stdin, stdout and stderr are the terminal; output arrives as stdout. Needs an
   * agent with the "exec-tty" feature (0.3.0); an older one is refused with ENOTSUP before anything is sent.
   */
  tty?: TerminalSize;
  onStdout?: (chunk: Buffer) => void;
  onStderr?: (chunk: Buffer) => void;
}

export interface TerminalSize {
  rows: number;
  cols: number;
}

/** Throws EINVAL naming the size unless rows and cols are whole numbers from 1 to TTY_MAX. */
export function checkTerminalSize(size: TerminalSize, what: string): void {
  const ok = (n: number) => Number.isInteger(n) && n >= 1 && n <= TTY_MAX;
  if (!ok(size.rows) || !ok(size.cols))
    throw new AgentError(
      `${what}: a terminal of ${size.rows} rows and ${size.cols} columns (each must be 1 to ${TTY_MAX})`,
      'EINVAL',
    );
}

export interface ExecResult {
  /** The exit status, or null when a signal ended the process. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  /** What the process wrote, when no onStdout / onStderr callback was given (else empty). */
  stdout: Buffer;
  stderr: Buffer;
}

/** Users that mean the agent's own (root), which an agent without the "exec-user" feature runs as already. */
const ROOT_USERS = new Set(['0', '0:0', 'root', 'root:root']);

const signalNames = new Map<number, NodeJS.Signals>(
  Object.entries(os.constants.signals).map(([name, number]) => [number, name as NodeJS.Signals]),
);

function signalNumber(signal: NodeJS.Signals | number): number {
  const number = typeof signal === 'number' ? signal : os.constants.signals[signal];
  if (number === undefined) throw new AgentError(`unknown signal ${signal}`, 'EINVAL');
  return number;
}

async function* chunksOf(source: string | Uint8Array | AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  if (typeof source === 'string') yield Buffer.from(source);
  else if (source instanceof Uint8Array) yield source;
  else yield* source;
}

/** Sends `source` as data frames of `type`, each within the stream's window, and then an empty EOF frame. */
export async function pumpData(
  connection: AgentConnection,
  stream: AgentStream,
  type: number,
  source: string | Uint8Array | AsyncIterable<Uint8Array>,
): Promise<number> {
  let total = 0;
  for await (const chunk of chunksOf(source)) {
    for (let at = 0; at < chunk.length;) {
      const n = await stream.takeWindow(Math.min(DATA_CHUNK, chunk.length - at));
      await connection.send(encodeFrame(type, stream.id, chunk.subarray(at, at + n)));
      at += n;
      total += n;
    }
  }
  await connection.send(encodeFrame(type, stream.id, Buffer.alloc(0), FLAG_EOF));
  return total;
}

export class AgentProcess {
  /** The process's pid in the guest, once it has started. */
  readonly pid: Promise<number>;
  readonly result: Promise<ExecResult>;
  readonly #connection: AgentConnection;
  readonly #stream: AgentStream;
  readonly #tty: boolean;
  #done = false;

  constructor(connection: AgentConnection, argv: string[], options: ExecOptions) {
    this.#connection = connection;
    const what = `exec ${argv.map((arg) => (/^[\w./=:-]+$/.test(arg) ? arg : JSON.stringify(arg))).join(' ')}`;
    const stream = connection.stream(what.length > 120 ? `${what.slice(0, 117)}...` : what);
    this.#stream = stream;
    this.#tty = options.tty !== undefined;
    const fields: [number, FieldValue][] = argv.map((arg) => [Field.ARGV, arg]);
    for (const [key, value] of Object.entries(options.env ?? {})) fields.push([Field.ENV, `${key}=${value}`]);
    if (options.cwd !== undefined) fields.push([Field.CWD, options.cwd]);
    // An agent without USER runs as root anyway, which is all that root asks.
    const asRoot = options.user !== undefined && ROOT_USERS.has(options.user);
    const canSwitch = connection.hello.features.includes('exec-user');
    if (options.user !== undefined && (canSwitch || !asRoot)) fields.push([Field.USER, options.user]);
    if (options.timeoutMs !== undefined) fields.push([Field.TIMEOUT_MS, Math.max(1, Math.ceil(options.timeoutMs))]);
    fields.push([Field.STDIN, options.stdin === undefined ? 0 : 1]);
    if (options.tty) fields.push([Field.TTY, 1], [Field.ROWS, options.tty.rows], [Field.COLS, options.tty.cols]);

    let started!: (pid: number) => void;
    let failStart!: (error: AgentError) => void;
    this.pid = new Promise<number>((resolve, reject) => ((started = resolve), (failStart = reject)));
    this.pid.catch(() => {}); // the same error reaches `result`, which callers await
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    this.result = new Promise<ExecResult>((resolve, reject) => {
      const fail = (error: AgentError) => {
        this.#done = true;
        connection.end(stream);
        failStart(error);
        reject(error);
      };
      stream.onClose = fail;
      if (options.user !== undefined && !canSwitch && !asRoot) {
        return fail(
          new AgentError(
            `${stream.what}: the guest's agent (version ${connection.hello.version}) cannot run commands as a user ` +
              `(an older agent would run it as root, not as ${JSON.stringify(options.user)}): the image was made by an ` +
              'older smol; rebuild it and start a new episode',
            'ENOTSUP',
          ),
        );
      }
      if (options.tty) {
        if (!connection.hello.features.includes('exec-tty'))
          return fail(
            new AgentError(
              `${stream.what}: the guest's agent (version ${connection.hello.version}) has no terminals (exec-tty): ` +
                'the image was made by an older smol; rebuild it and start a new episode',
              'ENOTSUP',
            ),
          );
        try {
          checkTerminalSize(options.tty, stream.what);
        } catch (error) {
          return fail(error as AgentError);
        }
      }
      stream.onFrame = (frame) => {
        if (frame.type === FrameType.STDOUT || frame.type === FrameType.STDERR) {
          const onData = frame.type === FrameType.STDOUT ? options.onStdout : options.onStderr;
          if (onData) onData(frame.payload);
          else (frame.type === FrameType.STDOUT ? stdout : stderr).push(frame.payload);
          connection.grant(stream, frame.payload.length);
          return;
        }
        // Every field is read before anything is ended or resolved: a bad one (a PID of 3 bytes) fails the
        // request with what was wrong, where a throw from here would have ended the engine (it runs in the
        // socket's 'data' handler).
        try {
          const fields = new Fields(frame.payload);
          if (frame.type === FrameType.STARTED) started(fields.num(Field.PID) ?? 0);
          else if (frame.type === FrameType.ERROR) fail(AgentError.fromFrame(fields, stream.what));
          else if (frame.type === FrameType.EXIT) {
            const signal = fields.num(Field.SIGNAL);
            const exitCode = signal === undefined ? (fields.num(Field.EXIT_CODE) ?? null) : null;
            const timedOut = fields.num(Field.TIMED_OUT) === 1;
            this.#done = true;
            connection.end(stream);
            resolve({
              exitCode,
              signal: signal === undefined ? null : (signalNames.get(signal) ?? (`SIG${signal}` as NodeJS.Signals)),
              timedOut,
              stdout: Buffer.concat(stdout),
              stderr: Buffer.concat(stderr),
            });
          }
        } catch (error) {
          fail(new AgentError(`${stream.what}: ${(error as Error).message}`, 'EPROTO'));
        }
      };
      connection
        .send(encodeFrame(FrameType.EXEC, stream.id, encodeFields(fields)))
        .then(() => {
          // Stdin stops early when the process ends first; a source that fails ends stdin there.
          if (options.stdin !== undefined)
            pumpData(connection, stream, FrameType.STDIN, options.stdin).catch(() => {
              if (!this.#done)
                connection.send(encodeFrame(FrameType.STDIN, stream.id, Buffer.alloc(0), FLAG_EOF)).catch(() => {});
            });
        })
        .catch(fail);
    });
  }

  /** Sends a signal to the process's group (everything it started). No-op once it has ended. */
  async kill(signal: NodeJS.Signals | number = 'SIGTERM'): Promise<void> {
    const number = signalNumber(signal);
    await this.pid;
    if (this.#done) return;
    await this.#connection.send(encodeFrame(FrameType.KILL, this.#stream.id, encodeFields([[Field.SIGNAL, number]])));
  }

  /** Resizes its terminal (the guest's foreground job gets SIGWINCH). ENOTTY without `tty`; no-op once it ended. */
  async resize(size: TerminalSize): Promise<void> {
    if (!this.#tty) throw new AgentError(`${this.#stream.what}: resize: it runs without a terminal (no tty)`, 'ENOTTY');
    checkTerminalSize(size, `${this.#stream.what}: resize`);
    await this.pid;
    if (this.#done) return;
    const fields = encodeFields([
      [Field.ROWS, size.rows],
      [Field.COLS, size.cols],
    ]);
    await this.#connection.send(encodeFrame(FrameType.RESIZE, this.#stream.id, fields));
  }
}
