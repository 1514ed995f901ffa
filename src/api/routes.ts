// The HTTP API's route table (docs/engine.md, "API"): each route's method, path, schemas and the EngineApi call it
// makes. The server (engine/api-server.ts) matches and validates requests against it; openapi.ts documents it.
import { z } from 'zod';
import type { EngineApi } from './engine-api.js';
// A cycle (openapi.ts reads ROUTES), but neither module uses the other until a request or a call arrives.
import { openApiDocument } from './openapi.js';
import { smolfileExamples } from '../smolfile/smolfile-examples.js';
import * as s from './schema.js';
import { API_PREFIX } from './schema.js';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
/** The path parameters a pattern names (`:vm`); a handler reads only its own route's. */
export type Params = Readonly<Record<'episode' | 'vm' | 'snapshot', string>>;

export interface Route {
  method: Method;
  /** `/api/v1/vms/:vm/checkpoint`: `:name` is one path segment, an id, a unique prefix of one or a name. */
  path: string;
  /** The OpenAPI operationId. */
  operation: string;
  summary: string;
  status: 200 | 201 | 202 | 204;
  /** The JSON body; a route without one accepts no body (or `{}`). */
  request?: z.ZodType;
  query?: z.ZodObject;
  /** What a success carries (none for 202 and 204). */
  response?: z.ZodType;
  /** The response's media type (application/json unless said). */
  contentType: string;
  handler(api: EngineApi, params: Params, body: unknown, query: unknown): Promise<unknown>;
}

interface RouteSpec<B, Q> extends Omit<Route, 'status' | 'contentType' | 'request' | 'query' | 'handler'> {
  status?: Route['status'];
  contentType?: string;
  request?: z.ZodType<B>;
  query?: z.ZodObject & z.ZodType<Q>;
  handler(api: EngineApi, params: Params, body: B, query: Q): unknown;
}

function route<B = Record<string, never>, Q = Record<string, never>>(spec: RouteSpec<B, Q>): Route {
  return {
    ...spec,
    status: spec.status ?? 200,
    contentType: spec.contentType ?? 'application/json',
    // The server validated body and query with the spec's own schemas before calling.
    handler: async (api, params, body, query) => spec.handler(api, params, body as B, query as Q),
  };
}

const ForceQuery = z
  .object({ force: z.enum(['true', 'false']).optional().describe('true: also when VMs are running') })
  .strict();
const TailQuery = z
  .object({ tail: z.coerce.number().int().min(1).max(1_000_000).optional().describe('only the last N lines') })
  .strict();
/** The document openapi.ts makes (checked loosely: it is generated, not accepted). */
export const OpenApiDocument = z.looseObject({
  openapi: z.string(),
  info: z.looseObject({ title: z.string(), version: z.string() }),
  paths: z.record(z.string(), z.unknown()),
});

const episodes = `${API_PREFIX}/episodes`;
const vms = `${API_PREFIX}/vms`;
const snapshots = `${API_PREFIX}/snapshots`;

/** VM lifecycle calls: POST /vms/:vm/{verb} → the VM as it is afterwards. */
const lifecycle = (verb: 'stop' | 'start' | 'pause' | 'resume' | 'reset', summary: string) =>
  route({
    method: 'POST',
    path: `${vms}/:vm/${verb}`,
    operation: `${verb}Vm`,
    summary,
    response: s.Vm,
    handler: (api, p) => api[verb](p.vm),
  });

