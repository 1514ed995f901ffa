// The HTTP API's route table (docs/engine.md, "API"): each operation of operations.ts with the EngineApi call it
// makes. The server (engine/api-server.ts) matches and validates requests against it; openapi.ts documents it.
import type { z } from 'zod';
import type { EngineApi } from './engine-api.js';
// A cycle (openapi.ts reads ROUTES), but neither module uses the other until a request or a call arrives.
import { openApiDocument } from './openapi.js';
import { hostReport } from '../doctor/linux-guests.js';
import { smolfileExamples } from '../smolfile/smolfile-examples.js';
import { checkSmolfileText } from '../smolfile/smolfile-text.js';
import { imageOperations } from './image-routes.js';
import {
  OPERATIONS,
  type OperationName,
  type OperationSpec,
  type Operations,
  type PathParamsOf,
  type ResponseOf,
} from './operations.js';
import { API_PREFIX } from './schema.js';

export type { Method } from './operations.js';
export { OpenApiDocument } from './operations.js';
/** The path parameters a pattern names (`:vm`); a handler reads only its own route's. */
export type Params = Readonly<Record<'episode' | 'vm' | 'snapshot', string>>;

export interface Route extends OperationSpec {
  /** The OpenAPI operationId. */
  operation: OperationName;
  handler(api: EngineApi, params: Params, body: unknown, query: unknown): Promise<unknown>;
}

type Parsed<O extends OperationName, K extends string> = Operations[O] extends { [key in K]: infer Z extends z.ZodType }
  ? z.output<Z>
  : Record<string, never>;

/**
 * What the engine does for each operation: the server has validated body and query with the operation's schemas;
 * the result must be the operation's response, so changing one without the other fails to compile.
 */
type Handlers = {
  [O in OperationName]: (
    api: EngineApi,
    params: PathParamsOf<O>,
    body: Parsed<O, 'request'>,
    query: Parsed<O, 'query'>,
  ) => undefined extends ResponseOf<O> ? unknown : ResponseOf<O> | Promise<ResponseOf<O>>;
};

const HANDLERS: Handlers = {
  health: (api) => api.health(),
  openapi: () => openApiDocument() as ResponseOf<'openapi'>,
  listEpisodes: (api) => ({ episodes: api.listEpisodes() }),
  createEpisode: (api, _p, body) => api.createEpisode(body),
  hostReport: () => hostReport(),
  listSmolfileExamples: () => ({ examples: smolfileExamples() }),
  checkSmolfile: (_api, _p, body) => checkSmolfileText(body),
  listImages: async (api) => ({ images: await imageOperations(api).list() }),
  pullImage: (api, _p, body) => imageOperations(api).pull(body),
  removeImage: (api, _p, _b, q) => imageOperations(api).remove(q.reference, q.force === 'true'),
  pruneImages: (api, _p, _b, q) => imageOperations(api).prune(q.dryRun === 'true'),
  getEpisode: (api, p) => api.getEpisode(p.episode),
  deleteEpisode: (api, p, _b, q) => api.deleteEpisode(p.episode, q.force === 'true'),
  listSnapshots: (api, p) => ({ snapshots: api.listSnapshots(p.episode) }),
  listVms: (api) => ({ vms: api.listVms() }),
  getVm: (api, p) => api.getVm(p.vm),
  updateVm: (api, p, body) => api.updateVm(p.vm, body),
  removeVm: (api, p, _b, q) => api.removeVm(p.vm, q.force === 'true'),
  checkpoint: (api, p, body) => api.checkpoint(p.vm, body),
  forkVm: (api, p, body) => api.forkVm(p.vm, body.count),
  restore: (api, p, body) => api.restore(p.vm, body.snapshot),
  stopVm: (api, p) => api.stop(p.vm),
  startVm: (api, p) => api.start(p.vm),
  pauseVm: (api, p) => api.pause(p.vm),
  resumeVm: (api, p) => api.resume(p.vm),
  resetVm: (api, p) => api.reset(p.vm),
  memoryStats: (api, p) => api.memoryStats(p.vm),
  metrics: (api, p) => api.metrics(p.vm),
  network: (api, p, _b, q) => api.network(p.vm, q.after),
  logs: (api, p, _b, q) => api.logs(p.vm, q.tail),
  screen: (api, p) => api.screen(p.vm),
  recording: (api, p) => api.recording(p.vm),
  writeConsole: (api, p, body) => api.writeConsole(p.vm, body.data),
  exec: (api, p, body) => api.exec(p.vm, body),
  getSnapshot: (api, p) => api.getSnapshot(p.snapshot),
  updateSnapshot: (api, p, body) => api.updateSnapshot(p.snapshot, body),
  deleteSnapshot: (api, p) => api.deleteSnapshot(p.snapshot),
  forkSnapshot: (api, p, body) => api.forkSnapshot(p.snapshot, body.count),
  packMachine: (api, _p, body) => api.packMachine(body),
  openMachine: (api, _p, body) => api.openMachine(body),
  inspectMachine: (api, _p, body) => api.inspectMachine(body),
  diff: (api, _p, _b, query) => api.diff(query),
  gc: (api) => api.gc(),
  listen: (api, _p, body) => api.listen(body),
  unlisten: (api, _p, _b, query) => api.unlisten(query.port),
  listTokens: (api) => ({ tokens: api.listTokens() }),
  createToken: (api, _p, body) => api.createToken(body),
  removeToken: (api, p) => api.removeToken(p.token),
  listEngines: (api) => ({ engines: api.listEngines() }),
  probeEngine: (api, _p, body) => api.probeEngine(body.url),
  addEngine: (api, _p, body) => api.addEngine(body),
  removeEngine: (api, p) => api.removeEngine(p.engine),
  shutdown: (api, _p, _b, query) => api.shutdown({ force: query.force === 'true' }),
};

