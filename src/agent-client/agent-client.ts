// The engine's client of the guest agent (docs/agent.md): exec with streamed output, file transfers, the init
// report, identity re-minting and poweroff, all multiplexed on one connection.
//
//   const agent = new AgentClient({ socketPath: vm.vsockSocket, vsockPort: 52 });
//   await agent.ready();
//   const { exitCode, stdout } = await agent.exec(['sh', '-c', 'echo hi; exit 7']);
import { randomBytes } from 'node:crypto';
import { AgentConnection, type AgentEndpoint, type AgentHello, type AgentStream } from './agent-connection.js';
import { AgentProcess, type ExecOptions, type ExecResult } from './agent-process.js';
import { openAgentFile, writeAgentFile, type AgentFileReader, type WriteSource } from './agent-files.js';
import {
  AgentError,
  encodeFields,
  encodeFrame,
  Field,
  Fields,
  FrameType,
  INIT_STATES,
  type FieldValue,
  type InitState,
  u64,
} from './agent-protocol.js';

export type { AgentEndpoint, AgentHello } from './agent-connection.js';
export type { ExecOptions, ExecResult, TerminalSize } from './agent-process.js';
export type { AgentFileReader, WriteSource } from './agent-files.js';
export { AgentProcess } from './agent-process.js';
export { AgentError } from './agent-protocol.js';

export interface InitCommandReport {
  command: string;
  exitCode: number | null;
  signal: number | null;
  /** The command ran past the init request's `timeoutMs` and was killed (SIGKILL). */
  timedOut: boolean;
  /** stdout and stderr interleaved, at most the first 1 MiB. */
  output: string;
}

export interface InitReport {
  state: InitState;
  /** True when these commands ran earlier (this guest, or the snapshot it was restored from) and not now. */
  alreadyRan: boolean;
  commands: InitCommandReport[];
}

export interface RemintOptions {
  hostname?: string;
  /** 32 lowercase hex digits; a random one when left out. */
  machineId?: string;
  /** Bytes mixed into the guest's RNG (RNDADDENTROPY); 64 random bytes when left out. */
  entropy?: Uint8Array;
  generation?: number;
}

export interface RemintResult {
  generation: number;
  applied: string[];
  skipped: string[];
}

const RETRY_CODES = new Set(['ENOENT', 'ECONNREFUSED', 'ECONNRESET', 'EAGAIN']);

export class AgentClient {
  #connection: AgentConnection | null = null;
  #connecting: Promise<AgentHello> | null = null;

  constructor(readonly endpoint: AgentEndpoint) {}

