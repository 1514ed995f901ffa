// The engine's state as the UI holds it: a projection of the event stream (ARCHITECTURE.md, "Events, not polling"),
// normalized by id (STYLE.md). applyEvent is the one place events change it; a load replaces what it covers.
import type { EngineEvent, Episode, NetworkRefusal, Snapshot, Vm } from '../../../src/api/schema.js';

/** An episode without its VMs (they live in `vms`, listed by `vmIds`). */
export type EpisodeRow = Omit<Episode, 'vms'> & { vmIds: string[] };

export interface Progress {
  operation: string;
  done: number;
  total: number;
}

export interface EngineState {
  episodes: Record<string, EpisodeRow>;
  /** Creation order. */
  episodeIds: string[];
  vms: Record<string, Vm>;
  snapshots: Record<string, Snapshot>;
  /** Each loaded episode's own snapshots in creation order (its base, which has no episode, is `episode.base`). */
  timeline: Record<string, string[]>;
  /** A running operation's progress, by VM. */
  progress: Record<string, Progress>;
  /**
   * The latest progress of a pack or an open (MACHINE_OPERATIONS), by operation, whether or not it names a VM: what
   * the Export and Open machine dialogs show. The engine's events do not say which request they belong to.
   */
  operationProgress: Record<string, Progress>;
  /** The last refused connections of each networked VM, oldest first (events, or a load of its network). */
  refusals: Record<string, NetworkRefusal[]>;
}

/** The operations whose progress is kept by operation (operationProgress) as well as by VM. */
export const MACHINE_OPERATIONS = new Set(['pack', 'open']);

/** Forgets an operation's last progress: a new one starts from nothing, not where a failed one stopped. */
export function clearOperationProgress(state: EngineState, operation: string): EngineState {
  return operation in state.operationProgress
    ? { ...state, operationProgress: without(state.operationProgress, [operation]) }
    : state;
}

/** Refusals the UI keeps per VM. */
export const KEPT_REFUSALS = 50;

export const emptyEngineState = (): EngineState => ({
  episodes: {},
  episodeIds: [],
  vms: {},
  snapshots: {},
  timeline: {},
  progress: {},
  operationProgress: {},
  refusals: {},
});

const without = <T>(record: Record<string, T>, ids: readonly string[]): Record<string, T> => {
  if (!ids.some((id) => id in record)) return record;
  const copy = { ...record };
  for (const id of ids) delete copy[id];
  return copy;
};

function putEpisode(state: EngineState, episode: Episode): EngineState {
  const { vms, ...rest } = episode;
  const previous = state.episodes[episode.id];
  const listed = new Set(vms.map((vm) => vm.id));
  // The episode's VM list is complete: a VM it no longer names is gone.
  const gone = (previous?.vmIds ?? []).filter((id) => !listed.has(id));
  const nextVms = { ...without(state.vms, gone) };
  // A VM the summary repeats unchanged keeps its object: what draws it need not draw again.
  for (const vm of vms) nextVms[vm.id] = sameVm(state.vms[vm.id], vm) ? state.vms[vm.id]! : vm;
  return {
    ...state,
    episodes: { ...state.episodes, [episode.id]: { ...rest, vmIds: vms.map((vm) => vm.id) } },
    episodeIds: previous ? state.episodeIds : [...state.episodeIds, episode.id],
    vms: nextVms,
  };
}

/** The same record as the engine sent it (a VM is small plain JSON, its fields always in the schema's order). */
const sameVm = (known: Vm | undefined, vm: Vm) => known !== undefined && JSON.stringify(known) === JSON.stringify(vm);

function putVm(state: EngineState, vm: Vm): EngineState {
  const episode = state.episodes[vm.episode];
  if (episode?.vmIds.includes(vm.id) && sameVm(state.vms[vm.id], vm)) return state;
  const episodes =
    episode && !episode.vmIds.includes(vm.id)
      ? { ...state.episodes, [vm.episode]: { ...episode, vmIds: [...episode.vmIds, vm.id] } }
      : state.episodes;
  return { ...state, vms: { ...state.vms, [vm.id]: vm }, episodes };
}

