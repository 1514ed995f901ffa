// The remote engines the app reaches through this engine (docs/remote.md, "The app with several engines"). A browser
// page can neither pin a self-signed certificate nor be trusted with another engine's token, so the local engine
// keeps them, in the client's engines file that `smol engine add` writes (client-config.ts), and forwards
// `/api/v1/engines/NAME/…` (REST and the events, console and exec WebSockets) to engine NAME over its pinned TLS
// agent with its token. The page's own headers (cookie, Origin, Authorization, its ?token=) never go further.
import http from 'node:http';
import net from 'node:net';
import https from 'node:https';
import { pipeline } from 'node:stream/promises';
import tls from 'node:tls';
import { WebSocket, type RawData } from 'ws';
import { ApiFailure } from '../api/engine-api.js';
import { ClientConfig, clientConfigFile, pinKey, type RemoteEngine } from '../api/client-config.js';
import { CertificateChangedError, PinnedAgent, normalFingerprint } from '../api/pinned-tls.js';
import type { AddEngineRequest, AddedEngine, EngineProbe, RemoteEngineInfo } from '../api/schema.js';
import { API_PREFIX } from '../api/schema.js';

/** An engine that has not connected in this long is unreachable (a refused connection says so at once). */
export const CONNECT_TIMEOUT_MS = 3000;
/** A forwarded WebSocket stops reading one side while the other has this much unsent, until under the low mark. */
const RELAY_HIGH = 4 << 20;
const RELAY_LOW = 1 << 20;
/**
 * The answer's headers that come back to the page; everything else stays with the remote engine. ETag and
 * Cache-Control with If-None-Match below: a poller's conditional list is a 304 through this engine too.
 */
const RESPONSE_HEADERS = [
  'content-type',
  'content-length',
  'x-file-mode',
  'allow',
  'retry-after',
  'etag',
  'cache-control',
];
/** The request's headers that go on to the remote engine (its token is added; the page's are never sent on). */
const REQUEST_HEADERS = ['content-type', 'content-length', 'accept', 'transfer-encoding', 'if-none-match'];

/** A failure of a forwarded request: its status, message and reason (the `{ error }` body's `reason`). */
export class ForwardFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly reason: string,
  ) {
    super(message);
  }
}

interface Reached {
  name: string;
  engine: RemoteEngine;
  agent: http.Agent;
  https: boolean;
}

