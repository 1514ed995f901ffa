// The engine's API server (docs/engine.md, "API"): HTTP/1.1 JSON and WebSockets on the data dir's Unix socket and,
// for `smol serve`, on a TCP listener that needs the token. It only translates: routes.ts says what each path does,
// the schemas say what is valid, and the EngineApi does the work.
import { createHash, timingSafeEqual } from 'node:crypto';
import { chmodSync, lstatSync, mkdtempSync, renameSync, rmSync, unlinkSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Readable, type Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { TLSSocket } from 'node:tls';
import { WebSocketServer, type WebSocket } from 'ws';
import { z } from 'zod';
import { ApiFailure, type EngineApi, type EpisodesBody } from '../api/engine-api.js';
import { codeOf, statusForCode } from '../api/error-codes.js';
import { parseInput } from '../api/request-errors.js';
import { FILE_ROUTE, ROUTES, WEBSOCKET_ROUTES, matchPath, type Params, type Route } from '../api/routes.js';
import { API_PREFIX, FileQuery, Ref } from '../api/schema.js';
import type { ApiTokens } from './api-tokens.js';
import { rejectUpgrade, streamConsole, streamEvents, streamExec } from './api-websockets.js';
import { ForwardFailure, forwardedPath, type RemoteEngines } from './remote-engines.js';
import { StaticFailure, resolveStatic, sendFailurePage, sendStatic } from './static-files.js';

export interface ApiServerOptions {
  api: EngineApi;
  /** The Unix socket (mode 0600, no token). */
  socketPath: string;
  /** A TCP listener too (`smol serve`); port 0 takes any free port. Every request on it needs `token`. */
  tcp?: { host: string; port: number; token: string };
  /** The built UI (dist/renderer), served at / outside /api/v1 (web mode); none when omitted. */
  staticRoot?: string;
  /** The data dir's named tokens (api-tokens.ts), accepted on every TCP listener beside its token. */
  tokens?: ApiTokens;
  /** The remote engines the app reaches through this one: `/api/v1/engines/NAME/…` is forwarded to NAME. */
  remotes?: RemoteEngines;
}

/** A TCP listener: where, the data dir's own full token, and HTTPS with this certificate and key when given. */
export interface TcpOptions {
  host: string;
  port: number;
  token: string;
  tls?: { cert: string; key: string };
}

export interface TcpListener {
  /** The page URL with the token: `http://host:port/?token=T`. */
  url: string;
  port: number;
}

export interface ApiServer {
  /** The TCP listener's page URL with the token (`http://host:port/?token=T`), when there is one. */
  url?: string;
  /** Opens another TCP listener (`smol serve`); every request on it needs `token` or a named token. */
  addTcp(tcp: TcpOptions): Promise<TcpListener>;
  /** Closes the TCP listener on `port` (and its connections); false when there is none. */
  closeTcp(port: number): Promise<boolean>;
  /** Every open TCP listener takes `token` from now on, and the old one no more (`smol serve --rotate-token`). */
  setTcpToken(token: string): void;
  close(): Promise<void>;
}

const MAX_BODY = 1 << 20;
/** A body this large is not even drained to say it is too large: the connection is cut. */
const MAX_DRAIN = 64 << 20;
const JSON_TYPE = 'application/json; charset=utf-8';
/** What a route without a body or query accepts: nothing (or `{}`). */
const Nothing = z.object({}).strict();
const [EVENTS, CONSOLE, EXEC] = WEBSOCKET_ROUTES.map((ws) => ws.path) as [string, string, string];

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
    readonly reason?: string,
  ) {
    super(message);
  }
}

/** The status of a failure: an ApiFailure says it; an error with a known errno name gets its kind's (error-codes.ts). */
function asHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof ApiFailure) return new HttpError(error.status, error.message, {}, error.code);
  if (error instanceof ForwardFailure) return new HttpError(error.status, error.message, {}, error.reason);
  const message = error instanceof Error ? error.message : String(error);
  const code = codeOf(error);
  return new HttpError(statusForCode(code) ?? 500, message, {}, code);
}

