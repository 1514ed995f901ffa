// The API's WebSocket streams (docs/engine.md, "API" and "Consoles"): engine events, and a VM's live console. The
// server (api-server.ts) checks the token, the Origin and the path before it upgrades and hands the socket here.
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';
import { z } from 'zod';
import type { ConsoleAttachment, EngineApi, GuestProcess } from '../api/engine-api.js';
import { parseInput } from '../api/request-errors.js';
import { ExecRequest, TerminalSize } from '../api/schema.js';

/** An events viewer this far behind is cut off rather than buffered without end. */
const MAX_EVENT_BACKLOG = 64 << 20;
/** An exec client this far behind on output, or this far ahead with stdin, is cut off (its command gets SIGHUP). */
const MAX_EXEC_BACKLOG = 64 << 20;
const MAX_EXEC_STDIN_QUEUED = 16 << 20;
/**
 * Stdin's flow control: with this much queued for a command that reads slower than the client sends (a tar unpacking
 * into a slow guest), the socket stops being read, so TCP holds the client back; below the low mark it is read
 * again. What was already read when it paused still arrives, which the cut-off above leaves room for.
 */
const EXEC_STDIN_PAUSE = 4 << 20;
const EXEC_STDIN_RESUME = 1 << 20;

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

const toBuffer = (data: RawData) =>
  Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);

/** Answers an upgrade request with an HTTP error (the `{ error: { code, message } }` body) instead of a WebSocket. */
export function rejectUpgrade(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ error: { code: status, message } });
  const head = [`HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}`, 'content-type: application/json'];
  head.push(`content-length: ${Buffer.byteLength(body)}`, 'connection: close');
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
}

/** Every engine event from now on, one JSON EngineEvent per text message, until the viewer leaves. */
export function streamEvents(api: EngineApi, ws: WebSocket): void {
  const unsubscribe = api.subscribe((event) => {
    if (ws.bufferedAmount > MAX_EVENT_BACKLOG) ws.terminate();
    else ws.send(JSON.stringify(event));
  });
  ws.on('close', unsubscribe);
}

/**
 * A VM's console: `{"type":"screen","data","reason"}` (text) first and after a resync, output as binary messages,
 * `{"type":"closed","reason"}` and a close when the VM ends. The viewer's messages, binary or text, are typed in;
 * one the console refuses (a read-only console, or a read-only token's: `readOnly` says why) is answered with
 * `{"type":"error","message"}`.
 */
export function streamConsole(api: EngineApi, vmRef: string, ws: WebSocket, readOnly: string | null = null): void {
  let ended = false;
  const sendJson = (message: object) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(message));
  let attachment: ConsoleAttachment;
  try {
    attachment = api.attachConsole(vmRef, {
      screen: (data, reason) => sendJson({ type: 'screen', data, reason }),
      output: (chunk) => ws.readyState === ws.OPEN && ws.send(chunk, { binary: true }),
      backlog: () => ws.bufferedAmount,
      closed: (reason) => {
        ended = true;
        sendJson({ type: 'closed', reason });
        ws.close(1000);
      },
    });
  } catch (error) {
    sendJson({ type: 'closed', reason: messageOf(error) });
    return void ws.close(1000);
  }
  ws.on('message', (data, isBinary) => {
    if (readOnly) return void sendJson({ type: 'error', message: `${readOnly}: typing needs a full token` });
    try {
      attachment.write(isBinary ? toBuffer(data) : toBuffer(data).toString('utf8'));
    } catch (error) {
      sendJson({ type: 'error', message: messageOf(error) });
    }
  });
  ws.on('close', () => {
    if (!ended) attachment.detach();
  });
}

/** Stdin from a WebSocket, as the agent's input stream: chunks as they come, until `end`. */
class InputQueue implements AsyncIterable<Uint8Array> {
  readonly #chunks: Uint8Array[] = [];
  #ended = false;
  #wake: (() => void) | null = null;
  /** Bytes pushed and not yet taken. */
  queued = 0;

  /** `taken` is told the bytes still queued each time the command takes a chunk. */
  constructor(private readonly taken: (queued: number) => void = () => undefined) {}

