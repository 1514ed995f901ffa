// The API's operations (docs/engine.md, "API"): each one's method, path, status and schemas, keyed by its OpenAPI
// operationId. Browser-safe (zod and the schema only), so every client — the SDK, the CLI and the renderer — calls
// operations by name and gets its types from here: renaming an operation, changing its path parameters or its
// response fails to compile where it is called. routes.ts adds the engine's handler for each; openapi.ts documents
// them.
import { z } from 'zod';
import * as s from './schema.js';
import * as m from './machine-schema.js';
import * as d from './diff-schema.js';
import * as sf from './smolfile-schema.js';
import { API_PREFIX } from './schema.js';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

export interface OperationSpec {
  method: Method;
  /** `/api/v1/vms/:vm/checkpoint`: `:name` is one path segment, an id, a unique prefix of one or a name. */
  path: string;
  summary: string;
  status: 200 | 201 | 202 | 204;
  /** The JSON body; an operation without one accepts no body (or `{}`). */
  request?: z.ZodType;
  query?: z.ZodObject;
  /** What a success carries (none for 202 and 204). */
  response?: z.ZodType;
  /** The response's media type (application/json unless said). */
  contentType: string;
}

type Spec = Omit<OperationSpec, 'status' | 'contentType'> & Partial<Pick<OperationSpec, 'status' | 'contentType'>>;

