// A client of the engine's API (docs/engine.md, "API"), over the data dir's Unix socket or a TCP listener with its
// token: what the CLI and the SDK speak through. An error the engine answers becomes an ApiClientError with its
// HTTP status; a connection that fails (no engine) rejects with the socket's own error.
import http from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import WebSocket, { type RawData } from 'ws';
import { PinnedAgent, type PinOptions } from './pinned-tls.js';
import { API_PREFIX, TerminalSize, type EngineEvent, type ExecRequest, type ExecResult } from './schema.js';
import { operationRequest, type CallArgs, type OperationName, type ResponseOf } from './operations.js';

/** How a command in the guest ended. */
export type ExecExit = Pick<ExecResult, 'exitCode' | 'signal' | 'timedOut'>;

export interface ExecStreamOptions {
  onStdout(chunk: Buffer): void;
  onStderr(chunk: Buffer): void;
  /** The command's stdin; without it, it reads /dev/null. */
  stdin?: AsyncIterable<Uint8Array> | Readable;
}

export interface ExecStream {
  /** Resolves with how it ended, once all its output arrived; rejects with what went wrong (an unknown program). */
  exit: Promise<ExecExit>;
  /** Signals the command's process group (and, on a terminal, its foreground job). */
  signal(signal: NodeJS.Signals): void;
  /** Resizes its terminal (a request with `tty`); throws without one. */
  resize(size: TerminalSize): void;
  /** Whether the command started (the agent answered and ran it); a signal before that reaches nothing. */
  started(): boolean;
  /** Gives up on it: the stream closes (a command that started gets SIGHUP, as from a closed terminal). */
  close(): void;
}

/**
 * The data dir's Unix socket, or a TCP listener (`smol serve`) by its URL and a token; an `https:` URL is trusted by
 * its certificate's fingerprint, given or pinned on first use (pinned-tls.ts), never by a CA.
 */
export type ApiTarget = { socketPath: string } | ({ url: string; token: string } & PinOptions);

/**
 * A request the engine refused: `status` is the HTTP status, `code` the kind of failure as an errno name ('EBUSY',
 * 'ENOENT', 'ENOMEM'; the body's `error.reason`) when it has one.
 */
export class ApiClientError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'ApiClientError';
  }
}

export interface ConsoleHandlers {
  /** The current screen (xterm escape sequences): first, and again after this viewer fell behind ('resync'). */
  onScreen?(serialized: string, reason: 'attach' | 'resync'): void;
  /** Console output, in order. */
  onData(data: Buffer): void;
  /** The console ended (the VM stopped, the engine went away, or it was refused); not called after close(). */
  onClose?(why: string): void;
}

export interface EventHandlers {
  /** The stream is subscribed: every event from now on arrives. */
  onOpen?(): void;
  /** The stream ended or was refused; not called after close(). */
  onClose?(why: string): void;
}

/**
 * Requests asked again once when a kept connection turns out closed before they were answered: those that mean the
 * same twice (HTTP's idempotent methods; both of the API's PATCHes set the fields given). Never a POST.
 */
const RETRY_METHODS = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'PATCH']);
/** What a request on a connection the engine had already closed fails with: reset or hung up, or a broken pipe. */
const STALE_CODES = new Set(['ECONNRESET', 'EPIPE']);

/** Exec stdin the client lets the socket hold before it waits for it to be written out. */
const STDIN_AHEAD = 1 << 20;

const toBuffer = (data: RawData) =>
  Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);

/** The error an error body `{ error: { code, message, reason? } }` says, else the text itself or the status's name. */
function refusal(status: number, text: string): ApiClientError {
  try {
    const error = (JSON.parse(text) as { error?: { message?: unknown; reason?: unknown } }).error;
    if (typeof error?.message === 'string') {
      return new ApiClientError(status, error.message, typeof error.reason === 'string' ? error.reason : undefined);
    }
  } catch {
    // not JSON: said below
  }
  return new ApiClientError(status, text.trim() || `${status} ${http.STATUS_CODES[status] ?? ''}`.trim());
}

/** What a conditional GET got: nothing new (a 304), or the new value with its ETag and the text it was parsed from. */
export type IfChanged<T> =
  { changed: false; etag: string } | { changed: true; etag: string | null; value: T; text: string };

/** An answer as the engine gave it: its status, headers, parsed body and the body's text. */
type Exchanged<T> = { status: number; headers: http.IncomingHttpHeaders; value: T | undefined; text: string };