function removeVm(state: EngineState, id: string, episodeId: string): EngineState {
  const episode = state.episodes[episodeId];
  const episodes = episode
    ? { ...state.episodes, [episodeId]: { ...episode, vmIds: episode.vmIds.filter((vm) => vm !== id) } }
    : state.episodes;
  return {
    ...state,
    vms: without(state.vms, [id]),
    episodes,
    progress: without(state.progress, [id]),
    refusals: without(state.refusals, [id]),
  };
}

/** A refused connection of a VM: its count as the engine says and the list of the last ones. */
function addRefusal(state: EngineState, id: string, refusal: NetworkRefusal, refused: number): EngineState {
  const vm = state.vms[id];
  const list = state.refusals[id] ?? [];
  if (list.some((known) => known.seq === refusal.seq)) return state;
  const refusals = { ...state.refusals, [id]: [...list, refusal].slice(-KEPT_REFUSALS) };
  const vms = vm ? { ...state.vms, [id]: { ...vm, network: { ...vm.network, refused } } } : state.vms;
  return { ...state, vms, refusals };
}

/** GET /vms/:vm/network: the VM's last refusals as the engine keeps them. */
export function loadRefusals(state: EngineState, id: string, events: readonly NetworkRefusal[]): EngineState {
  const known = state.refusals[id] ?? [];
  const seqs = new Set(events.map((event) => event.seq));
  const merged = [...events, ...known.filter((event) => !seqs.has(event.seq))].sort((a, b) => a.seq - b.seq);
  return { ...state, refusals: { ...state.refusals, [id]: merged.slice(-KEPT_REFUSALS) } };
}

function putSnapshot(state: EngineState, snapshot: Snapshot): EngineState {
  const snapshots = { ...state.snapshots, [snapshot.id]: snapshot };
  const list = snapshot.episode ? state.timeline[snapshot.episode] : undefined;
  if (!list || list.includes(snapshot.id)) return { ...state, snapshots };
  // Usually the newest; inserted by time in case events and a load crossed.
  const at = list.findLastIndex((id) => (state.snapshots[id]?.created ?? '') <= snapshot.created) + 1;
  const timeline = { ...state.timeline, [snapshot.episode!]: [...list.slice(0, at), snapshot.id, ...list.slice(at)] };
  return { ...state, snapshots, timeline };
}

/**
 * The episode's snapshot count and disk use as the list and header show them, kept current between the engine's
 * episode summaries (a deleted snapshot's files may stay for a layer chain: its bytes wait for the next summary).
 */
function countSnapshots(state: EngineState, episodeId: string | null, delta: number, bytes: number): EngineState {
  const episode = episodeId ? state.episodes[episodeId] : undefined;
  if (!episode) return state;
  const counted = {
    ...episode,
    snapshotCount: Math.max(0, episode.snapshotCount + delta),
    diskBytes: episode.diskBytes + bytes,
  };
  return { ...state, episodes: { ...state.episodes, [episode.id]: counted } };
}

/** A deleted snapshot leaves the tree; its children hang from its parent, as the engine lists them. */
function deleteSnapshot(state: EngineState, id: string, episodeId: string | null): EngineState {
  const gone = state.snapshots[id];
  const snapshots = { ...without(state.snapshots, [id]) };
  if (gone) {
    for (const [childId, child] of Object.entries(snapshots)) {
      if (child.parent === id) snapshots[childId] = { ...child, parent: gone.parent };
    }
  }
  const list = episodeId ? state.timeline[episodeId] : undefined;
  const timeline = list ? { ...state.timeline, [episodeId!]: list.filter((s) => s !== id) } : state.timeline;
  return { ...state, snapshots, timeline };
}

function deleteEpisode(state: EngineState, id: string): EngineState {
  const episode = state.episodes[id];
  if (!episode) return state;
  const snapshotIds = state.timeline[id] ?? [];
  return {
    ...state,
    episodes: without(state.episodes, [id]),
    episodeIds: state.episodeIds.filter((e) => e !== id),
    vms: without(state.vms, episode.vmIds),
    snapshots: without(state.snapshots, snapshotIds),
    timeline: without(state.timeline, [id]),
    progress: without(state.progress, episode.vmIds),
    refusals: without(state.refusals, episode.vmIds),
  };
}