  push(chunk: Uint8Array): void {
    if (this.#ended) return;
    this.#chunks.push(chunk);
    this.queued += chunk.length;
    this.#wake?.();
  }

  end(): void {
    this.#ended = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    for (;;) {
      const chunk = this.#chunks.shift();
      if (chunk) {
        this.queued -= chunk.length;
        this.taken(this.queued);
        yield chunk;
      } else if (this.#ended) return;
      else await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }
}

const ExecControl = z.discriminatedUnion('type', [
  z.object({ type: z.literal('eof') }),
  z.object({ type: z.literal('signal'), signal: z.string().regex(/^SIG[A-Z0-9]+$/, 'a signal name like SIGINT') }),
  z.object({ type: z.literal('resize'), rows: z.unknown(), cols: z.unknown() }),
]);

/**
 * A command in the guest, streamed (routes.ts, `execStream`): the first text message is the ExecRequest; output
 * goes out as binary messages tagged 1 (stdout) or 2 (stderr); the client's binary messages are stdin. With `tty`
 * it is an interactive terminal session: stdin is always taken, `{"type":"resize","rows","cols"}` resizes it.
 */
export function streamExec(api: EngineApi, vmRef: string, ws: WebSocket): void {
  const sendJson = (message: object) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(message));
  const fail = (message: string) => {
    sendJson({ type: 'error', message });
    ws.close(1000);
  };
  let paused = false;
  const stdin = new InputQueue((queued) => {
    if (paused && queued < EXEC_STDIN_RESUME) {
      paused = false;
      ws.resume();
    }
  });
  let process: GuestProcess | null = null;
  let requested = false;
  let wantsInput = false;
  let hasTerminal = false;
  let sizeOnStart: TerminalSize | null = null;
  let closed = false;
  const cutOff = (why: string) => {
    sendJson({ type: 'error', message: why });
    ws.terminate();
  };
  const tagged = (tag: number) => (chunk: Buffer) => {
    if (ws.readyState !== ws.OPEN) return;
    if (ws.bufferedAmount > MAX_EXEC_BACKLOG) return cutOff('the client fell too far behind the output');
    ws.send(Buffer.concat([Buffer.from([tag]), chunk]), { binary: true });
  };
  ws.on('message', (data, isBinary) => {
    if (!requested) {
      requested = true;
      let request;
      try {
        request = JSON.parse(toBuffer(data).toString('utf8')) as unknown;
      } catch (error) {
        return fail(`the first message must be an ExecRequest in JSON: ${messageOf(error)}`);
      }
      const { stdin: wantsStdin, ...rest } = (request ?? {}) as { stdin?: unknown };
      const parsed = parseInput(ExecRequest, rest, 'request');
      if (!parsed.ok) return fail(parsed.message);
      wantsInput = wantsStdin === true || parsed.value.tty !== undefined;
      hasTerminal = parsed.value.tty !== undefined;
      api
        .spawn(vmRef, parsed.value, {
          stdout: tagged(1),
          stderr: tagged(2),
          ...(wantsInput && { stdin }),
        })
        .then((started) => {
          process = started;
          // A client that left while the command started takes it with it all the same.
          if (closed) started.kill('SIGHUP').catch(() => undefined);
          else if (sizeOnStart) started.resize(sizeOnStart).catch((error: unknown) => fail(messageOf(error)));
          sendJson({ type: 'started' });
          return started.exit;
        })
        .then((exit) => {
          // Stdin the command left unread is dropped from here, and the socket is read again for the close.
          stdin.end();
          if (paused) {
            paused = false;
            ws.resume();
          }
          sendJson({ type: 'exit', ...exit });
          ws.close(1000);
        })
        .catch((error: unknown) => fail(messageOf(error)));
      return;
    }
    if (isBinary) {
      if (!wantsInput) return sendJson({ type: 'error', message: 'stdin was not asked for ("stdin": true)' });
      stdin.push(toBuffer(data));
      if (stdin.queued > MAX_EXEC_STDIN_QUEUED) cutOff('too much stdin ahead of the command');
      else if (!paused && stdin.queued > EXEC_STDIN_PAUSE) {
        paused = true;
        ws.pause();
      }
      return;
    }
    let control;
    try {
      control = ExecControl.parse(JSON.parse(toBuffer(data).toString('utf8')));
    } catch {
      return sendJson({
        type: 'error',
        message: 'expected {"type":"eof"}, {"type":"signal","signal":"SIGINT"} or {"type":"resize","rows","cols"}',
      });
    }
    if (control.type === 'eof') stdin.end();
    else if (control.type === 'resize') {
      if (!hasTerminal) return sendJson({ type: 'error', message: 'resize: this command has no terminal ("tty")' });
      const size = parseInput(TerminalSize, { rows: control.rows, cols: control.cols }, 'resize');
      if (!size.ok) return sendJson({ type: 'error', message: size.message });
      if (process) process.resize(size.value).catch((error: unknown) => fail(messageOf(error)));
      else sizeOnStart = size.value; // it is being started: the last size asked for applies once it runs
    } else process?.kill(control.signal as NodeJS.Signals).catch((error: unknown) => fail(messageOf(error)));
  });
  // A client that leaves takes its process with it, as a closed terminal would.
  ws.on('close', () => {
    closed = true;
    stdin.end();
    process?.kill('SIGHUP').catch(() => undefined);
  });
}
