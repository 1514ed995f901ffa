// The engine's records of episodes and their VMs: what is persisted in SMOL_HOME/episodes/, how commands name them
// (id, unique id prefix, or name), and the API's view of them (docs/engine.md, "Episodes and VMs").
import { z } from 'zod';
import { ApiFailure } from '../api/engine-api.js';
import { AgentState, Labels, VmExit, VmState, type Episode, type EpisodeState, type Vm } from '../api/schema.js';

export const VmRecord = z.object({
  id: z.string(),
  name: z.string(),
  episode: z.string(),
  state: VmState,
  snapshot: z.string().nullable(),
  parentVm: z.string().nullable(),
  created: z.string(),
  runningSince: z.string().nullable(),
  exit: VmExit.nullable(),
  cpus: z.number(),
  memoryMiB: z.number(),
  /** The snapshot the live VM's next checkpoint diffs against: its layer must stay (docs/engine.md, "Delete"). */
  layerHead: z.string().nullable(),
  /** Where a suspended VM continues from. */
  suspendedAt: z.string().nullable(),
  /** Suspended by the engine stopping (not by the user): resumed when the engine starts again. */
  resumeOnStart: z.boolean(),
  /** It was paused when it was suspended, so it resumes paused. */
  suspendedPaused: z.boolean(),
  /** The guest agent of its current instance (records from before the agent read as `none`). */
  agent: AgentState.default('none'),
  /** Its labels (docs/labels.md); records from before labels have none. */
  labels: Labels.optional(),
});
export type VmRecord = z.infer<typeof VmRecord>;

export const EpisodeRecord = z.object({
  format: z.literal(1),
  id: z.string(),
  name: z.string(),
  /** `given: 'text'`: started from text (the app's editor); `path` is a name only and the text is the Smolfile. */
  smolfile: z.object({ path: z.string(), text: z.string(), given: z.literal('text').optional() }),
  created: z.string(),
  base: z.string().nullable(),
  vms: z.array(VmRecord),
  /** The Smolfile's [snapshots] policy: checkpoint every `everyMs` while running (null: never), keep `keep`. */
  autoCheckpoint: z.object({ everyMs: z.number().nullable(), keep: z.number() }),
  /** Counters for generated names (checkpoint-3, fork-1, …). */
  counters: z.record(z.string(), z.number()),
});
export type EpisodeRecord = z.infer<typeof EpisodeRecord>;

export const LIVE_STATES: ReadonlySet<string> = new Set(['creating', 'running', 'paused']);

const EPISODE_STATE_ORDER: EpisodeState[] = ['creating', 'running', 'paused', 'suspended', 'crashed', 'stopped'];

export function episodeState(record: EpisodeRecord): EpisodeState {
  const states = new Set<string>(record.vms.map((vm) => vm.state));
  return EPISODE_STATE_ORDER.find((state) => states.has(state)) ?? 'empty';
}

/** What a VM's view shows of its network (vm-networks.ts): its live instance's forwards and its refusal count. */
export type VmNetworkView = Pick<Vm, 'ports' | 'network'>;

export function vmView(record: VmRecord, network: VmNetworkView): Vm {
  return {
    id: record.id,
    name: record.name,
    episode: record.episode,
    state: record.state,
    snapshot: record.snapshot,
    parentVm: record.parentVm,
    created: record.created,
    runningSince: record.runningSince,
    exit: record.exit,
    cpus: record.cpus,
    memoryMiB: record.memoryMiB,
    agent: record.agent,
    labels: record.labels ?? {},
    ports: network.ports,
    network: network.network,
  };
}

export function episodeView(
  record: EpisodeRecord,
  snapshotCount: number,
  diskBytes: number,
  view: (vm: VmRecord) => Vm,
): Episode {
  return {
    id: record.id,
    name: record.name,
    state: episodeState(record),
    smolfile: record.smolfile,
    created: record.created,
    base: record.base,
    vms: record.vms.map(view),
    snapshotCount,
    diskBytes,
  };
}

/**
 * Finds one item by id, then name, then unique id prefix. `what` names the kind in errors: "no VM named or with
 * id x", "x matches 2 VMs: a, b".
 */
export function resolveRef<T extends { id: string; name: string }>(items: readonly T[], ref: string, what: string): T {
  const exact = items.find((item) => item.id === ref) ?? items.filter((item) => item.name === ref);
  if (!Array.isArray(exact)) return exact;
  if (exact.length === 1) return exact[0]!;
  const matches = exact.length > 1 ? exact : items.filter((item) => ref.length >= 3 && item.id.startsWith(ref));
  if (matches.length === 1) return matches[0]!;
  if (matches.length === 0) throw new ApiFailure(404, `no ${what} named or with id ${ref}`);
  throw new ApiFailure(
    400,
    `${ref} matches ${matches.length} ${what}s: ${matches
      .slice(0, 5)
      .map((item) => `${item.name} (${item.id})`)
      .join(', ')}; use an id`,
  );
}

/** `base-3` style: the first name with this stem that none of `taken` has. */
export function freshName(stem: string, taken: Iterable<string>, counters?: Record<string, number>): string {
  const names = new Set(taken);
  let n = counters?.[stem] ?? 0;
  let name: string;
  do name = `${stem}-${++n}`;
  while (names.has(name));
  if (counters) counters[stem] = n;
  return name;
}