export class ApiClient {
  /** Keeps connections open between requests; an idle one is dropped after 4 s, before the engine's keep-alive (5 s). */
  readonly #agent: http.Agent;
  /** For streamed bodies and WebSockets: a connection of their own each. */
  readonly #oneShot: http.Agent | false;
  readonly #streams = new Set<WebSocket>();

  constructor(readonly target: ApiTarget) {
    const tls = 'url' in target && new URL(target.url).protocol === 'https:';
    this.#agent = tls
      ? new PinnedAgent(target, { keepAlive: true, timeout: 4000 })
      : new http.Agent({ keepAlive: true, timeout: 4000 });
    this.#oneShot = tls ? new PinnedAgent(target) : false;
  }

  /** Ends this client's idle connections and open streams (a process need not call it to exit). */
  close(): void {
    for (const ws of this.#streams) ws.close();
    this.#agent.destroy();
    if (this.#oneShot) this.#oneShot.destroy();
  }

  /**
   * One API operation by its name (operations.ts), typed from the route table: `call('getVm', { params: { vm } })`.
   */
  call<O extends OperationName>(name: O, ...[input]: CallArgs<O>): Promise<ResponseOf<O>> {
    const { method, path, body } = operationRequest(name, input);
    return this.request<ResponseOf<O>>(method, path, body);
  }

  /** One request; resolves with the parsed JSON (a string for other types, undefined when there is no body). */
  async request<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    return (await this.#exchange<T>(method, path, body, {})).value as T;
  }

  /**
   * A GET that sends the ETag of what the caller already has (If-None-Match): `changed: false` (a 304, no body)
   * while the engine's answer is still that one, else the new value and its ETag (docs/engine.md, "Listing
   * episodes"). `etag` null asks unconditionally.
   */
  async getIfChanged<T = unknown>(path: string, etag: string | null): Promise<IfChanged<T>> {
    const answer = await this.#exchange<T>('GET', path, undefined, etag === null ? {} : { 'if-none-match': etag });
    const tag = typeof answer.headers.etag === 'string' ? answer.headers.etag : null;
    if (answer.status === 304) return { changed: false, etag: tag ?? etag! };
    return { changed: true, etag: tag, value: answer.value as T, text: answer.text };
  }

  #exchange<T>(method: string, path: string, body: unknown, extra: http.OutgoingHttpHeaders): Promise<Exchanged<T>> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: http.OutgoingHttpHeaders = { accept: 'application/json', ...extra };
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = Buffer.byteLength(payload);
    }
    const once = () => this.#once<T>(method, path, headers, payload);
    return once().catch((error: Error & { code?: string; reusedSocket?: boolean }) => {
      // A kept connection the engine closed just before our request reached it: the request never got there, so
      // asking again on a fresh connection is safe for a request that means the same twice (RETRY_METHODS).
      if (error.reusedSocket && STALE_CODES.has(error.code ?? '') && RETRY_METHODS.has(method)) return once();
      throw error;
    });
  }