export function applyEvent(state: EngineState, event: EngineEvent): EngineState {
  switch (event.type) {
    case 'episode.created':
    case 'episode.updated':
      return putEpisode(state, event.episode);
    case 'episode.deleted':
      return deleteEpisode(state, event.id);
    case 'vm.updated':
      return putVm(state, event.vm);
    case 'vm.removed':
      return removeVm(state, event.id, event.episode);
    case 'snapshot.created':
      return countSnapshots(putSnapshot(state, event.snapshot), event.snapshot.episode, 1, event.snapshot.diskBytes);
    case 'snapshot.updated':
      return putSnapshot(state, event.snapshot);
    case 'snapshot.deleted':
      return countSnapshots(deleteSnapshot(state, event.id, event.episode), event.episode, -1, 0);
    case 'progress': {
      const progress = { operation: event.operation, done: event.done, total: event.total };
      const finished = event.done >= event.total;
      const byOperation = !MACHINE_OPERATIONS.has(event.operation)
        ? state.operationProgress
        : finished
          ? without(state.operationProgress, [event.operation])
          : { ...state.operationProgress, [event.operation]: progress };
      if (!event.vm) return { ...state, operationProgress: byOperation };
      if (finished) return { ...state, progress: without(state.progress, [event.vm]), operationProgress: byOperation };
      return { ...state, progress: { ...state.progress, [event.vm]: progress }, operationProgress: byOperation };
    }
    case 'vm.network.refused':
      return addRefusal(state, event.vm, event.refusal, event.refused);
    case 'image.pull': // the images view keeps its pulls' progress (renderer/src/images/images-store.ts)
    case 'metrics':
      // Kept apart, for the sparklines (metrics.ts): not engine state that renders.
      return state;
  }
}

/** GET /episodes: every episode and VM as the engine has them now. */
export function loadEpisodes(state: EngineState, episodes: Episode[]): EngineState {
  const ids = new Set(episodes.map((episode) => episode.id));
  // Built in place: a thousand episodes must not copy the maps a thousand times.
  const next: EngineState = { ...state, episodes: {}, episodeIds: [], vms: {} };
  for (const { vms, ...rest } of episodes) {
    next.episodes[rest.id] = { ...rest, vmIds: vms.map((vm) => vm.id) };
    next.episodeIds.push(rest.id);
    for (const vm of vms) next.vms[vm.id] = vm;
  }
  // Snapshots and timelines of episodes that are gone go with them.
  const stale = Object.keys(state.timeline).filter((id) => !ids.has(id));
  const staleSnapshots = stale.flatMap((id) => state.timeline[id] ?? []);
  const progress = Object.fromEntries(Object.entries(state.progress).filter(([vm]) => vm in next.vms));
  return {
    ...next,
    snapshots: without(state.snapshots, staleSnapshots),
    timeline: without(state.timeline, stale),
    progress,
  };
}

/** GET /episodes/:id/snapshots: the episode's snapshots (its base first, when it has one) in creation order. */
export function loadSnapshots(state: EngineState, episodeId: string, snapshots: Snapshot[]): EngineState {
  const next = { ...without(state.snapshots, state.timeline[episodeId] ?? []) };
  for (const snapshot of snapshots) next[snapshot.id] = snapshot;
  const own = snapshots.filter((snapshot) => snapshot.episode === episodeId).map((snapshot) => snapshot.id);
  return { ...state, snapshots: next, timeline: { ...state.timeline, [episodeId]: own } };
}

/** An episode's snapshots for its tree and timeline: its base (when known) and its own, oldest first. */
export function episodeSnapshots(state: EngineState, episodeId: string): Snapshot[] {
  return snapshotsOf(state.episodes[episodeId]?.base ?? null, state.timeline[episodeId], state.snapshots);
}

/** The same from the parts a component selects: the base's id, the episode's timeline and the snapshots by id. */
export function snapshotsOf(
  base: string | null,
  own: readonly string[] | undefined,
  snapshots: Readonly<Record<string, Snapshot>>,
): Snapshot[] {
  const list = (own ?? []).map((id) => snapshots[id]).filter((s) => s !== undefined);
  const baseSnapshot = base ? snapshots[base] : undefined;
  return baseSnapshot ? [baseSnapshot, ...list] : list;
}