// ---- the TCP listener's gate: the token, then the Origin ----

interface Gate {
  token: string;
  /** The host part of this server's own origin (IPv6 in brackets). */
  host: string;
  scheme: 'http' | 'https';
  tokens: ApiTokens | null;
}

/** Who a request comes from: the data dir's own token or the Unix socket (name null, full), or a named token. */
interface Caller {
  name: string | null;
  scope: 'full' | 'read-only';
  /** The secret it presented (the page's cookie carries it on). */
  token: string | null;
}

const LOCAL: Caller = { name: null, scope: 'full', token: null };

function sameSecret(a: string, b: string): boolean {
  // Digests first: equal lengths for timingSafeEqual, and no time that depends on how much of the token matched.
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(a), digest(b));
}

const TOKEN_COOKIE = 'smol_token';

/**
 * The page's cookie is named for the port in its address (cookies do not tell ports apart, so two listeners' pages
 * on one host would share a plain `smol_token`): the Host's port, which is the listener's own unless forwarded.
 */
function tokenCookie(req: http.IncomingMessage): string {
  const port = /:(\d+)$/.exec(req.headers.host ?? '')?.[1] ?? String(req.socket.localPort);
  return `${TOKEN_COOKIE}_${port}`;
}

function presentedToken(req: http.IncomingMessage, url: URL): string | null {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (bearer) return bearer[1]!;
  const query = url.searchParams.get('token');
  if (query !== null) return query;
  const cookies = new Map<string, string>();
  for (const pair of (req.headers.cookie ?? '').split(';')) {
    const [name, ...value] = pair.trim().split('=');
    if (name) cookies.set(name, value.join('='));
  }
  return cookies.get(tokenCookie(req)) ?? cookies.get(TOKEN_COOKIE) ?? null;
}

const NO_TOKEN = 'this listener needs the token: Authorization: Bearer T, ?token=T or the page’s smol_token cookie';

/** Neither the data dir's token nor a named one (never made, revoked, or another engine's). */
const WRONG_TOKEN = 'wrong token';

/** Who may make this request on the TCP listener; throws 401 for no or a wrong token, 403 for a foreign Origin. */
function authorize(gate: Gate | null, req: http.IncomingMessage, url: URL): Caller {
  if (!gate) return LOCAL; // the Unix socket: its file mode is the protection
  const token = presentedToken(req, url);
  if (token === null) throw new HttpError(401, NO_TOKEN);
  const named = sameSecret(token, gate.token) ? null : (gate.tokens?.check(token) ?? undefined);
  if (named === undefined) throw new HttpError(401, WRONG_TOKEN);
  const own = `${gate.scheme}://${gate.host}:${req.socket.localPort}`;
  // Or the address the browser used to reach us (a forwarded port, a listener on 0.0.0.0): the page's own origin
  // then carries the same Host. A page of another origin never matches either; the token decides the rest.
  const reached = req.headers.host ? `${gate.scheme}://${req.headers.host}` : own;
  const origin = req.headers.origin;
  const foreign = `requests from ${origin} are refused (only from ${own}${reached === own ? '' : ` or ${reached}`})`;
  if (origin !== undefined && origin !== own && origin !== reached) throw new HttpError(403, foreign);
  const crossSite = crossSiteLoad(req, url);
  if (crossSite) throw crossSite;
  return named ? { ...named, token } : { name: null, scope: 'full', token };
}

/**
 * A read-only token may look (GET, HEAD: lists, screens, logs, files, the events and a console without typing) but
 * not change anything, and not see or change the tokens themselves.
 */