  /**
   * Connects (again, after a restore or fork reset the connection), retrying while nothing listens yet, and
   * resolves with the agent's HELLO. Rejects with ETIMEDOUT naming the last failure after `timeoutMs`.
   */
  ready(options: { timeoutMs?: number } = {}): Promise<AgentHello> {
    if (this.#connection && !this.#connection.closed) return Promise.resolve(this.#connection.hello);
    // Callers that ask at once share one attempt: a second connection would replace the first at the agent.
    this.#connecting ??= this.#connect(options.timeoutMs ?? 10_000).finally(() => (this.#connecting = null));
    return this.#connecting;
  }

  async #connect(timeoutMs: number): Promise<AgentHello> {
    const deadline = Date.now() + timeoutMs;
    for (let delay = 10; ; delay = Math.min(delay * 2, 200)) {
      try {
        this.#connection = await AgentConnection.open(this.endpoint, Math.max(100, deadline - Date.now()));
        return this.#connection.hello;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code ?? '';
        if (!RETRY_CODES.has(code) || Date.now() + delay > deadline) {
          if (!RETRY_CODES.has(code)) throw error;
          throw new AgentError(
            `the agent at ${this.endpoint.socketPath} was not ready within ${timeoutMs} ms: ${(error as Error).message}`,
            'ETIMEDOUT',
            this.endpoint.socketPath,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** The HELLO of the current connection. */
  get hello(): AgentHello {
    return this.#open().hello;
  }

  /** Starts a process; its `result` resolves when it ends and all its output has arrived. */
  spawn(argv: string[], options: ExecOptions = {}): AgentProcess {
    return new AgentProcess(this.#open(), argv, options);
  }

  /** Runs a process to its end. Output goes to the callbacks, or is collected into the result without them. */
  exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    return this.spawn(argv, options).result;
  }

  /** Opens a file in the guest for reading: its size (regular files), mode, and a stream of its bytes. */
  openFile(path: string): Promise<AgentFileReader> {
    return openAgentFile(this.#open(), path);
  }

  async readFile(path: string): Promise<Buffer> {
    const { stream } = await this.openFile(path);
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  /** Writes a file in the guest (replacing it atomically when the transfer completes). */
  writeFile(
    path: string,
    data: WriteSource,
    options: { mode?: number; mkdirs?: boolean } = {},
  ): Promise<{ bytes: number }> {
    return writeAgentFile(this.#open(), path, data, options);
  }

  /**
   * Runs the Smolfile's `init` commands once per guest (stopping at the first that fails) and resolves with
   * their report; when they ran before (in this boot, or in the snapshot this guest was restored from), resolves
   * with that run's report and `alreadyRan` instead of running them again. `timeoutMs` limits each command.
   */
  async initReport(commands: string[], options: { timeoutMs?: number } = {}): Promise<InitReport> {
    const request: [number, FieldValue][] = commands.map((command) => [Field.COMMAND, command]);
    if (options.timeoutMs !== undefined) request.push([Field.TIMEOUT_MS, Math.max(1, Math.ceil(options.timeoutMs))]);
    const fields = await this.#request(FrameType.INIT, request, 'init');
    return decoded('init', () => initReportOf(fields));
  }

  /** Gives a forked or restored guest a new identity: hostname, machine-id, fresh entropy. */
  async remint(options: RemintOptions = {}): Promise<RemintResult> {
    const fields: [number, FieldValue][] = [
      [Field.MACHINE_ID, options.machineId ?? randomBytes(16).toString('hex')],
      [Field.ENTROPY, options.entropy ?? randomBytes(64)],
    ];
    if (options.hostname !== undefined) fields.push([Field.HOSTNAME, options.hostname]);
    if (options.generation !== undefined) fields.push([Field.GENERATION, options.generation]);
    const reply = await this.#request(FrameType.REMINT, fields, 'remint');
    return decoded('remint', () => ({
      generation: reply.num(Field.GENERATION) ?? 0,
      applied: reply.strs(Field.APPLIED),
      skipped: reply.strs(Field.SKIPPED),
    }));
  }

  /** Asks the guest to sync and power off (or reboot); resolves when the agent has accepted. */
  async poweroff(options: { reboot?: boolean } = {}): Promise<void> {
    await this.#request(
      FrameType.POWEROFF,
      [[Field.REBOOT, options.reboot ? 1 : 0]],
      options.reboot ? 'reboot' : 'poweroff',
    );
  }

  close(): void {
    this.#connection?.close();
    this.#connection = null;
  }

  #open(): AgentConnection {
    const connection = this.#connection;
    if (!connection)
      throw new AgentError(`not connected to the agent at ${this.endpoint.socketPath}: call ready() first`, 'ENOTCONN');
    if (connection.closed)
      throw new AgentError(`${connection.closed.message}; call ready() to connect again`, connection.closed.code);
    return connection;
  }

  /** A one-reply request: resolves with the OK's fields, rejects with the ERROR or a lost connection. */
  #request(type: number, fields: [number, FieldValue][], what: string): Promise<Fields> {
    const connection = this.#open();
    const stream: AgentStream = connection.stream(what);
    return new Promise<Fields>((resolve, reject) => {
      stream.onFrame = (frame) => {
        connection.end(stream);
        // AgentError.fromFrame reads ERRNO as a u64: a bad one must reject, not throw out of the socket's handler.
        try {
          const reply = new Fields(frame.payload);
          if (frame.type === FrameType.OK) resolve(reply);
          else if (frame.type === FrameType.ERROR) reject(AgentError.fromFrame(reply, what));
          else reject(new AgentError(`${what}: unexpected frame type ${frame.type}`, 'EPROTO'));
        } catch (error) {
          reject(new AgentError(`${what}: ${(error as Error).message}`, 'EPROTO'));
        }
      };
      stream.onClose = reject;
      connection.send(encodeFrame(type, stream.id, encodeFields(fields))).catch(reject);
    });
  }
}

/** Reads a reply's fields; a bad one (a u64 of 3 bytes) is an AgentError that names the request. */
function decoded<T>(what: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    throw new AgentError(`${what}: ${(error as Error).message}`, 'EPROTO');
  }
}

/** The init report in an OK's fields: per command, its COMMAND and then what became of it. */
function initReportOf(fields: Fields): InitReport {
  const report: InitReport = {
    state: INIT_STATES[fields.num(Field.INIT_STATE) ?? 0] ?? 'not-run',
    alreadyRan: fields.num(Field.ALREADY_RAN) === 1,
    commands: [],
  };
  for (const { tag, value } of fields.list) {
    const last = report.commands.at(-1);
    if (tag === Field.COMMAND)
      report.commands.push({ command: value.toString(), exitCode: null, signal: null, timedOut: false, output: '' });
    else if (last && tag === Field.EXIT_CODE) last.exitCode = u64(tag, value);
    else if (last && tag === Field.SIGNAL) last.signal = u64(tag, value);
    else if (last && tag === Field.TIMED_OUT) last.timedOut = u64(tag, value) === 1;
    else if (last && tag === Field.OUTPUT) last.output = value.toString();
  }
  return report;
}
