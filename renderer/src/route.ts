// What is open lives in the address too (docs/ui.md): `#/episodes/<episode>`, with `?vm=<vm>&snapshot=<snapshot>`
// for the selected VM and snapshot, so Back and Forward move between the list and episodes, a reload opens the same
// view, and a link to it (with the page's `?token=`) opens it elsewhere. Opening or closing an episode is a new
// history entry; choosing a VM or a snapshot replaces the current one (Back does not step through every click).
// An episode of a remote engine (docs/remote.md, "The app with several engines") is `#/engines/<engine>/episodes/…`:
// each engine's store keeps its own route, and a store leaves alone an address that names another engine.
import { useSyncExternalStore } from 'react';
import type { AppState, AppStore } from './store/app-store.js';
import { closeEpisode } from './store/selection.js';

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
  // While the address is being applied it is the truth: nothing is written back (Forward onto #/images closes the
  // episode here, and writing the list's address then would push an entry over the images').
  let applying = false;
  const apply = () => {
    const route = parseRoute(window.location.hash, engine);
    const now = routeOf(store.getState());
    if (formatRoute(route) === formatRoute(now)) return;
    applying = true;
    try {
      store.setState({ ...route });
    } finally {
      applying = false;
    }
  };
  apply();
  const unsubscribe = store.subscribe((state, previous) => {
    if (applying) return;
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

/**
 * What a view that is only an address (images, side by side) keeps in its history entry: its own name, and the name
 * of where it was opened from (null: nowhere of this page's, a link or a new tab). The entry keeps it across reloads.
 */
interface ViewEntry {
  view: string;
  back: string | null;
}

function viewEntry(state: unknown): ViewEntry | null {
  const entry = state as Partial<ViewEntry> | null;
  return entry && typeof entry.view === 'string' ? { view: entry.view, back: entry.back ?? null } : null;
}

/** The name of what the address shows now, for the Back control of a view opened from it. */
function hereName(stores: readonly AppStore[]): string {
  const open = stores.map((store) => store.getState()).find((state) => state.episodeId);
  const episode = open ? open.engine.episodes[open.episodeId!] : undefined;
  if (open) return `episode ${episode?.name ?? open.episodeId}`;
  const hash = window.location.hash || '#/';
  return viewEntry(window.history.state)?.view ?? (hash === '#/' ? 'episodes' : 'the view before');
}

/**
 * Opens the view at `hash` (named `view`) as the history entry after the one it is opened from, so Back (the
 * browser's, or the view's own: leaveView) returns there. `stores`: every engine's store (an open episode of any of
 * them is closed). Closing an open episode pushes the list's entry (installRouting): the view takes that entry's
 * place, else Back would go to the list.
 */
export function openView(stores: readonly AppStore[], hash: string, view: string): void {
  const before = window.location.hash || '#/';
  if (before === hash) return;
  const entry: ViewEntry = { view, back: hereName(stores) };
  for (const store of stores) if (store.getState().episodeId) closeEpisode(store);
  const url = `${window.location.pathname}${window.location.search}${hash}`;
  if ((window.location.hash || '#/') !== before) window.history.replaceState(entry, '', url);
  else window.history.pushState(entry, '', url);
  window.dispatchEvent(new HashChangeEvent('hashchange'));
}

/** Changes the view's address in place (its entry, with where it was opened from, stays). */
export function replaceView(hash: string): void {
  const url = `${window.location.pathname}${window.location.search}${hash}`;
  window.history.replaceState(window.history.state, '', url);
  window.dispatchEvent(new HashChangeEvent('hashchange'));
}

/**
 * The view's own Back: to where it was opened from (the entry before it), or to the list when it was opened
 * from outside the page (a link, a new tab: nothing of the page's before it).
 */
export function leaveView(): void {
  if (viewEntry(window.history.state)?.back) window.history.back();
  else window.location.hash = '#/';
}

/** Where the view's own Back goes, named (`episodes`: the list; `episode NAME`; another view's name). */
export function useBackName(): string {
  return useSyncExternalStore(subscribeToAddress, () => viewEntry(window.history.state)?.back ?? 'episodes');
}