function checkScope(caller: Caller, method: string, pathname: string): void {
  if (caller.scope === 'full') return;
  // A forwarded route is checked as the remote engine's own: a read-only caller lists no engine's tokens.
  const forwarded = forwardedPath(pathname);
  const inner = forwarded ? `${API_PREFIX}${forwarded.rest}` : pathname;
  const tokens = inner === `${API_PREFIX}/tokens` || inner.startsWith(`${API_PREFIX}/tokens/`);
  if ((method === 'GET' || method === 'HEAD') && !tokens) return;
  throw new HttpError(403, `the token ${caller.name} is read-only: ${method} ${pathname} needs a full token`);
}

/**
 * A load that another page of the browser started (Fetch Metadata): an image, a script, a frame, a no-cors fetch.
 * Browsers send no Origin for those, and the token cookie travels with them, since another port of this host is the
 * same site. Only navigating to the page itself (a link to its URL) may come from elsewhere; everything under the
 * API must come from the page's own origin or from outside a browser (no Sec-Fetch-Site at all).
 */
function crossSiteLoad(req: http.IncomingMessage, url: URL): HttpError | null {
  const site = req.headers['sec-fetch-site'];
  if (site === undefined || site === 'same-origin' || site === 'none') return null;
  const navigation = req.headers['sec-fetch-mode'] === 'navigate' && !isApiPath(url.pathname);
  return navigation
    ? null
    : new HttpError(403, `a ${site} ${req.headers['sec-fetch-dest'] ?? 'load'} of ${url.pathname} is refused`);
}

// ---- HTTP ----

function findRoute(method: string, pathname: string): { route: Route; raw: Partial<Record<string, string>> } {
  const allowed: string[] = [];
  try {
    for (const route of ROUTES) {
      const raw = matchPath(route.path, pathname);
      if (raw && route.method === method) return { route, raw };
      if (raw) allowed.push(route.method);
    }
    if (WEBSOCKET_ROUTES.some((ws) => matchPath(ws.path, pathname))) {
      if (method === 'GET') throw new HttpError(426, `${pathname} is a WebSocket: connect with Upgrade: websocket`);
      allowed.push('GET');
    }
  } catch (error) {
    if (error instanceof URIError) throw new HttpError(400, `path: malformed percent-encoding in ${pathname}`);
    throw error;
  }
  if (allowed.length === 0) throw new HttpError(404, `no such endpoint: ${method} ${pathname}`);
  const allow = allowed.join(', ');
  throw new HttpError(405, `${method} is not allowed on ${pathname} (allowed: ${allow})`, { allow });
}

function checked<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const result = parseInput(schema, value, where);
  if (!result.ok) throw new HttpError(400, result.message);
  return result.value;
}

function validParams(raw: Partial<Record<string, string>>): Params {
  for (const [name, value] of Object.entries(raw)) checked(Ref, value, name);
  return raw as Params;
}

/** The body, drained to its end even when too large, so the client is still listening for our 400. */
function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk);
      else if (size > MAX_DRAIN) req.destroy();
    });
    req.on('end', () => {
      if (size > MAX_BODY) reject(new HttpError(400, `body: larger than ${MAX_BODY >> 20} MiB`));
      else resolve(Buffer.concat(chunks));
    });
    req.on('error', reject);
    req.on('close', () => reject(new HttpError(400, 'body: the request ended early')));
  });
}

function parseJson(body: Buffer): unknown {
  if (body.length === 0) return {};
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new HttpError(400, `body: malformed JSON (${(error as Error).message})`);
  }
}

function send(res: http.ServerResponse, status: number, body: unknown, type: string, headers = {}): void {
  if (res.headersSent) return void res.end();
  const text = body === undefined ? '' : typeof body === 'string' && type !== JSON_TYPE ? body : JSON.stringify(body);
  const contentHeaders = status === 204 ? {} : { 'content-type': type, 'content-length': Buffer.byteLength(text) };
  res.writeHead(status, { ...contentHeaders, ...headers });
  res.end(status === 204 ? undefined : text);
}

