// The Transport of web mode: the engine's HTTP API under /api/v1 and its WebSockets, on the origin that served the
// page (`smol serve`), with the page's token (page-token.ts): a Bearer header on requests, `?token=` on WebSockets
// (a browser cannot give those headers).
import { API_PREFIX, EngineEvent } from '../../../src/api/schema.js';
import {
  TransportError,
  type ConsoleHandlers,
  type ConsoleStream,
  type EventStreamHandlers,
  type Method,
  type TerminalHandlers,
  type TerminalRequest,
  type TerminalStream,
  type Transport,
} from './transport.js';

/** Why the stream is down when the engine answers but refuses this page's token (`smol serve --rotate-token`). */
export const REFUSED_TOKEN =
  'the engine refuses this page’s token: it was replaced (smol serve --rotate-token); open the URL smol serve prints';

/** Reconnect delays for the event stream: quick at first, then every few seconds. */
const RECONNECT_MS = [250, 500, 1000, 2000, 4000];

async function errorOf(response: Response): Promise<TransportError> {
  const text = await response.text().catch(() => '');
  try {
    const message = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    if (typeof message === 'string') return new TransportError(response.status, message);
  } catch {
    // not the engine's JSON error: said below
  }
  return new TransportError(response.status, text.trim() || `${response.status} ${response.statusText}`);
}

export class WebTransport implements Transport {
  constructor(
    /** The engine's origin, `http://127.0.0.1:PORT`. */
    readonly origin: string,
    readonly token: string | null,
    /**
     * Under /api/v1 before every path: `/engines/NAME` reaches a remote engine through this one (docs/remote.md,
     * "The app with several engines"), its REST and WebSockets alike.
     */
    readonly prefix = '',
  ) {}

