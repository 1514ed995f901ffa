// The UI's one store (zustand): the engine's state (engine-state.ts, fed by the event stream and loads), the
// connection, what the user selected, running operations, and toasts. Console bytes never come here (STYLE.md).
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { EngineEvent, Snapshot } from '../../../src/api/schema.js';
import { call, type StreamState, type Transport } from '../transport/transport.js';
import type { MetricsStore } from './metrics.js';
import { applyEvent, emptyEngineState, loadEpisodes, loadSnapshots, type EngineState } from './engine-state.js';
import { successorOf } from './selection.js';

export interface Toast {
  id: number;
  kind: 'info' | 'error';
  text: string;
  /** An undo or retry: runs and dismisses the toast. */
  action?: { label: string; run: () => void };
  /** When it goes away by itself (ms since the epoch); errors stay until dismissed. */
  expires: number | null;
}

export interface AppState {
  engine: EngineState;
  connection: { state: StreamState; why: string | null };
  /** The open episode (null: the list). */
  episodeId: string | null;
  /** The snapshot selected in the tree or timeline, and the VM whose console is shown. */
  snapshotId: string | null;
  vmId: string | null;
  /** Episodes ticked in the list, for bulk actions. */
  ticked: string[];
  search: string;
  /** The fork tree leaves out automatic checkpoints (but not one a VM is on, or the selection). */
  hideAutomatic: boolean;
  /** A second snapshot marked on the tree (shift-click) beside the selected one, for side by side. */
  treeMark: string | null;
  /** Per episode, the collapsed chains the user opened (by their first snapshot). */
  expandedChains: Record<string, string[]>;
  /** The tree coloured by a numeric label (null: by kind only), and its best branch shown (tree-colour.ts). */
  treeColour: { label: string | null; bestOf: 'high' | 'low' | null };
  /** Ids whose delete waits for its undo toast to expire: hidden meanwhile. */
  pendingDeletes: string[];
  /** What runs on a thing now ("Checkpointing…"), by a key such as `vm:ID`: shown where it happens. */
  busy: Record<string, string>;
  /** The last failure on a thing, by the same keys, shown there until the next try. */
  failures: Record<string, string>;
  toasts: Toast[];
  paletteOpen: boolean;
  /** A dialog: new episode, checkpoint, fork, restore. */
  dialog: Dialog | null;
}

export type Dialog =
  | { kind: 'new-episode' }
  | { kind: 'checkpoint'; vmId: string }
  | { kind: 'fork'; vmId: string | null; snapshotId: string | null }
  | { kind: 'restore'; vmId: string; snapshotId: string }
  /** Deleting more episodes than BULK_CONFIRM at once asks first. */
  | { kind: 'confirm-delete'; episodeIds: string[] }
  /** Pack a VM or a snapshot into a .smolmachine file (docs/smolmachine.md). */
  | { kind: 'export'; source: { vmId: string } | { snapshotId: string } }
  /** Start an episode from a .smolmachine file: a path (a dropped file's), opened at once with `start`. */
  | { kind: 'open-machine'; path?: string; start?: boolean; note?: string };

export type AppStore = StoreApi<AppState>;

export const initialAppState = (): AppState => ({
  engine: emptyEngineState(),
  connection: { state: 'connecting', why: null },
  episodeId: null,
  snapshotId: null,
  vmId: null,
  ticked: [],
  search: '',
  hideAutomatic: false,
  treeMark: null,
  expandedChains: {},
  treeColour: { label: null, bestOf: null },
  pendingDeletes: [],
  busy: {},
  failures: {},
  toasts: [],
  paletteOpen: false,
  dialog: null,
});

export function createAppStore(): AppStore {
  return createStore<AppState>()(() => initialAppState());
}

/** Applies a batch of events in one update (one render per batch, not per event). */
export function applyEvents(store: AppStore, events: readonly EngineEvent[]): void {
  if (events.length === 0) return;
  store.setState((state) => {
    let engine = state.engine;
    for (const event of events) engine = applyEvent(engine, event);
    if (engine === state.engine) return state; // nothing changed (a VM's record repeated): nothing renders
    const ticked = state.ticked.filter((id) => id in engine.episodes);
    const gone = (id: string | null) => id !== null && !(id in engine.episodes);
    return {
      engine,
      // What was open and is gone closes.
      episodeId: gone(state.episodeId) ? null : state.episodeId,
      // A selected VM that is gone hands the selection to its neighbour in the episode (selection.ts).
      vmId: state.vmId && !(state.vmId in engine.vms) ? successorAfterRemoval(state, engine, state.vmId) : state.vmId,
      snapshotId: state.snapshotId && !(state.snapshotId in engine.snapshots) ? null : state.snapshotId,
      // The same list when none went: a component that selects it does not render again.
      ticked: ticked.length === state.ticked.length ? state.ticked : ticked,
    };
  });
}

function successorAfterRemoval(state: AppState, engine: EngineState, gone: string): string | null {
  const episode = state.engine.vms[gone]?.episode;
  const order = episode ? (state.engine.episodes[episode]?.vmIds ?? []) : [];
  return successorOf(order, gone, (id) => id in engine.vms && !state.pendingDeletes.includes(id));
}