/** `/api/v1/engines/NAME/REST`: the engine's name and REST (`/episodes`), or null for any other path. */
export function forwardedPath(pathname: string): { name: string; rest: string } | null {
  const match = /^\/api\/v1\/engines\/([^/]+)(\/.+)$/.exec(pathname);
  if (!match) return null;
  return { name: decodeURIComponent(match[1]!), rest: match[2]! };
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

export class RemoteEngines {
  /** One agent per engine (and per URL, token and pin it had): kept connections, as the SDK keeps them. */
  readonly #agents = new Map<string, http.Agent>();

  constructor(
    readonly file: string = clientConfigFile(),
    private readonly log: (line: string) => void = () => undefined,
  ) {}

  /** The file as it is now: `smol engine add` in a terminal shows up at the app's next request. */
  #config(): ClientConfig {
    return ClientConfig.load(this.file);
  }

  list(): RemoteEngineInfo[] {
    const config = this.#config();
    return Object.entries(config.engines)
      .map(([name, e]) => ({
        name,
        url: e.url,
        fingerprint: config.get(pinKey(e.url))?.fingerprint ?? null,
        added: e.added,
      }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  /** The certificate the engine at `url` presents: a handshake only, nothing is sent over it. */
  async probe(url: string): Promise<EngineProbe> {
    const base = new URL(url);
    const pinned = this.#config().get(pinKey(base.origin))?.fingerprint ?? null;
    if (base.protocol !== 'https:') return { url: base.origin, fingerprint: null, pinned };
    const fingerprint = await new Promise<string>((resolve, reject) => {
      const host = base.hostname.replace(/^\[|\]$/g, '');
      const socket = tls.connect({
        host,
        port: Number(base.port || 443),
        rejectUnauthorized: false,
        ...(net.isIP(host) === 0 && { servername: host }),
      });
      const timer = setTimeout(
        () => socket.destroy(new Error(`no answer in ${CONNECT_TIMEOUT_MS / 1000} s`)),
        CONNECT_TIMEOUT_MS,
      );
      socket.once('secureConnect', () => {
        clearTimeout(timer);
        const presented = socket.getPeerCertificate().fingerprint256;
        socket.destroy();
        if (presented) resolve(presented);
        else reject(new Error('it presented no certificate'));
      });
      socket.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    }).catch((error: unknown) => {
      throw new ApiFailure(400, `the engine at ${base.origin} is unreachable: ${messageOf(error)}`, 'EUNREACHABLE');
    });
    return { url: base.origin, fingerprint, pinned };
  }

  /** Adds an engine: its certificate is the fingerprint given (else pinned on first use), its token opens its health. */
  async add(request: AddEngineRequest): Promise<AddedEngine> {
    const config = this.#config();
    if (config.engines[request.name]) {
      throw new ApiFailure(409, `an engine named ${request.name} exists (remove it first, or choose another name)`);
    }
    const base = new URL(request.url).origin;
    const key = pinKey(base);
    const wanted = request.fingerprint ? normalFingerprint(request.fingerprint) : null;
    const before = config.get(key);
    // A fingerprint the person confirmed replaces an older pin of that address, as smol engine add --fingerprint does.
    if (wanted && before && before.fingerprint !== wanted) config.forget(key);
    const engine: RemoteEngine = { url: base, token: request.token, added: new Date().toISOString() };
    const reached: Reached = {
      name: request.name,
      engine,
      agent: this.#newAgent(engine, config, wanted),
      https: base.startsWith('https:'),
    };
    let health: { version?: string };
    try {
      const answer = await this.#call(reached, 'GET', `${API_PREFIX}/health`);
      if (answer.status === 401) {
        throw new ApiFailure(400, `the engine at ${base} refuses the token (${answer.message})`, 'EWRONGTOKEN');
      }
      if (answer.status !== 200)
        throw new ApiFailure(400, `the engine at ${base} answered ${answer.status}: ${answer.message}`);
      health = JSON.parse(answer.body) as { version?: string };
    } catch (error) {
      // The pin stays as it was when nothing was added.
      if (wanted && before && before.fingerprint !== wanted) config.set(key, before.fingerprint);
      if (error instanceof ApiFailure) throw error;
      const failure = this.#failure(reached, error);
      throw new ApiFailure(400, failure.message, failure.reason);
    } finally {
      reached.agent.destroy();
    }
    // A fingerprint given is kept as the certificate spells it (AB:CD:…), as the CLI keeps it.
    if (wanted && !config.get(key)) config.set(key, wanted);
    config.addEngine(request.name, base, request.token);
    const fingerprint = config.get(key)?.fingerprint ?? null;
    this.log(`engine: remote engine ${request.name} added (${base}${fingerprint ? `, SHA-256 ${fingerprint}` : ''})`);
    // The time the file keeps, so that the list says the same.
    const added = config.engines[request.name]?.added ?? engine.added;
    return { name: request.name, url: base, fingerprint, added, version: health.version ?? '' };
  }

  remove(name: string): void {
    const config = this.#config();
    if (!config.removeEngine(name)) throw new ApiFailure(404, `no engine named ${name}`);
    for (const [key, agent] of this.#agents) {
      if (key.startsWith(`${name}\n`)) {
        agent.destroy();
        this.#agents.delete(key);
      }
    }
    this.log(`engine: remote engine ${name} removed`);
  }

  close(): void {
    for (const agent of this.#agents.values()) agent.destroy();
    this.#agents.clear();
  }

  #newAgent(engine: RemoteEngine, config: ClientConfig, fingerprint: string | null = null): http.Agent {
    if (!engine.url.startsWith('https:')) return new http.Agent({ keepAlive: true, timeout: 4000 });
    return new PinnedAgent(
      { fingerprint, pins: fingerprint ? null : config, trustName: pinKey(engine.url) },
      { keepAlive: true, timeout: 4000 },
    );
  }

  /** The engine named `name`, with its agent; 404 when there is none. */
  #reach(name: string): Reached {
    const config = this.#config();
    const engine = config.engines[name];
    if (!engine) throw new ForwardFailure(404, `no engine named ${name} (GET /api/v1/engines lists them)`, 'ENOENGINE');
    const pin = config.get(pinKey(engine.url))?.fingerprint ?? '';
    const key = `${name}\n${engine.url}\n${engine.token}\n${pin}`;
    let agent = this.#agents.get(key);
    if (!agent) {
      for (const [old, stale] of this.#agents) {
        if (old.startsWith(`${name}\n`)) {
          stale.destroy();
          this.#agents.delete(old);
        }
      }
      agent = this.#newAgent(engine, config);
      this.#agents.set(key, agent);
    }
    return { name, engine, agent, https: engine.url.startsWith('https:') };
  }

  /** What a failure to reach an engine is, said for the person: which engine, and why. */
  #failure(reached: Reached, error: unknown): ForwardFailure {
    const who = `the engine ${reached.name} (${reached.engine.url})`;
    if (error instanceof CertificateChangedError)
      return new ForwardFailure(502, `${who}: ${error.message}`, 'ECERTCHANGED');
    return new ForwardFailure(502, `${who} is unreachable: ${messageOf(error)}`, 'EUNREACHABLE');
  }

  #wrongToken(reached: Reached, message: string): ForwardFailure {
    return new ForwardFailure(
      502,
      `the engine ${reached.name} refuses the token it was added with (${message}): add it again with a valid token`,
      'EREMOTETOKEN',
    );
  }

  /** Starts a request to the engine, with the connect timeout; resolves with the answer's head. */
  #request(
    reached: Reached,
    method: string,
    path: string,
    headers: Record<string, string>,
  ): { request: http.ClientRequest; response: Promise<http.IncomingMessage> } {
    const target = new URL(path, reached.engine.url);
    const lib = reached.https ? https : http;
    const request = lib.request(target, {
      method,
      agent: reached.agent,
      headers: { ...headers, authorization: `Bearer ${reached.engine.token}` },
    });
    const response = new Promise<http.IncomingMessage>((resolve, reject) => {
      const timer = setTimeout(
        () => request.destroy(new Error(`no connection in ${CONNECT_TIMEOUT_MS / 1000} s`)),
        CONNECT_TIMEOUT_MS,
      );
      request.once('socket', (socket) => {
        if (socket.connecting) socket.once('connect', () => clearTimeout(timer));
        else clearTimeout(timer); // a kept connection, or the pinned agent's, which hands over only connected ones
      });
      request.once('response', (r) => {
        clearTimeout(timer);
        resolve(r);
      });
      request.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
    return { request, response };
  }

  /** A whole small call (the health check of `add`): status, body and the error message if any. */
  async #call(
    reached: Reached,
    method: string,
    path: string,
  ): Promise<{ status: number; body: string; message: string }> {
    const { request, response } = this.#request(reached, method, path, { accept: 'application/json' });
    request.end();
    const r = await response;
    const chunks: Buffer[] = [];
    for await (const chunk of r) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    let message = body;
    try {
      message = (JSON.parse(body) as { error?: { message?: string } }).error?.message ?? body;
    } catch {
      // not JSON: the text as it is
    }
    return { status: r.statusCode ?? 0, body, message };
  }

  /** Forwards one HTTP request to engine `name`'s `/api/v1${rest}`; the answer is streamed back as it comes. */
  async forward(
    name: string,
    rest: string,
    search: URLSearchParams,
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): Promise<void> {
    const reached = this.#reach(name);
    const query = new URLSearchParams([...search].filter(([key]) => key !== 'token')).toString();
    const headers: Record<string, string> = {};
    for (const header of REQUEST_HEADERS) {
      const value = req.headers[header];
      if (typeof value === 'string') headers[header] = value;
    }
    const { request, response } = this.#request(
      reached,
      req.method ?? 'GET',
      `${API_PREFIX}${rest}${query ? `?${query}` : ''}`,
      headers,
    );
    const sent = pipeline(req, request).catch(() => undefined);
    let r: http.IncomingMessage;
    try {
      r = await response;
    } catch (error) {
      req.resume();
      throw this.#failure(reached, error);
    }
    if (r.statusCode === 401) {
      const chunks: Buffer[] = [];
      for await (const chunk of r) chunks.push(chunk as Buffer);
      let message = 'wrong token';
      try {
        message = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error: { message: string } }).error.message;
      } catch {
        // the status says enough
      }
      throw this.#wrongToken(reached, message);
    }
    const out: Record<string, string> = {};
    for (const header of RESPONSE_HEADERS) {
      const value = r.headers[header];
      if (typeof value === 'string') out[header] = value;
    }
    res.writeHead(r.statusCode ?? 502, out);
    await pipeline(r, res).catch(() => res.destroy());
    await sent;
  }

  /**
   * Forwards a WebSocket: opens engine `name`'s `/api/v1${rest}` first, then accepts the page's upgrade and relays
   * messages both ways. `readOnly` (the local caller's read-only token, for a console) answers typed input here.
   */
  forwardUpgrade(
    name: string,
    rest: string,
    options: {
      readOnly: string | null;
      accept: (then: (ws: WebSocket) => void) => void;
      reject: (status: number, message: string) => void;
    },
  ): void {
    let reached: Reached;
    try {
      reached = this.#reach(name);
    } catch (error) {
      const failure = error as ForwardFailure;
      return options.reject(failure.status, failure.message);
    }
    const url = new URL(`${API_PREFIX}${rest}`, reached.engine.url);
    url.protocol = reached.https ? 'wss:' : 'ws:';
    const remote = new WebSocket(url, {
      agent: reached.agent,
      headers: { authorization: `Bearer ${reached.engine.token}` },
      handshakeTimeout: CONNECT_TIMEOUT_MS,
      maxPayload: 64 << 20,
    });
    let opened = false;
    remote.on('unexpected-response', (_request, response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        let message = `${response.statusCode}`;
        try {
          message = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error: { message: string } }).error
            .message;
        } catch {
          // the status says enough
        }
        const failure =
          response.statusCode === 401
            ? this.#wrongToken(reached, message)
            : new ForwardFailure(response.statusCode ?? 502, message, 'EREMOTE');
        options.reject(failure.status, failure.message);
      });
      remote.terminate();
    });
    remote.on('error', (error) => {
      if (opened) return;
      opened = true; // answered once
      const failure = this.#failure(reached, error);
      options.reject(failure.status, failure.message);
    });
    remote.on('open', () => {
      opened = true;
      options.accept((local) => relay(local, remote, reached.name, options.readOnly));
    });
  }
}