export const ROUTES: readonly Route[] = (Object.keys(OPERATIONS) as OperationName[]).map((operation) => {
  const handler = HANDLERS[operation] as (api: EngineApi, params: Params, body: unknown, query: unknown) => unknown;
  return {
    ...OPERATIONS[operation],
    operation,
    handler: async (api, params, body, query) => handler(api, params, body, query),
  };
});

const vms = `${API_PREFIX}/vms`;

/** The WebSocket endpoints: GET with `Upgrade: websocket`. */
export const WEBSOCKET_ROUTES = [
  {
    path: `${API_PREFIX}/events`,
    operation: 'events',
    summary: 'Every engine event from now on, one JSON EngineEvent per text message',
  },
  {
    path: `${vms}/:vm/console`,
    operation: 'console',
    summary:
      'The live console: first a text message {"type":"screen","data","reason":"attach"}, then output as binary ' +
      'messages ({"type":"screen","reason":"resync"} again after falling 4 MiB behind), and {"type":"closed",' +
      '"reason"} when the VM ends. Binary or text messages from the client are typed into the console.',
  },
  {
    path: `${vms}/:vm/exec`,
    operation: 'execStream',
    summary:
      'A command in the guest, streamed: the client sends an ExecRequest (without stdin) as its first text message; ' +
      'the server answers {"type":"started"}, then output as binary messages whose first byte is 1 (stdout) or 2 ' +
      '(stderr), and {"type":"exit","exitCode","signal","timedOut"} before it closes. From the client: binary ' +
      'messages are stdin, {"type":"eof"} ends it, {"type":"signal","signal":"SIGINT"} signals the process. With ' +
      '"tty" {"rows","cols"} in the request it is a terminal session: all output is tagged 1, stdin is always taken ' +
      '(Ctrl-C is the byte 0x03), {"type":"resize","rows","cols"} resizes the terminal.',
  },
] as const;

/** GET streams a guest file (application/octet-stream); PUT writes the request body to it (docs/engine.md). */
export const FILE_ROUTE = { path: `${vms}/:vm/files`, operation: 'files' } as const;

/** The pattern's parameters when `pathname` matches it, else null; throws URIError for a matching path whose
 * parameter has bad percent-encoding. */
export function matchPath(pattern: string, pathname: string): Partial<Record<string, string>> | null {
  const want = pattern.split('/');
  const got = pathname.split('/');
  if (want.length !== got.length) return null;
  // Every fixed segment first: a parameter is decoded only for the pattern that matches (decoding throws URIError
  // on bad percent-encoding, which must not escape from a pattern the path was never meant for).
  for (let i = 0; i < want.length; i++) {
    const [w, g] = [want[i]!, got[i]!];
    if (w.startsWith(':') ? g === '' : w !== g) return null;
  }
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++)
    if (want[i]!.startsWith(':')) params[want[i]!.slice(1)] = decodeURIComponent(got[i]!);
  return params;
}