/** Whether an If-None-Match header names `etag` (or is `*`); weak tags compare by their opaque part (RFC 9110). */
function matchesEtag(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((tag) => {
    const trimmed = tag.trim();
    return trimmed === '*' || trimmed.replace(/^W\//, '') === etag;
  });
}

/**
 * The episode list, as the engine keeps it serialized, with its ETag: a client that sends the ETag of the list it
 * has (If-None-Match) gets 304 and no body while nothing the list shows has changed (docs/engine.md).
 */
function sendEpisodes(listed: EpisodesBody, req: http.IncomingMessage, res: http.ServerResponse): void {
  const headers = { etag: listed.etag, 'cache-control': 'no-cache' };
  if (matchesEtag(req.headers['if-none-match'], listed.etag)) {
    res.writeHead(304, headers);
    return void res.end();
  }
  res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': listed.body.length, ...headers });
  res.end(listed.body);
}

const isApiPath = (pathname: string) => pathname === API_PREFIX || pathname.startsWith(`${API_PREFIX}/`);

/** A UI file (web mode). The page URL's `?token=` also sets the cookie that its scripts, styles and sockets send. */
function serveUi(root: string, caller: Caller, url: URL, req: http.IncomingMessage, res: http.ServerResponse) {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    throw new HttpError(405, `${req.method} is not allowed on ${url.pathname} (allowed: GET, HEAD)`, {
      allow: 'GET, HEAD',
    });
  }
  let found;
  try {
    found = resolveStatic(root, url.pathname);
  } catch (error) {
    if (error instanceof StaticFailure && error.page !== null) return sendFailurePage(req, res, error);
    if (error instanceof StaticFailure) throw new HttpError(error.status, error.message);
    throw error;
  }
  // Secure on an HTTPS listener: a browser sends a cookie to its host on any scheme and port, so without it a page
  // lured to http://the-same-host/ would hand the token over in clear text.
  const secure = (req.socket as TLSSocket).encrypted === true ? '; Secure' : '';
  const cookie = `${tokenCookie(req)}=${caller.token}; Path=/; HttpOnly; SameSite=Strict${secure}`;
  sendStatic(req, res, found, caller.token && url.searchParams.has('token') ? { 'set-cookie': cookie } : {});
}

/**
 * A guest file: GET streams it (application/octet-stream, its size as content-length for a regular file), PUT
 * writes the request body to it, any size, through the agent's flow control; the old file stays until all arrived.
 */
async function serveFile(api: EngineApi, vm: string, url: URL, req: http.IncomingMessage, res: http.ServerResponse) {
  const query = checked(FileQuery, Object.fromEntries([...url.searchParams].filter(([n]) => n !== 'token')), 'query');
  if (!query.path.startsWith('/')) throw new HttpError(400, `query.path: ${query.path} is not an absolute path`);
  if (req.method === 'GET') {
    const file = await api.readFile(vm, query.path);
    const length = file.size > 0 ? { 'content-length': file.size } : {};
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-file-mode': file.mode.toString(8), ...length });
    // A failed transfer or a client that left: the headers went out, so a cut connection is how it shows, and
    // pipeline destroys the guest file's stream (the agent is told to stop).
    await pipeline(Readable.from(file.stream), res).catch(() => res.destroy());
    return;
  }
  if (req.method === 'PUT') {
    const mode = query.mode === undefined ? undefined : parseInt(query.mode, 8);
    const written = await api.writeFile(vm, query.path, req, mode);
    return send(res, 200, written, JSON_TYPE);
  }
  throw new HttpError(405, `${req.method} is not allowed on ${url.pathname} (allowed: GET, PUT)`, {
    allow: 'GET, PUT',
  });
}

