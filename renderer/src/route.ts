// What is open lives in the address too (docs/ui.md): `#/episodes/<episode>`, with `?vm=<vm>&snapshot=<snapshot>`
// for the selected VM and snapshot, so Back and Forward move between the list and episodes, a reload opens the same
// view, and a link to it (with the page's `?token=`) opens it elsewhere. Opening or closing an episode is a new
// history entry; choosing a VM or a snapshot replaces the current one (Back does not step through every click).
import type { AppState, AppStore } from './store/app-store.js';

export interface Route {
  episodeId: string | null;
  vmId: string | null;
  snapshotId: string | null;
}

const ID = /^[a-z]{2}-[A-Za-z0-9_-]{1,64}$/;
const checked = (id: string | null | undefined) => (id && ID.test(id) ? id : null);

export function parseRoute(hash: string): Route {
  const match = /^#\/episodes\/([^/?]+)(?:\?(.*))?$/.exec(hash);
  if (!match) return { episodeId: null, vmId: null, snapshotId: null };
  const query = new URLSearchParams(match[2] ?? '');
  const episodeId = checked(decodeURIComponent(match[1]!));
  return episodeId
    ? { episodeId, vmId: checked(query.get('vm')), snapshotId: checked(query.get('snapshot')) }
    : { episodeId: null, vmId: null, snapshotId: null };
}

export function formatRoute(route: Route): string {
  if (!route.episodeId) return '#/';
  const query = new URLSearchParams();
  if (route.vmId) query.set('vm', route.vmId);
  if (route.snapshotId) query.set('snapshot', route.snapshotId);
  const rest = query.toString();
  return `#/episodes/${encodeURIComponent(route.episodeId)}${rest ? `?${rest}` : ''}`;
}

const routeOf = (state: AppState): Route => ({
  episodeId: state.episodeId,
  vmId: state.episodeId ? state.vmId : null,
  snapshotId: state.episodeId ? state.snapshotId : null,
});

/** Opens what the address names, then keeps the two in step both ways; returns the stop. */
export function installRouting(store: AppStore, window: Window): () => void {
  const apply = () => {
    const route = parseRoute(window.location.hash);
    const now = routeOf(store.getState());
    if (formatRoute(route) !== formatRoute(now)) store.setState({ ...route });
  };
  apply();
  const unsubscribe = store.subscribe((state, previous) => {
    const next = formatRoute(routeOf(state));
    if (next === formatRoute(routeOf(previous)) || next === (window.location.hash || '#/')) return;
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