  async request<T>(method: Method, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await fetch(`${this.origin}${API_PREFIX}${this.prefix}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'same-origin',
      });
    } catch (error) {
      throw new TransportError(0, `the engine did not answer (${(error as Error).message})`);
    }
    if (!response.ok) throw await errorOf(response);
    const text = await response.text();
    if (text === '') return undefined as T;
    if (!/[/+]json\b/.test(response.headers.get('content-type') ?? '')) return text as T;
    try {
      return JSON.parse(text) as T;
    } catch (error) {
      throw new TransportError(response.status, `the engine answered malformed JSON: ${(error as Error).message}`);
    }
  }

  #socket(path: string): WebSocket {
    const url = new URL(`${API_PREFIX}${this.prefix}${path}`, this.origin);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    if (this.token) url.searchParams.set('token', this.token);
    return new WebSocket(url);
  }

  events(handlers: EventStreamHandlers): () => void {
    let closed = false;
    let attempt = 0;
    let ws: WebSocket | null = null;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const connect = () => {
      handlers.onState('connecting');
      const socket = (ws = this.#socket('/events'));
      socket.onopen = () => {
        attempt = 0;
        handlers.onState('open');
      };
      socket.onmessage = (message: MessageEvent) => {
        if (typeof message.data !== 'string') return;
        const parsed = EngineEvent.safeParse(JSON.parse(message.data));
        if (parsed.success) handlers.onEvent(parsed.data);
        else console.error('smol: an engine event the schema does not accept', parsed.error, message.data);
      };
      socket.onclose = (event: CloseEvent) => {
        if (closed) return;
        const why = event.reason || `the event stream closed (${event.code})`;
        handlers.onState('closed', why);
        timer = setTimeout(connect, RECONNECT_MS[Math.min(attempt++, RECONNECT_MS.length - 1)]);
        // A browser does not say why a WebSocket was refused: ask, so a replaced token is told from an engine away.
        void this.request('GET', '/health').catch((error: unknown) => {
          if (closed || !(error instanceof TransportError) || ws !== socket) return;
          if (error.status === 401) handlers.onState('closed', REFUSED_TOKEN);
          // A remote engine through this one: the local engine's 502 says which and why (unreachable, its token).
          else if (this.prefix && error.status === 502) handlers.onState('closed', error.message);
        });
      };
    };
    connect();
    return () => {
      closed = true;
      clearTimeout(timer);
      ws?.close();
    };
  }

  console(vm: string, handlers: ConsoleHandlers): ConsoleStream {
    const ws = this.#socket(`/vms/${encodeURIComponent(vm)}/console`);
    ws.binaryType = 'arraybuffer';
    const pending: (string | Uint8Array)[] = [];
    let ended = false;
    const end = (why: string) => {
      if (ended) return;
      ended = true;
      handlers.onClose(why);
    };
    ws.onopen = () => {
      for (const data of pending.splice(0)) ws.send(data);
    };
    ws.onmessage = (message: MessageEvent) => {
      if (message.data instanceof ArrayBuffer) return handlers.onData(new Uint8Array(message.data));
      const parsed = JSON.parse(String(message.data)) as {
        type: string;
        data?: string;
        reason?: string;
        message?: string;
      };
      if (parsed.type === 'screen')
        handlers.onScreen(parsed.data ?? '', parsed.reason === 'resync' ? 'resync' : 'attach');
      else if (parsed.type === 'closed') end(parsed.reason ?? 'the console closed');
      else if (parsed.type === 'error') handlers.onError?.(parsed.message ?? 'the console refused the input');
    };
    ws.onclose = (event: CloseEvent) =>
      end(
        event.reason || (event.code === 1006 ? 'the engine refused or dropped the console' : `closed (${event.code})`),
      );
    return {
      write: (data) => {
        if (ws.readyState === WebSocket.CONNECTING) pending.push(data);
        else if (ws.readyState === WebSocket.OPEN) ws.send(data);
      },
      close: () => {
        ended = true;
        ws.close();
      },
    };
  }

  /** The exec WebSocket (routes.ts, `execStream`) with `tty`: binary messages both ways, resize as JSON. */
  terminal(vm: string, request: TerminalRequest, handlers: TerminalHandlers): TerminalStream {
    const ws = this.#socket(`/vms/${encodeURIComponent(vm)}/exec`);
    ws.binaryType = 'arraybuffer';
    const encoder = new TextEncoder();
    let ended = false;
    let started = false;
    const pending: (string | Uint8Array)[] = [];
    const end = (why: string) => {
      if (ended) return;
      ended = true;
      handlers.onClose(why);
    };
    ws.onopen = () => {
      const { argv, rows, cols, env } = request;
      ws.send(JSON.stringify({ argv, tty: { rows, cols }, ...(env && { env }) }));
    };
    ws.onmessage = (message: MessageEvent) => {
      if (message.data instanceof ArrayBuffer) return handlers.onData(new Uint8Array(message.data, 1));
      const parsed = JSON.parse(String(message.data)) as { type: string; message?: string } & Parameters<
        TerminalHandlers['onExit']
      >[0];
      if (parsed.type === 'started') {
        started = true;
        handlers.onStart();
        for (const data of pending.splice(0)) ws.send(typeof data === 'string' ? encoder.encode(data) : data);
      } else if (parsed.type === 'exit') {
        ended = true;
        handlers.onExit({ exitCode: parsed.exitCode, signal: parsed.signal, timedOut: parsed.timedOut });
      } else if (parsed.type === 'error') end(parsed.message ?? 'the terminal failed');
    };
    ws.onclose = (event: CloseEvent) =>
      end(
        event.reason || (event.code === 1006 ? 'the engine refused or dropped the terminal' : `closed (${event.code})`),
      );
    return {
      // Keys are binary messages (text ones are the stream's controls), sent once the command runs.
      write: (data) => {
        if (ended) return;
        if (!started) pending.push(data);
        else if (ws.readyState === WebSocket.OPEN) ws.send(typeof data === 'string' ? encoder.encode(data) : data);
      },
      resize: (rows, cols) => {
        if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', rows, cols }));
      },
      close: () => {
        ended = true;
        ws.close();
      },
    };
  }
}