async function serve(
  api: EngineApi,
  gate: Gate | null,
  staticRoot: string | undefined,
  remotes: RemoteEngines | undefined,
  req: http.IncomingMessage,
  res: http.ServerResponse,
) {
  try {
    const url = new URL(req.url ?? '/', 'http://engine');
    const caller = authorize(gate, req, url);
    if (staticRoot && !isApiPath(url.pathname)) return serveUi(staticRoot, caller, url, req, res);
    checkScope(caller, req.method ?? 'GET', url.pathname);
    // Another engine's API, through this one (docs/remote.md, "The app with several engines"): the scope checked
    // above is the local caller's, whatever the remote token may do.
    const forwarded = remotes ? forwardedPath(url.pathname) : null;
    if (forwarded) return await remotes!.forward(forwarded.name, forwarded.rest, url.searchParams, req, res);
    const fileParams = matchPath(FILE_ROUTE.path, url.pathname);
    if (fileParams) return await serveFile(api, validParams(fileParams).vm, url, req, res);
    const { route, raw } = findRoute(req.method ?? 'GET', url.pathname);
    const params = validParams(raw);
    const query = Object.fromEntries([...url.searchParams].filter(([name]) => name !== 'token'));
    const validQuery = checked(route.query ?? Nothing, query, 'query');
    const body = checked(route.request ?? Nothing, parseJson(await readBody(req)), 'body');
    if (route.operation === 'listEpisodes' && api.episodesBody) return sendEpisodes(api.episodesBody(), req, res);
    const result = await route.handler(api, params, body, validQuery);
    const type = route.contentType === 'application/json' ? JSON_TYPE : route.contentType;
    send(res, route.status, route.response ? result : undefined, type);
  } catch (error) {
    // A path's bad percent-encoding (`/vms/%u0041/files`): the client's mistake, wherever it was decoded.
    const failure =
      error instanceof URIError
        ? new HttpError(400, `path: malformed percent-encoding in ${req.url}`)
        : asHttpError(error);
    const reason = failure.reason === undefined ? {} : { reason: failure.reason };
    const body = { error: { code: failure.status, message: failure.message, ...reason } };
    send(res, failure.status, body, JSON_TYPE, failure.headers);
  }
}

// ---- WebSocket upgrades ----

interface Upgrade {
  req: http.IncomingMessage;
  socket: Duplex;
  head: Buffer;
}

/** The open WebSockets of each named token, closed when it is revoked. */
type StreamsByToken = Map<string, Set<WebSocket>>;
/** The streams key of the serve token (SMOL_HOME/serve-token), a name no named token can have. */
const SERVE_TOKEN = '(serve-token)';

function upgrade(
  api: EngineApi,
  gate: Gate | null,
  wss: WebSocketServer,
  byToken: StreamsByToken,
  remotes: RemoteEngines | undefined,
  { req, socket, head }: Upgrade,
): void {
  socket.on('error', () => socket.destroy());
  let caller = LOCAL;
  const accept = (then: (ws: WebSocket) => void) =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('error', () => ws.terminate()); // a protocol error: the close that follows cleans up
      // Kept by token, so that revoking a named token or rotating the serve token closes what it opened.
      const name = caller.name ?? (caller.token !== null ? SERVE_TOKEN : null);
      if (name !== null) {
        const open = byToken.get(name) ?? new Set();
        byToken.set(name, open.add(ws));
        ws.on('close', () => open.delete(ws));
      }
      then(ws);
    });
  try {
    const url = new URL(req.url ?? '/', 'http://engine');
    caller = authorize(gate, req, url);
    const forwarded = remotes ? forwardedPath(url.pathname) : null;
    if (forwarded) return forwardUpgrade(remotes!, forwarded, caller, accept, { req, socket, head });
    if (matchPath(EVENTS, url.pathname)) return accept((ws) => streamEvents(api, ws));
    const execParams = matchPath(EXEC, url.pathname);
    const params = execParams ?? matchPath(CONSOLE, url.pathname);
    if (!params) throw new HttpError(404, `no WebSocket at ${url.pathname}`);
    if (execParams && caller.scope === 'read-only') {
      throw new HttpError(
        403,
        `the token ${caller.name} is read-only: running a command in a guest needs a full token`,
      );
    }
    const { vm } = validParams(params);
    api.getVm(vm); // an unknown VM is a 404 before upgrading
    const readOnly = caller.scope === 'read-only' ? `the token ${caller.name} is read-only` : null;
    accept((ws) => (execParams ? streamExec(api, vm, ws) : streamConsole(api, vm, ws, readOnly)));
  } catch (error) {
    const failure =
      error instanceof URIError ? new HttpError(400, 'path: malformed percent-encoding') : asHttpError(error);
    rejectUpgrade(socket, failure.status, failure.message);
  }
}

