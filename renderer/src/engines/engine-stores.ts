// The remote engines this page shows beside its own (docs/remote.md, "The app with several engines"): one App per
// remote engine (store, operations, metrics) over a WebTransport whose paths go through the local engine's
// /api/v1/engines/NAME prefix, fed by that engine's own event stream, which reconnects with backoff on its own. So
// the single-engine code (store, views, console) is the same code for each engine, and an engine that is down holds
// up none of the others. The list of engines is read from the local engine when it connects and after the Engines
// dialog adds or removes one.
import { createContext, useContext } from 'react';
import { useStore } from 'zustand';
import { createStore } from 'zustand/vanilla';
import type { RemoteEngineInfo } from '../../../src/api/schema.js';
import { useApp, useAppState, type App } from '../app-context.js';
import { pruneConsoleSessions } from '../console/console-sessions.js';
import { installRouting } from '../route.js';
import { awayReason } from '../store/selection.js';
import { connectStore, createAppStore } from '../store/app-store.js';
import { MetricsStore } from '../store/metrics.js';
import { Operations } from '../store/operations.js';
import { call, type Transport } from '../transport/transport.js';
import { WebTransport } from '../transport/web-transport.js';

export interface RemoteEngine extends RemoteEngineInfo {
  app: App;
}

export interface EnginesState {
  engines: RemoteEngine[];
  /** Why the list could not be read (the local engine away), or null. */
  failure: string | null;
  /** The episode list's engine filter: null for all, `local` or a remote engine's name. */
  filter: string | null;
  /** The remote engine whose episode is open (its route is in the address), or null. */
  open: string | null;
  /** False where the page cannot reach remote engines (the desktop app's IPC bridge carries one event stream). */
  supported: boolean;
}

export type Engines = ReturnType<typeof createEngines>;

const stops = new WeakMap<App, () => void>();

/**
 * The transport with an event stream that, once down, stays `closed` through its reconnect attempts until it is
 * open again: an engine that is away is shown away, not flickering between "connecting" and "unreachable" at every
 * retry (250 ms, then up to every 4 s: web-transport.ts).
 */
function steady(web: WebTransport): Transport {
  return {
    request: (method, path, body) => web.request(method, path, body),
    console: (vm, handlers) => web.console(vm, handlers),
    terminal: (vm, request, handlers) => web.terminal(vm, request, handlers),
    events: (handlers) => {
      let down = false;
      return web.events({
        onEvent: (event) => handlers.onEvent(event),
        onState: (state, why) => {
          if (state === 'connecting' && down) return;
          down = state === 'closed';
          handlers.onState(state, why);
        },
      });
    },
  };
}

/** The remote engines of the page whose own engine is `local`. */
export function createEngines(local: App, window: Window) {
  const base = local.transport instanceof WebTransport ? local.transport : null;
  const engines = createStore<EnginesState>(() => ({
    engines: [],
    failure: null,
    filter: null,
    open: null,
    supported: base !== null,
  }));
  const findOpen = () =>
    engines.setState({ open: engines.getState().engines.find((e) => e.app.store.getState().episodeId)?.name ?? null });

  /** Every engine's VM ids: a console lives while its VM does, whichever engine it is on. */
  const pruneConsoles = () => {
    const ids = [local.store, ...engines.getState().engines.map((e) => e.app.store)].flatMap((store) =>
      Object.keys(store.getState().engine.vms),
    );
    pruneConsoleSessions(new Set(ids));
  };

  const open = (info: RemoteEngineInfo): RemoteEngine => {
    const transport = steady(new WebTransport(base!.origin, base!.token, `/engines/${encodeURIComponent(info.name)}`));
    const store = createAppStore();
    const metrics = new MetricsStore(transport);
    const app: App = { store, operations: new Operations(store, transport), transport, metrics };
    const disconnect = connectStore(store, transport, requestAnimationFrame, metrics);
    const unroute = installRouting(store, window, info.name);
    const unprune = store.subscribe((state, previous) => {
      if (state.engine.vms !== previous.engine.vms) pruneConsoles();
      if (state.episodeId !== previous.episodeId) findOpen();
    });
    stops.set(app, () => (disconnect(), unroute(), unprune()));
    return { ...info, app };
  };

  /** Reads the list from the local engine: new engines get their store, removed ones are closed. */
  const sync = async () => {
    if (!base) return;
    let list: RemoteEngineInfo[];
    try {
      list = (await call(base, 'listEngines')).engines;
    } catch (error) {
      engines.setState({ failure: `the engines could not be listed: ${(error as Error).message}` });
      return;
    }
    const before = new Map(engines.getState().engines.map((e) => [e.name, e]));
    const next = list.map((info) => {
      const kept = before.get(info.name);
      if (kept && kept.url === info.url) {
        before.delete(info.name);
        return { ...kept, ...info };
      }
      return open(info);
    });
    for (const gone of before.values()) stops.get(gone.app)?.();
    const filter = engines.getState().filter;
    engines.setState({
      engines: next,
      failure: null,
      filter: filter && filter !== 'local' && !next.some((e) => e.name === filter) ? null : filter,
    });
    if (before.size) pruneConsoles();
    findOpen();
  };

  // Read when the local engine connects (at start, and after it was away).
  const unwatch = local.store.subscribe((state, previous) => {
    if (state.connection.state === 'open' && previous.connection.state !== 'open') void sync();
  });
  if (local.store.getState().connection.state === 'open') void sync();

  return {
    store: engines,
    sync,
    pruneConsoles,
    setFilter: (filter: string | null) => engines.setState({ filter }),
    /** The remote engine whose episode is open (commands and shortcuts act on it), or null: the local one. */
    active: (): RemoteEngine | null => {
      const { engines: list, open } = engines.getState();
      return list.find((e) => e.name === open) ?? null;
    },
    stop: () => {
      unwatch();
      for (const engine of engines.getState().engines) stops.get(engine.app)?.();
    },
  };
}

export const EnginesContext = createContext<Engines | null>(null);

export function useEngines(): Engines {
  const engines = useContext(EnginesContext);
  if (!engines) throw new Error('useEngines outside <EnginesContext.Provider>');
  return engines;
}

/** Where no remote engines are provided (a component test): none. */
const NONE = createStore<EnginesState>(() => ({
  engines: [],
  failure: null,
  filter: null,
  open: null,
  supported: false,
}));

/** One value of the remote engines' state; a selector that builds an object or array needs useShallow. */
export function useEnginesState<T>(selector: (state: EnginesState) => T): T {
  return useStore(useContext(EnginesContext)?.store ?? NONE, selector);
}

/**
 * Why the context's engine cannot act now (it is out of reach: what the page shows of it is as last seen), named as
 * the palette names it; null while it is connected.
 */
export function useAway(): string | null {
  const app = useApp();
  const name = useEnginesState((s) => s.engines.find((e) => e.app === app)?.name);
  return useAppState((s) => awayReason(s, name));
}
