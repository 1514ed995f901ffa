// What is open lives in the address too (docs/ui.md): `#/episodes/<episode>`, with `?vm=<vm>&snapshot=<snapshot>`
// for the selected VM and snapshot, so Back and Forward move between the list and episodes, a reload opens the same
// view, and a link to it (with the page's `?token=`) opens it elsewhere. Opening or closing an episode is a new
// history entry; choosing a VM or a snapshot replaces the current one (Back does not step through every click).
// An episode of a remote engine (docs/remote.md, "The app with several engines") is `#/engines/<engine>/episodes/…`:
// each engine's store keeps its own route, and a store leaves alone an address that names another engine.
import type { AppState, AppStore } from './store/app-store.js';

export interface Route {
  episodeId: string | null;
  vmId: string | null;
  snapshotId: string | null;
}

const ID = /^[a-z]{2}-[A-Za-z0-9_-]{1,64}$/;
const checked = (id: string | null | undefined) => (id && ID.test(id) ? id : null);

const NONE: Route = { episodeId: null, vmId: null, snapshotId: null };
/** A remote engine's name as the engine accepts it (schema.ts, RemoteEngineName); `local` is never one. */
const ENGINE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Which engine the address is about: null for the local one, or a remote engine's name. */
/** Calls `onChange` when the address's hash changes (for useSyncExternalStore); returns the unsubscribe. */
export function subscribeToAddress(onChange: () => void): () => void {
  window.addEventListener('hashchange', onChange);
  window.addEventListener('popstate', onChange);
  return () => {
    window.removeEventListener('hashchange', onChange);
    window.removeEventListener('popstate', onChange);
  };
}

export function routeEngine(hash: string): string | null {
  const match = /^#\/engines\/([^/?]+)\//.exec(hash);
  const name = match ? decodeURIComponent(match[1]!) : null;
  return name && ENGINE.test(name) && name !== 'local' ? name : null;
}

/** The route of `engine` (null: the local one) in the address; none when the address is about another engine. */
export function parseRoute(hash: string, engine: string | null = null): Route {
  if (routeEngine(hash) !== engine) return NONE;
  const prefix = engine === null ? '#' : `#/engines/${encodeURIComponent(engine)}`;
  if (!hash.startsWith(prefix)) return NONE;
  const match = /^\/episodes\/([^/?]+)(?:\?(.*))?$/.exec(hash.slice(prefix.length));
  if (!match) return NONE;
  const query = new URLSearchParams(match[2] ?? '');
  const episodeId = checked(decodeURIComponent(match[1]!));
  return episodeId ? { episodeId, vmId: checked(query.get('vm')), snapshotId: checked(query.get('snapshot')) } : NONE;
}

export function formatRoute(route: Route, engine: string | null = null): string {
  if (!route.episodeId) return '#/';
  const query = new URLSearchParams();
  if (route.vmId) query.set('vm', route.vmId);
  if (route.snapshotId) query.set('snapshot', route.snapshotId);
  const rest = query.toString();
  const episode = `/episodes/${encodeURIComponent(route.episodeId)}${rest ? `?${rest}` : ''}`;
  return engine === null ? `#${episode}` : `#/engines/${encodeURIComponent(engine)}${episode}`;
}

const routeOf = (state: AppState): Route => ({
  episodeId: state.episodeId,
  vmId: state.episodeId ? state.vmId : null,
  snapshotId: state.episodeId ? state.snapshotId : null,
});

/**
 * Opens what the address names, then keeps the two in step both ways; returns the stop. `engine`: whose store this
 * is (null: the local engine's).
 */
export function installRouting(store: AppStore, window: Window, engine: string | null = null): () => void {
  const apply = () => {
    const route = parseRoute(window.location.hash, engine);
    const now = routeOf(store.getState());
    if (formatRoute(route) !== formatRoute(now)) store.setState({ ...route });
  };
  apply();
  const unsubscribe = store.subscribe((state, previous) => {
    const next = formatRoute(routeOf(state), engine);
    if (next === formatRoute(routeOf(previous), engine) || next === (window.location.hash || '#/')) return;
    // Closed here while the address names another engine's episode (a click there, Back): that one keeps it.
    if (!state.episodeId && routeEngine(window.location.hash) !== engine) return;
    const url = `${window.location.pathname}${window.location.search}${next}`;
    if (state.episodeId !== previous.episodeId) window.history.pushState(null, '', url);
    else window.history.replaceState(null, '', url);
  });
  window.addEventListener('popstate', apply);
  return () => {
    unsubscribe();
    window.removeEventListener('popstate', apply);
  };
}