/** Another engine's WebSocket, through this one: the local caller's scope decides what may be done on it. */
function forwardUpgrade(
  remotes: RemoteEngines,
  forwarded: { name: string; rest: string },
  caller: Caller,
  accept: (then: (ws: WebSocket) => void) => void,
  { req, socket }: Upgrade,
): void {
  const inner = `${API_PREFIX}${forwarded.rest}`;
  const exec = matchPath(EXEC, inner) !== null;
  const isConsole = matchPath(CONSOLE, inner) !== null;
  if (!exec && !isConsole && !matchPath(EVENTS, inner)) throw new HttpError(404, `no WebSocket at ${req.url}`);
  if (exec && caller.scope === 'read-only') {
    throw new HttpError(403, `the token ${caller.name} is read-only: running a command in a guest needs a full token`);
  }
  let answered = false;
  remotes.forwardUpgrade(forwarded.name, forwarded.rest, {
    readOnly: isConsole && caller.scope === 'read-only' ? `the token ${caller.name} is read-only` : null,
    accept: (then) => {
      if (answered || socket.destroyed) return;
      answered = true;
      accept(then);
    },
    reject: (status, message) => {
      if (answered) return;
      answered = true;
      rejectUpgrade(socket, status, message);
    },
  });
}

// ---- listeners ----

/** Whether a server answers on the Unix socket `socketPath` (a stale file from a dead engine does not). */
function answers(socketPath: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const probe = http.request({ socketPath, path: '/', method: 'HEAD', timeout: 2000, agent: false }, (res) => {
      res.resume();
      resolve(true);
    });
    probe.on('timeout', () => probe.destroy(new Error(`${socketPath} accepts connections but does not answer`)));
    probe.on('error', (error: NodeJS.ErrnoException) =>
      ['ECONNREFUSED', 'ENOENT'].includes(error.code ?? '') ? resolve(false) : reject(error),
    );
    probe.end();
  });
}

/**
 * Listens on `socketPath` with mode 0600 and never a moment without it. Not through the umask: that is
 * process-wide, and a directory the VMM or libuv's thread pool created meanwhile would lose its x bit. Instead the
 * socket is bound in a fresh directory of mode 0700 (nobody else can reach it there), chmod-ed to 0600 right after
 * listen, and only then renamed into place. Returns the socket's inode, so close removes only our own socket.
 */