const closeCode = (code: number) => (code === 1005 || code === 1006 || code < 1000 || code >= 5000 ? 1011 : code);

/** Messages both ways, each side paused while the other has too much unsent; a close on one side closes the other. */
function relay(local: WebSocket, remote: WebSocket, name: string, readOnly: string | null): void {
  const send = (to: WebSocket, from: WebSocket, data: RawData, isBinary: boolean) => {
    if (to.readyState !== WebSocket.OPEN) return;
    to.send(data as Buffer, { binary: isBinary });
    if (to.bufferedAmount > RELAY_HIGH && !from.isPaused) {
      from.pause();
      const wait = setInterval(() => {
        if (to.readyState !== WebSocket.OPEN || to.bufferedAmount < RELAY_LOW) {
          clearInterval(wait);
          from.resume();
        }
      }, 20);
    }
  };
  remote.on('message', (data, isBinary) => send(local, remote, data, isBinary));
  local.on('message', (data, isBinary) => {
    if (readOnly) {
      return void local.send(JSON.stringify({ type: 'error', message: `${readOnly}: typing needs a full token` }));
    }
    send(remote, local, data, isBinary);
  });
  remote.on('close', (code, reason) => {
    if (local.readyState === WebSocket.OPEN) {
      local.close(closeCode(code), reason.length > 0 ? reason : `the engine ${name} closed the stream (${code})`);
    }
  });
  local.on('close', () => {
    if (remote.readyState === WebSocket.OPEN || remote.readyState === WebSocket.CONNECTING) remote.close(1000);
  });
  remote.on('error', () => remote.terminate());
}