export const ROUTES: readonly Route[] = [
  route({
    method: 'GET',
    path: `${API_PREFIX}/health`,
    operation: 'health',
    summary: 'The engine’s version, pid, data dir and start time',
    response: s.Health,
    handler: (api) => api.health(),
  }),
  route({
    method: 'GET',
    path: `${API_PREFIX}/openapi.json`,
    operation: 'openapi',
    summary: 'This document',
    response: OpenApiDocument,
    handler: () => openApiDocument(),
  }),
  route({
    method: 'GET',
    path: episodes,
    operation: 'listEpisodes',
    summary: 'Every episode with its VMs',
    response: s.EpisodeList,
    handler: (api) => ({ episodes: api.listEpisodes() }),
  }),
  route({
    method: 'POST',
    path: episodes,
    operation: 'createEpisode',
    summary: 'Start an episode from a Smolfile (smol up); its first VM is running when this answers',
    status: 201,
    request: s.CreateEpisodeRequest,
    response: s.CreateEpisodeResponse,
    handler: (api, _p, body) => api.createEpisode(body),
  }),
  route({
    method: 'GET',
    path: `${API_PREFIX}/smolfiles`,
    operation: 'listSmolfileExamples',
    summary: 'The example Smolfiles that come with Smol Studio, with absolute paths for createEpisode',
    response: s.SmolfileExamples,
    handler: () => ({ examples: smolfileExamples() }),
  }),
  route({
    method: 'GET',
    path: `${episodes}/:episode`,
    operation: 'getEpisode',
    summary: 'One episode with its VMs',
    response: s.Episode,
    handler: (api, p) => api.getEpisode(p.episode),
  }),
  route({
    method: 'DELETE',
    path: `${episodes}/:episode`,
    operation: 'deleteEpisode',
    summary: 'Kill the episode’s VMs and delete it with its snapshots (running VMs only with force=true)',
    status: 204,
    query: ForceQuery,
    handler: (api, p, _b, q) => api.deleteEpisode(p.episode, q.force === 'true'),
  }),
  route({
    method: 'GET',
    path: `${episodes}/:episode/snapshots`,
    operation: 'listSnapshots',
    summary: 'The episode’s snapshots in creation order (the timeline); parent links make the tree',
    response: s.SnapshotList,
    handler: (api, p) => ({ snapshots: api.listSnapshots(p.episode) }),
  }),
  route({
    method: 'GET',
    path: vms,
    operation: 'listVms',
    summary: 'Every VM of every episode',
    response: s.VmList,
    handler: (api) => ({ vms: api.listVms() }),
  }),
  route({
    method: 'GET',
    path: `${vms}/:vm`,
    operation: 'getVm',
    summary: 'One VM',
    response: s.Vm,
    handler: (api, p) => api.getVm(p.vm),
  }),
  route({
    method: 'DELETE',
    path: `${vms}/:vm`,
    operation: 'removeVm',
    summary: 'Kill the VM and forget it; its snapshots stay (a running VM only with force=true)',
    status: 204,
    query: ForceQuery,
    handler: (api, p, _b, q) => api.removeVm(p.vm, q.force === 'true'),
  }),
  route({
    method: 'POST',
    path: `${vms}/:vm/checkpoint`,
    operation: 'checkpoint',
    summary: 'Snapshot the VM; its place in the tree moves to the new snapshot',
    status: 201,
    request: s.CheckpointRequest,
    response: s.Snapshot,
    handler: (api, p, body) => api.checkpoint(p.vm, body),
  }),
  route({
    method: 'POST',
    path: `${vms}/:vm/fork`,
    operation: 'forkVm',
    summary: 'count new VMs that start exactly where this one is (it keeps running)',
    status: 201,
    request: s.ForkRequest,
    response: s.ForkResponse,
    handler: (api, p, body) => api.forkVm(p.vm, body.count),
  }),
  route({
    method: 'POST',
    path: `${vms}/:vm/restore`,
    operation: 'restore',
    summary: 'Move the VM to a snapshot, checkpointing where it was first (savedAs)',
    request: s.RestoreRequest,
    response: s.RestoreResponse,
    handler: (api, p, body) => api.restore(p.vm, body.snapshot),
  }),
  lifecycle('stop', 'Suspend the VM to a snapshot and end its process (start restores it)'),
  lifecycle('start', 'Restore a suspended VM'),
  lifecycle('pause', 'Pause the VM’s vCPUs'),
  lifecycle('resume', 'Resume a paused VM'),
  lifecycle('reset', 'Kill the VM and restore the base snapshot: a clean machine'),
  route({
    method: 'GET',
    path: `${vms}/:vm/memory`,
    operation: 'memoryStats',
    summary: 'The VM’s guest memory: resident, private and shared bytes',
    response: s.MemoryStats,
    handler: (api, p) => api.memoryStats(p.vm),
  }),
  route({
    method: 'GET',
    path: `${vms}/:vm/metrics`,
    operation: 'metrics',
    summary: 'The VM’s CPU and memory over the last few minutes, one sample every intervalMs',
    response: s.MetricsHistory,
    handler: (api, p) => api.metrics(p.vm),
  }),
  route({
    method: 'GET',
    path: `${vms}/:vm/logs`,
    operation: 'logs',
    summary: 'Recent console output (the last 1 MiB), or its last N lines',
    query: TailQuery,
    response: s.Logs,
    handler: (api, p, _b, q) => api.logs(p.vm, q.tail),
  }),
  route({
    method: 'GET',
    path: `${vms}/:vm/screen`,
    operation: 'screen',
    summary: 'The console’s screen as text and serialized',
    response: s.Screen,
    handler: (api, p) => api.screen(p.vm),
  }),
  route({
    method: 'GET',
    path: `${vms}/:vm/recording`,
    operation: 'recording',
    summary: 'The console recording (asciicast v2), with markers for checkpoints, forks and restores',
    response: z.string(),
    contentType: 'application/x-asciicast',
    handler: (api, p) => api.recording(p.vm),
  }),
  route({
    method: 'POST',
    path: `${vms}/:vm/console`,
    operation: 'writeConsole',
    summary: 'Type text into the VM’s console',
    status: 204,
    request: s.ConsoleInputRequest,
    handler: (api, p, body) => api.writeConsole(p.vm, body.data),
  }),
  route({
    method: 'POST',
    path: `${vms}/:vm/exec`,
    operation: 'exec',
    summary:
      'Run a command in the guest through its agent and wait for it: exit status and collected output (the exec ' +
      'WebSocket streams instead)',
    request: s.ExecRequest,
    response: s.ExecResult,
    handler: (api, p, body) => api.exec(p.vm, body),
  }),
  route({
    method: 'GET',
    path: `${snapshots}/:snapshot`,
    operation: 'getSnapshot',
    summary: 'One snapshot',
    response: s.Snapshot,
    handler: (api, p) => api.getSnapshot(p.snapshot),
  }),
  route({
    method: 'PATCH',
    path: `${snapshots}/:snapshot`,
    operation: 'updateSnapshot',
    summary: 'Rename a snapshot or change its note',
    request: s.UpdateSnapshotRequest,
    response: s.Snapshot,
    handler: (api, p, body) => api.updateSnapshot(p.snapshot, body),
  }),
  route({
    method: 'DELETE',
    path: `${snapshots}/:snapshot`,
    operation: 'deleteSnapshot',
    summary: 'Delete a snapshot (its layer stays while a living snapshot or VM needs it)',
    status: 204,
    handler: (api, p) => api.deleteSnapshot(p.snapshot),
  }),
  route({
    method: 'POST',
    path: `${snapshots}/:snapshot/fork`,
    operation: 'forkSnapshot',
    summary: 'count new VMs restored from the snapshot',
    status: 201,
    request: s.ForkRequest,
    response: s.ForkResponse,
    handler: (api, p, body) => api.forkSnapshot(p.snapshot, body.count),
  }),
  route({
    method: 'POST',
    path: `${API_PREFIX}/gc`,
    operation: 'gc',
    summary: 'Remove the files of deleted snapshots nothing needs',
    response: s.GcResult,
    handler: (api) => api.gc(),
  }),
  route({
    method: 'POST',
    path: `${API_PREFIX}/engine/listeners`,
    operation: 'listen',
    summary: 'Open a TCP listener that needs a new random token (smol serve); its URL carries the token',
    status: 201,
    request: s.ListenRequest,
    response: s.Listener,
    handler: (api, _p, body) => api.listen(body),
  }),
  route({
    method: 'DELETE',
    path: `${API_PREFIX}/engine/listeners`,
    operation: 'unlisten',
    summary: 'Close the TCP listener on a port',
    status: 204,
    query: z.object({ port: z.coerce.number().int().min(1).max(65535) }).strict(),
    handler: (api, _p, _b, query) => api.unlisten(query.port),
  }),
  route({
    method: 'POST',
    path: `${API_PREFIX}/engine/shutdown`,
    operation: 'shutdown',
    summary: 'Suspend every running VM and end the engine (the next engine resumes them)',
    status: 202,
    handler: (api) => api.shutdown(),
  }),
];

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
      'messages are stdin, {"type":"eof"} ends it, {"type":"signal","signal":"SIGINT"} signals the process.',
  },
] as const;

/** GET streams a guest file (application/octet-stream); PUT writes the request body to it (docs/engine.md). */
export const FILE_ROUTE = { path: `${vms}/:vm/files`, operation: 'files' } as const;

/** The pattern's parameters when `pathname` matches it, else null. */
export function matchPath(pattern: string, pathname: string): Partial<Record<string, string>> | null {
  const want = pattern.split('/');
  const got = pathname.split('/');
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const [w, g] = [want[i]!, got[i]!];
    if (w.startsWith(':') && g !== '') params[w.slice(1)] = decodeURIComponent(g);
    else if (w !== g) return null;
  }
  return params;
}