async function listenOnSocket(server: http.Server, socketPath: string): Promise<number> {
  const existing = lstatSync(socketPath, { throwIfNoEntry: false });
  if (existing && !existing.isSocket()) throw new Error(`${socketPath} exists and is not a socket`);
  if (existing && (await answers(socketPath))) throw new Error(`something already answers on ${socketPath}`);
  // Inside the socket's own directory (a sibling could be on another file system: SMOL_HOME as a mount point), with
  // a short name: a socket path has ~107 bytes. Not path.join, which would drop the trailing '/.'.
  const dir = mkdtempSync(`${path.dirname(socketPath)}${path.sep}.`);
  const bound = path.join(dir, 's');
  try {
    await listen(server, bound);
    chmodSync(bound, 0o600);
    renameSync(bound, socketPath); // replaces the stale file, if any
    return lstatSync(socketPath).ino;
  } catch (error) {
    server.close();
    throw error;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function listen(server: http.Server | https.Server, where: string | { host: string; port: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(where, () => {
      server.off('error', reject);
      // From now on an error is a failed accept (EMFILE): that connection is lost, the server keeps serving.
      server.on('error', () => {});
      resolve();
    });
  });
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}

/** Serves `api` on the Unix socket and, when asked, on TCP; resolves once both listen. */
export async function startApiServer(options: ApiServerOptions): Promise<ApiServer> {
  const { api, socketPath, tcp, staticRoot } = options;
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_BODY });
  const servers: http.Server[] = [];
  const byToken: StreamsByToken = new Map();
  const unsubscribeRevoked = options.tokens?.onRevoke((name) => {
    for (const ws of byToken.get(name) ?? []) ws.close(1008, `the token ${name} was revoked`);
    byToken.delete(name);
  });
  const open = (gate: Gate | null, tls?: { cert: string; key: string }) => {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) =>
      void serve(api, gate, staticRoot, options.remotes, req, res);
    const server = tls ? https.createServer({ ...tls, minVersion: 'TLSv1.2' }, handler) : http.createServer(handler);
    server.on('upgrade', (req, socket, head) =>
      upgrade(api, gate, wss, byToken, options.remotes, { req, socket, head }),
    );
    servers.push(server);
    return server;
  };
  const inode = await listenOnSocket(open(null), socketPath);
  let closing: Promise<void> | null = null;
  const close = async () => {
    for (const ws of wss.clients) ws.close(1001, 'the engine is stopping');
    // Whatever has not finished in a second (a viewer that does not answer the close) is cut off.
    const cutOff = setTimeout(() => {
      for (const ws of wss.clients) ws.terminate();
      for (const server of servers) server.closeAllConnections();
    }, 1000);
    await Promise.all(servers.map(closeServer));
    clearTimeout(cutOff);
    unsubscribeRevoked?.();
    wss.close();
    if (lstatSync(socketPath, { throwIfNoEntry: false })?.ino === inode) unlinkSync(socketPath);
  };
  const tcpServers = new Map<number, http.Server>();
  const gates = new Map<http.Server, Gate>();
  const addTcp = async (tcp: TcpOptions): Promise<TcpListener> => {
    const host = tcp.host.includes(':') ? `[${tcp.host}]` : tcp.host;
    const scheme = tcp.tls ? 'https' : 'http';
    const gate: Gate = { token: tcp.token, host, scheme, tokens: options.tokens ?? null };
    const listener = open(gate, tcp.tls);
    gates.set(listener, gate);
    try {
      await listen(listener, { host: tcp.host, port: tcp.port });
    } catch (error) {
      servers.splice(servers.indexOf(listener), 1);
      gates.delete(listener);
      throw error;
    }
    const { port } = listener.address() as AddressInfo;
    tcpServers.set(port, listener);
    return { url: `${scheme}://${host}:${port}/?token=${encodeURIComponent(tcp.token)}`, port };
  };
  const closeTcp = async (port: number): Promise<boolean> => {
    const listener = tcpServers.get(port);
    if (!listener) return false;
    tcpServers.delete(port);
    gates.delete(listener);
    servers.splice(servers.indexOf(listener), 1);
    const done = closeServer(listener);
    listener.closeAllConnections();
    await done;
    return true;
  };
  const setTcpToken = (token: string) => {
    for (const gate of gates.values()) gate.token = token;
    for (const ws of byToken.get(SERVE_TOKEN) ?? []) ws.close(1008, 'the serve token was rotated');
    byToken.delete(SERVE_TOKEN);
  };
  const server: ApiServer = { addTcp, closeTcp, setTcpToken, close: () => (closing ??= close()) };
  if (tcp) {
    try {
      server.url = (await addTcp(tcp)).url;
    } catch (error) {
      await server.close();
      throw error;
    }
  }
  return server;
}