/** An operation with its defaults filled in; its literal path and exact schemas stay in its type. */
function operation<const T extends Spec>(spec: T): T & Pick<OperationSpec, 'status' | 'contentType'> {
  return { status: 200, contentType: 'application/json', ...spec };
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

const episodes = `${API_PREFIX}/episodes` as const;
const vms = `${API_PREFIX}/vms` as const;
const snapshots = `${API_PREFIX}/snapshots` as const;

/** Every HTTP operation, in the order the server tries them and the OpenAPI document lists them. */
export const OPERATIONS = {
  health: operation({
    method: 'GET',
    path: `${API_PREFIX}/health`,
    summary: 'The engine’s version, pid, data dir and start time',
    response: s.Health,
  }),
  openapi: operation({
    method: 'GET',
    path: `${API_PREFIX}/openapi.json`,
    summary: 'This document',
    response: OpenApiDocument,
  }),
  listEpisodes: operation({
    method: 'GET',
    path: episodes,
    summary: 'Every episode with its VMs',
    response: s.EpisodeList,
  }),
  createEpisode: operation({
    method: 'POST',
    path: episodes,
    summary: 'Start an episode from a Smolfile (smol up); its first VM is running when this answers',
    status: 201,
    request: s.CreateEpisodeRequest,
    response: s.CreateEpisodeResponse,
  }),
  hostReport: operation({
    method: 'GET',
    path: `${API_PREFIX}/host`,
    summary: 'What this host’s KVM is and whether Linux guests run on it (smol doctor’s verdict)',
    response: s.HostReport,
  }),
  listSmolfileExamples: operation({
    method: 'GET',
    path: `${API_PREFIX}/smolfiles`,
    summary: 'The example Smolfiles that come with Smol Studio, with absolute paths for createEpisode',
    response: s.SmolfileExamples,
  }),
  checkSmolfile: operation({
    method: 'POST',
    path: `${API_PREFIX}/smolfiles/check`,
    summary:
      'Check a Smolfile given as text (smol validate for text): its errors and warnings, each at its line and ' +
      'column; relative paths start from directory, and without one they are errors',
    request: sf.CheckSmolfileRequest,
    response: sf.CheckSmolfileResponse,
  }),
  listImages: operation({
    method: 'GET',
    path: `${API_PREFIX}/images`,
    summary: 'The root disk images in the guest cache: Debian images and pulled OCI images (smol image ls)',
    response: s.ImageList,
  }),
  pullImage: operation({
    method: 'POST',
    path: `${API_PREFIX}/images`,
    summary: 'Pull an OCI image (a registry reference or a local one) and make it a root disk (smol image pull)',
    status: 201,
    request: s.PullImageRequest,
    response: s.PulledImage,
  }),
  removeImage: operation({
    method: 'DELETE',
    path: `${API_PREFIX}/images`,
    summary: 'Forget a pulled reference; an image no reference names leaves the cache (smol image rm)',
    query: z
      .object({
        reference: z.string().min(1).max(4096).describe('the reference, or an image name oci-<hash>'),
        force: z
          .enum(['true', 'false'])
          .optional()
          .describe('true: also when snapshots need it (their copy stays until prune finds it unused)'),
      })
      .strict(),
    response: s.RemovedImages,
  }),
  pruneImages: operation({
    method: 'POST',
    path: `${API_PREFIX}/images/prune`,
    summary: 'Remove every image no snapshot or VM sits on, and the layers no image needs (smol image prune)',
    query: z
      .object({
        dryRun: z.enum(['true', 'false']).optional().describe('true: say what it would remove, remove nothing'),
      })
      .strict(),
    response: s.RemovedImages,
  }),
  getEpisode: operation({
    method: 'GET',
    path: `${episodes}/:episode`,
    summary: 'One episode with its VMs',
    response: s.Episode,
  }),
  deleteEpisode: operation({
    method: 'DELETE',
    path: `${episodes}/:episode`,
    summary: 'Kill the episode’s VMs and delete it with its snapshots (running VMs only with force=true)',
    status: 204,
    query: ForceQuery,
  }),
  listSnapshots: operation({
    method: 'GET',
    path: `${episodes}/:episode/snapshots`,
    summary: 'The episode’s snapshots in creation order (the timeline); parent links make the tree',
    response: s.SnapshotList,
  }),
  listVms: operation({
    method: 'GET',
    path: vms,
    summary: 'Every VM of every episode',
    response: s.VmList,
  }),
  getVm: operation({
    method: 'GET',
    path: `${vms}/:vm`,
    summary: 'One VM',
    response: s.Vm,
  }),
  updateVm: operation({
    method: 'PATCH',
    path: `${vms}/:vm`,
    summary: 'Set or remove a VM’s labels (docs/labels.md)',
    request: s.UpdateVmRequest,
    response: s.Vm,
  }),
  removeVm: operation({
    method: 'DELETE',
    path: `${vms}/:vm`,
    summary: 'Kill the VM and forget it; its snapshots stay (a running VM only with force=true)',
    status: 204,
    query: ForceQuery,
  }),
  checkpoint: operation({
    method: 'POST',
    path: `${vms}/:vm/checkpoint`,
    summary: 'Snapshot the VM; its place in the tree moves to the new snapshot',
    status: 201,
    request: s.CheckpointRequest,
    response: s.Snapshot,
  }),
  forkVm: operation({
    method: 'POST',
    path: `${vms}/:vm/fork`,
    summary: 'count new VMs that start exactly where this one is (it keeps running)',
    status: 201,
    request: s.ForkRequest,
    response: s.ForkResponse,
  }),
  restore: operation({
    method: 'POST',
    path: `${vms}/:vm/restore`,
    summary: 'Move the VM to a snapshot, checkpointing where it was first (savedAs)',
    request: s.RestoreRequest,
    response: s.RestoreResponse,
  }),
  stopVm: operation({
    method: 'POST',
    path: `${vms}/:vm/stop`,
    summary: 'Suspend the VM to a snapshot and end its process (start restores it)',
    response: s.Vm,
  }),
  startVm: operation({
    method: 'POST',
    path: `${vms}/:vm/start`,
    summary: 'Restore a suspended VM',
    response: s.Vm,
  }),
  pauseVm: operation({
    method: 'POST',
    path: `${vms}/:vm/pause`,
    summary: 'Pause the VM’s vCPUs',
    response: s.Vm,
  }),
  resumeVm: operation({
    method: 'POST',
    path: `${vms}/:vm/resume`,
    summary: 'Resume a paused VM',
    response: s.Vm,
  }),
  resetVm: operation({
    method: 'POST',
    path: `${vms}/:vm/reset`,
    summary: 'Kill the VM and restore the base snapshot: a clean machine',
    response: s.Vm,
  }),
  memoryStats: operation({
    method: 'GET',
    path: `${vms}/:vm/memory`,
    summary: 'The VM’s guest memory: resident, private and shared bytes',
    response: s.MemoryStats,
  }),
  metrics: operation({
    method: 'GET',
    path: `${vms}/:vm/metrics`,
    summary: 'The VM’s CPU and memory over the last few minutes, one sample every intervalMs',
    response: s.MetricsHistory,
  }),
  network: operation({
    method: 'GET',
    path: `${vms}/:vm/network`,
    summary: 'The VM’s network: its forwarded ports, refusal counters and recent refusals (after: only newer ones)',
    query: z
      .object({
        after: z.coerce.number().int().min(0).optional().describe('only refusals with a larger seq'),
      })
      .strict(),
    response: s.VmNetwork,
  }),
  logs: operation({
    method: 'GET',
    path: `${vms}/:vm/logs`,
    summary: 'Recent console output (the last 1 MiB), or its last N lines',
    query: TailQuery,
    response: s.Logs,
  }),
  screen: operation({
    method: 'GET',
    path: `${vms}/:vm/screen`,
    summary: 'The console’s screen as text and serialized',
    response: s.Screen,
  }),
  recording: operation({
    method: 'GET',
    path: `${vms}/:vm/recording`,
    summary: 'The console recording (asciicast v2), with markers for checkpoints, forks and restores',
    response: z.string(),
    contentType: 'application/x-asciicast',
  }),
  writeConsole: operation({
    method: 'POST',
    path: `${vms}/:vm/console`,
    summary: 'Type text into the VM’s console',
    status: 204,
    request: s.ConsoleInputRequest,
  }),
  exec: operation({
    method: 'POST',
    path: `${vms}/:vm/exec`,
    summary:
      'Run a command in the guest through its agent and wait for it: exit status and collected output (the exec ' +
      'WebSocket streams instead)',
    request: s.ExecRequest,
    response: s.ExecResult,
  }),
  getSnapshot: operation({
    method: 'GET',
    path: `${snapshots}/:snapshot`,
    summary: 'One snapshot',
    response: s.Snapshot,
  }),
  updateSnapshot: operation({
    method: 'PATCH',
    path: `${snapshots}/:snapshot`,
    summary: 'Rename a snapshot, change its note, or set or remove its labels',
    request: s.UpdateSnapshotRequest,
    response: s.Snapshot,
  }),
  deleteSnapshot: operation({
    method: 'DELETE',
    path: `${snapshots}/:snapshot`,
    summary: 'Delete a snapshot (its layer stays while a living snapshot or VM needs it)',
    status: 204,
  }),
  forkSnapshot: operation({
    method: 'POST',
    path: `${snapshots}/:snapshot/fork`,
    summary: 'count new VMs restored from the snapshot',
    status: 201,
    request: s.ForkRequest,
    response: s.ForkResponse,
  }),
  packMachine: operation({
    method: 'POST',
    path: `${API_PREFIX}/machines/pack`,
    summary: 'Pack a VM (checkpointed first when running) or a snapshot into a .smolmachine file (smol pack)',
    request: m.PackMachineRequest,
    response: m.PackMachineResponse,
  }),
  inspectMachine: operation({
    method: 'POST',
    path: `${API_PREFIX}/machines/inspect`,
    summary:
      'What a .smolmachine file holds (smol inspect), checked, and the CPU features this host lacks; writes nothing',
    request: m.InspectMachineRequest,
    response: m.InspectMachineResponse,
  }),
  openMachine: operation({
    method: 'POST',
    path: `${API_PREFIX}/machines`,
    summary: 'Start an episode from a .smolmachine file (smol up --from); its first VM runs the packed state',
    status: 201,
    request: m.OpenMachineRequest,
    response: s.CreateEpisodeResponse,
  }),
  diff: operation({
    method: 'GET',
    path: `${API_PREFIX}/diff`,
    summary:
      'What changed between two snapshots of an episode: files added, removed and changed on each disk (with text ' +
      'diffs under a size cap) and the console output between them (smol diff; docs/diff.md)',
    query: d.DiffQuery,
    response: d.DiffResponse,
  }),
  gc: operation({
    method: 'POST',
    path: `${API_PREFIX}/gc`,
    summary: 'Remove the files of deleted snapshots nothing needs',
    response: s.GcResult,
  }),
  listen: operation({
    method: 'POST',
    path: `${API_PREFIX}/engine/listeners`,
    summary: 'Open a TCP listener that needs a new random token (smol serve); its URL carries the token',
    status: 201,
    request: s.ListenRequest,
    response: s.Listener,
  }),
  unlisten: operation({
    method: 'DELETE',
    path: `${API_PREFIX}/engine/listeners`,
    summary: 'Close the TCP listener on a port',
    status: 204,
    query: z.object({ port: z.coerce.number().int().min(1).max(65535) }).strict(),
  }),
  listTokens: operation({
    method: 'GET',
    path: `${API_PREFIX}/tokens`,
    summary: 'The named tokens of the data dir (smol token ls); a full token only',
    response: s.TokenList,
  }),
  createToken: operation({
    method: 'POST',
    path: `${API_PREFIX}/tokens`,
    summary: 'A new named token, answered once (smol token create); a full token only',
    status: 201,
    request: s.CreateTokenRequest,
    response: s.CreatedToken,
  }),
  removeToken: operation({
    method: 'DELETE',
    path: `${API_PREFIX}/tokens/:token`,
    summary: 'Revoke a named token at once, closing its open streams (smol token rm); a full token only',
    status: 204,
  }),
  listEngines: operation({
    method: 'GET',
    path: `${API_PREFIX}/engines`,
    summary:
      'The remote engines this engine reaches for the app (its engines file, as smol engine add writes it), ' +
      'without their tokens; /engines/NAME/… forwards to one (docs/remote.md, "The app with several engines")',
    response: s.RemoteEngineList,
  }),
  probeEngine: operation({
    method: 'POST',
    path: `${API_PREFIX}/engines/probe`,
    summary: 'The certificate an engine presents (TLS handshake only, no token sent), to be confirmed before adding it',
    request: s.ProbeEngineRequest,
    response: s.EngineProbe,
  }),
  addEngine: operation({
    method: 'POST',
    path: `${API_PREFIX}/engines`,
    summary:
      'Add a remote engine: its certificate pinned (the fingerprint given, else on first use) and its token ' +
      'checked against its health; a full token only',
    status: 201,
    request: s.AddEngineRequest,
    response: s.AddedEngine,
  }),
  removeEngine: operation({
    method: 'DELETE',
    path: `${API_PREFIX}/engines/:engine`,
    summary: 'Forget a remote engine (and its pin, unless another name reaches that address); a full token only',
    status: 204,
  }),
  shutdown: operation({
    method: 'POST',
    path: `${API_PREFIX}/engine/shutdown`,
    summary:
      'Suspend every running VM and end the engine (the next engine resumes them). When a VM cannot be suspended ' +
      '(no space left for its snapshot) the engine keeps running with it and answers why; force=true ends the engine ' +
      'anyway and those VMs are lost',
    status: 202,
    query: ForceQuery,
  }),
} as const satisfies Record<string, OperationSpec>;

export type Operations = typeof OPERATIONS;
export type OperationName = keyof Operations;

/** The names a path pattern takes (`/api/v1/vms/:vm/fork` → 'vm'). */
type ParamNames<P extends string> = P extends `${string}:${infer Name}/${infer Rest}`
  ? Name | ParamNames<`/${Rest}`>
  : P extends `${string}:${infer Name}`
    ? Name
    : never;
type Field<Op, K extends string> = Op extends { [key in K]: infer Z extends z.ZodType } ? Z : never;

export type PathParamsOf<O extends OperationName> = Record<ParamNames<Operations[O]['path']>, string>;
/** The body a client sends (the schema's input: defaults may be left out). */
export type RequestOf<O extends OperationName> = z.input<Field<Operations[O], 'request'>>;
export type QueryOf<O extends OperationName> = z.input<Field<Operations[O], 'query'>>;
/** What a success carries; undefined for an operation without a response body. */
export type ResponseOf<O extends OperationName> = [Field<Operations[O], 'response'>] extends [never]
  ? undefined
  : z.output<Field<Operations[O], 'response'>>;

/** What a call passes: path parameters, body and query, each only where the operation has it. */
export type CallInput<O extends OperationName> = ([ParamNames<Operations[O]['path']>] extends [never]
  ? { params?: never }
  : { params: PathParamsOf<O> }) &
  ([Field<Operations[O], 'request'>] extends [never] ? { body?: never } : { body: RequestOf<O> }) &
  ([Field<Operations[O], 'query'>] extends [never] ? { query?: never } : { query?: QueryOf<O> });

/** The arguments after the name: the input, optional where an operation needs none. */
export type CallArgs<O extends OperationName> =
  Record<string, never> extends CallInput<O> ? [input?: CallInput<O>] : [input: CallInput<O>];

/** The method and the path with its parameters and query filled in (`/api/v1/vms/vm-1/logs?tail=5`). */
export function operationRequest<O extends OperationName>(
  name: O,
  input: { params?: Record<string, string>; body?: unknown; query?: Record<string, unknown> } = {},
): { method: Method; path: string; body: unknown } {
  const op: OperationSpec = OPERATIONS[name];
  const path = op.path.replace(/:(\w+)/g, (_, param: string) => {
    const value = input.params?.[param];
    if (value === undefined || value === '') throw new TypeError(`${name}: the path parameter ${param} is missing`);
    return encodeURIComponent(value);
  });
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(input.query ?? {})) if (value !== undefined) query.set(key, String(value));
  const search = query.size > 0 ? `?${query}` : '';
  return { method: op.method, path: `${path}${search}`, body: input.body };
}