/** An episode's snapshots fetched outside an open episode (the compare view): into the store as a load does. */
export function putEpisodeSnapshots(store: AppStore, episodeId: string, snapshots: Snapshot[]): void {
  store.setState((state) =>
    episodeId in state.engine.episodes ? { engine: loadSnapshots(state.engine, episodeId, snapshots) } : state,
  );
}

let nextToast = 1;
export function toast(store: AppStore, kind: Toast['kind'], text: string, options: Partial<Toast> = {}): number {
  const id = nextToast++;
  const expires = kind === 'error' ? null : Date.now() + 5000;
  const next = { id, kind, text, expires, ...options };
  // Plain news (not an error, nothing to undo) makes way: only the newest few stay, so a burst of finished
  // operations does not cover the page.
  const plain = (t: Toast) => t.kind !== 'error' && !t.action;
  store.setState((state) => {
    const kept = plain(next)
      ? state.toasts.filter((t) => !plain(t)).concat(state.toasts.filter(plain).slice(-2))
      : state.toasts;
    return { toasts: [...kept.sort((a, b) => a.id - b.id), next] };
  });
  return id;
}

export function dismissToast(store: AppStore, id: number): void {
  store.setState((state) => ({ toasts: state.toasts.filter((t) => t.id !== id) }));
}

/**
 * Keeps the store a projection of the engine: subscribes to events, and on every (re)connection loads the episodes
 * and the open episode's snapshots again. Events that arrive while a load is in flight are applied after it, so a
 * load never undoes a newer event. Returns the stop.
 */
export function connectStore(
  store: AppStore,
  transport: Transport,
  schedule = requestAnimationFrame,
  metrics: MetricsStore | null = null,
): () => void {
  let queue: EngineEvent[] = [];
  let loads = 0;
  let scheduled = false;
  // Every event waits for the next animation frame, and a frame's events are one store update (one render).
  const enqueue = (event: EngineEvent) => {
    queue.push(event);
    if (!scheduled) {
      scheduled = true;
      schedule(flush);
    }
  };
  const flush = () => {
    scheduled = false;
    if (loads > 0) return;
    const batch = queue;
    queue = [];
    applyEvents(store, batch);
    for (const event of batch) refreshCountsAfter(event);
  };
  // snapshot.created/deleted change an episode's snapshot count and disk use, which only episode.updated carries:
  // the episode is fetched again shortly after (once per burst).
  const refreshing = new Map<string, ReturnType<typeof setTimeout>>();
  const refreshCountsAfter = (event: EngineEvent) => {
    const episode =
      event.type === 'snapshot.created'
        ? event.snapshot.episode
        : event.type === 'snapshot.deleted'
          ? event.episode
          : null;
    if (!episode || refreshing.has(episode)) return;
    refreshing.set(
      episode,
      setTimeout(() => {
        refreshing.delete(episode);
        call(transport, 'getEpisode', { params: { episode } }).then(
          // With the frame's events, not an update of its own.
          (fresh) => enqueue({ type: 'episode.updated', episode: fresh }),
          () => undefined, // deleted meanwhile: its episode.deleted event says so
        );
      }, 300),
    );
  };
  const load = async <T>(what: Promise<T>, apply: (state: EngineState, value: T) => EngineState) => {
    loads++;
    try {
      const value = await what;
      store.setState((state) => ({ engine: apply(state.engine, value) }));
    } finally {
      loads--;
      if (!scheduled) flush();
    }
  };
  const reload = async () => {
    try {
      await load(call(transport, 'listEpisodes'), (state, value) => loadEpisodes(state, value.episodes));
      const open = store.getState().episodeId;
      if (open) await loadEpisodeSnapshots(store, transport, open, load);
    } catch (error) {
      store.setState({ connection: { state: 'closed', why: `loading episodes failed: ${(error as Error).message}` } });
    }
  };
  const stop = transport.events({
    onEvent: (event) => {
      // Samples go to the sparklines' own store, never through React state.
      if (event.type === 'metrics') return metrics?.add(event.vm, event);
      if (event.type === 'vm.removed') metrics?.forget(event.id);
      enqueue(event);
    },
    onState: (state, why) => {
      store.setState({ connection: { state, why: why ?? null } });
      if (state === 'open') void reload();
    },
  });
  // Opening an episode loads its snapshots.
  const unsubscribe = store.subscribe((state, previous) => {
    if (state.episodeId && state.episodeId !== previous.episodeId && !(state.episodeId in state.engine.timeline)) {
      void loadEpisodeSnapshots(store, transport, state.episodeId, load).catch((error: Error) =>
        toast(store, 'error', `Loading the snapshots failed: ${error.message}`),
      );
    }
  });
  return () => {
    stop();
    unsubscribe();
    for (const timer of refreshing.values()) clearTimeout(timer);
  };
}

type Loader = <T>(what: Promise<T>, apply: (state: EngineState, value: T) => EngineState) => Promise<void>;

function loadEpisodeSnapshots(store: AppStore, transport: Transport, episodeId: string, load: Loader) {
  return load(call(transport, 'listSnapshots', { params: { episode: episodeId } }), (state, value) =>
    episodeId in state.episodes ? loadSnapshots(state, episodeId, value.snapshots) : state,
  );
}