  #once<T>(
    method: string,
    path: string,
    headers: http.OutgoingHttpHeaders,
    payload: string | undefined,
  ): Promise<Exchanged<T>> {
    return new Promise((resolve, reject) => {
      const answered = (res: http.IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status >= 400) return reject(refusal(status, text));
          const json = /[/+]json\b/.test(res.headers['content-type'] ?? '');
          try {
            const value = (text === '' ? undefined : json ? JSON.parse(text) : text) as T | undefined;
            resolve({ status, headers: res.headers, value, text });
          } catch (error) {
            reject(new ApiClientError(status, `the engine answered malformed JSON: ${(error as Error).message}`));
          }
        });
      };
      // Started from the check phase, not at once: after this process was busy for seconds (200 clients parsing
      // lists), the pooled connection's idle timer and the engine's close of it (its keep-alive, 5 s + 1 s) are both
      // overdue but not yet handled, and a request started in that same turn takes the dead connection (EPIPE or
      // "socket hang up": smol bench clients, docs/survival.md). One turn later both have been handled.
      setImmediate(() => {
        const req =
          'socketPath' in this.target
            ? http.request({ socketPath: this.target.socketPath, path, method, headers, agent: this.#agent }, answered)
            : http.request(
                new URL(path, this.target.url),
                { method, headers: { ...headers, authorization: `Bearer ${this.target.token}` }, agent: this.#agent },
                answered,
              );
        req.on('error', (error: Error & { reusedSocket?: boolean }) => {
          if (req.reusedSocket) error.reusedSocket = true;
          reject(error);
        });
        req.end(payload);
      });
    });
  }

  /** A request with a raw body (or none) whose response is streamed: guest files (docs/engine.md). */
  #raw(method: string, path: string, body?: AsyncIterable<Uint8Array> | Uint8Array): Promise<http.IncomingMessage> {
    const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/octet-stream' };
    if (body instanceof Uint8Array) headers['content-length'] = body.length;
    return new Promise<http.IncomingMessage>((resolve, reject) => {
      const answered = (res: http.IncomingMessage) => {
        const status = res.statusCode ?? 0;
        if (status < 400) return resolve(res);
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => reject(refusal(status, Buffer.concat(chunks).toString())));
        res.on('error', reject);
      };
      const req =
        'socketPath' in this.target
          ? http.request({ socketPath: this.target.socketPath, path, method, headers, agent: false }, answered)
          : http.request(
              new URL(path, this.target.url),
              { method, headers: { ...headers, authorization: `Bearer ${this.target.token}` }, agent: this.#oneShot },
              answered,
            );
      req.on('error', reject);
      if (body === undefined || body instanceof Uint8Array) req.end(body);
      // A body the engine stopped reading (it answered an error first) is not an error of ours: the answer says why.
      else pipeline(Readable.from(body), req).catch(() => undefined);
    });
  }

  /** A guest file's bytes as a stream (the engine's GET /vms/:vm/files). */
  openFile(vmRef: string, path: string): Promise<http.IncomingMessage> {
    return this.#raw('GET', `${API_PREFIX}/vms/${encodeURIComponent(vmRef)}/files?path=${encodeURIComponent(path)}`);
  }

  /** Writes a guest file from bytes or a stream; the old file stays until all of it arrived. */
  async writeFile(
    vmRef: string,
    path: string,
    data: Uint8Array | AsyncIterable<Uint8Array>,
    options: { mode?: number } = {},
  ): Promise<{ bytes: number }> {
    const mode = options.mode === undefined ? '' : `&mode=${options.mode.toString(8).padStart(4, '0')}`;
    const where = `${API_PREFIX}/vms/${encodeURIComponent(vmRef)}/files?path=${encodeURIComponent(path)}${mode}`;
    const res = await this.#raw('PUT', where, data);
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as { bytes: number };
  }

  /** A command in the guest with streamed output (and input): the exec WebSocket (routes.ts, `execStream`). */
  exec(vmRef: string, request: Omit<ExecRequest, 'stdin'>, options: ExecStreamOptions): ExecStream {
    const ws = this.#webSocket(`${API_PREFIX}/vms/${encodeURIComponent(vmRef)}/exec`);
    let settle!: { resolve: (exit: ExecExit) => void; reject: (error: Error) => void };
    const exit = new Promise<ExecExit>((resolve, reject) => (settle = { resolve, reject }));
    let ended = false;
    let started = false;
    const stream = this.#ending(ws, (why) => {
      if (!ended) settle.reject(new ApiClientError(0, why.replace(/^refused \(\d+\): /, '')));
    });
    // Stdin is sent as fast as the socket takes it and no faster: past STDIN_AHEAD not yet written out, the pump
    // waits for the socket (the engine stops reading while the command is behind), so a 50 MiB tar into a slow
    // guest is neither held in memory here nor cut off there.
    const pumpStdin = async (source: AsyncIterable<Uint8Array>) => {
      for await (const chunk of source) {
        if (ws.readyState !== WebSocket.OPEN) return;
        if (ws.bufferedAmount < STDIN_AHEAD) ws.send(chunk, { binary: true });
        else await new Promise<void>((resolve) => ws.send(chunk, { binary: true }, () => resolve()));
      }
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'eof' }));
    };
    let resizeOnOpen: string | null = null;
    ws.on('open', () => {
      ws.send(JSON.stringify({ ...request, ...(options.stdin && { stdin: true }) }));
      if (resizeOnOpen) ws.send(resizeOnOpen);
    });
    ws.on('message', (data, isBinary) => {
      const bytes = toBuffer(data);
      if (isBinary) return (bytes[0] === 2 ? options.onStderr : options.onStdout)(bytes.subarray(1));
      let message: ExecExit & { type: string; message?: string };
      try {
        message = JSON.parse(bytes.toString('utf8')) as typeof message;
      } catch {
        message = { type: 'error', message: 'the engine sent a malformed exec message' } as typeof message;
      }
      if (message.type === 'started') {
        started = true;
        if (options.stdin) void pumpStdin(options.stdin).catch(() => undefined);
      } else if (message.type === 'exit') {
        ended = true;
        settle.resolve({ exitCode: message.exitCode, signal: message.signal, timedOut: message.timedOut });
        stream.close();
      } else if (message.type === 'error') {
        ended = true;
        settle.reject(new ApiClientError(400, message.message ?? 'exec failed'));
        stream.close();
      }
    });
    return {
      exit,
      signal: (signal) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: 'signal', signal })),
      resize: (size) => {
        if (!request.tty) throw new ApiClientError(400, 'resize: this command has no terminal (exec it with tty)');
        if (!TerminalSize.safeParse(size).success)
          throw new ApiClientError(400, `resize: ${size.rows} rows and ${size.cols} columns (each 1 to 1000)`);
        const message = JSON.stringify({ type: 'resize', rows: size.rows, cols: size.cols });
        if (ws.readyState === WebSocket.OPEN) ws.send(message);
        else if (ws.readyState === WebSocket.CONNECTING) resizeOnOpen = message;
      },
      started: () => started,
      close: () => stream.end('closed by the client'),
    };
  }

  /** Every engine event from now on, in order. */
  events(onEvent: (event: EngineEvent) => void, handlers: EventHandlers = {}): { close(): void } {
    const ws = this.#webSocket(`${API_PREFIX}/events`);
    const stream = this.#ending(ws, handlers.onClose);
    ws.on('open', () => handlers.onOpen?.());
    ws.on('message', (data, isBinary) => {
      if (!isBinary) onEvent(JSON.parse(toBuffer(data).toString('utf8')) as EngineEvent);
    });
    return { close: stream.close };
  }

  /** A VM's live console: its screen first, then output as it comes; `write` types into it. */
  console(vmRef: string, handlers: ConsoleHandlers): { write(data: string | Buffer): void; close(): void } {
    const ws = this.#webSocket(`${API_PREFIX}/vms/${encodeURIComponent(vmRef)}/console`);
    const stream = this.#ending(ws, handlers.onClose);
    const pending: (string | Buffer)[] = [];
    ws.on('open', () => pending.splice(0).forEach((data) => ws.send(data)));
    ws.on('message', (data, isBinary) => {
      if (isBinary) return handlers.onData(toBuffer(data));
      const message = JSON.parse(toBuffer(data).toString('utf8')) as { type: string; data?: string; reason?: string };
      if (message.type === 'screen') handlers.onScreen?.(message.data ?? '', message.reason as 'attach' | 'resync');
      else if (message.type === 'closed') stream.end(message.reason ?? 'closed');
    });
    return {
      write: (data) => {
        if (ws.readyState === WebSocket.CONNECTING) pending.push(data);
        else if (ws.readyState === WebSocket.OPEN) ws.send(data);
      },
      close: stream.close,
    };
  }

  #webSocket(path: string): WebSocket {
    if ('socketPath' in this.target) return new WebSocket(`ws+unix:${this.target.socketPath}:${path}`);
    const url = new URL(path, this.target.url);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    const agent = this.#oneShot || undefined;
    return new WebSocket(url, { headers: { authorization: `Bearer ${this.target.token}` }, agent });
  }

  /** Reports the first reason a WebSocket ended (a refusal's own message too) once, unless we closed it. */
  #ending(ws: WebSocket, onClose?: (why: string) => void) {
    let done = false;
    this.#streams.add(ws);
    const end = (why: string) => {
      if (done) return;
      done = true;
      onClose?.(why);
      ws.close();
    };
    ws.on('close', () => this.#streams.delete(ws));
    ws.on('unexpected-response', (req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        end(`refused (${status}): ${refusal(status, Buffer.concat(chunks).toString('utf8')).message}`);
        req.destroy();
      });
    });
    ws.on('error', (error) => end(error.message));
    ws.on('close', (code, reason) => end(reason.toString('utf8') || `the connection closed (${code})`));
    return {
      end,
      close: () => {
        done = true;
        ws.close();
      },
    };
  }
}
