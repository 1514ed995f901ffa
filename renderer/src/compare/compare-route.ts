// The compare view's place in the address (docs/ui.md, "Side by side"): `#/compare?a=<vm or snapshot>&b=<…>`, beside
// route.ts's episodes and images-route.ts's images. Like the images view it is not store state: it opens as the
// entry after where it was opened from (route.ts openView), so Back from the compare view, the browser's or its own,
// returns there. What the address names is read as it is written; compare-sides.ts says what each side is, or what is wrong.
import { useSyncExternalStore } from 'react';
import type { AppStore } from '../store/app-store.js';
import { openView, replaceView, subscribeToAddress } from '../route.js';

export const COMPARE_PREFIX = '#/compare';

/** The two sides the address names, as written (null: not given); null when the address is not the compare view's. */
export interface CompareRoute {
  a: string | null;
  b: string | null;
}

export function parseCompareRoute(hash: string): CompareRoute | null {
  const match = /^#\/compare(?:\?(.*))?$/.exec(hash);
  if (!match) return null;
  const query = new URLSearchParams(match[1] ?? '');
  const side = (key: string) => {
    const value = query.get(key)?.trim();
    return value ? value : null;
  };
  return { a: side('a'), b: side('b') };
}

export function formatCompareRoute(route: CompareRoute): string {
  const query = new URLSearchParams();
  if (route.a) query.set('a', route.a);
  if (route.b) query.set('b', route.b);
  const rest = query.toString();
  return `${COMPARE_PREFIX}${rest ? `?${rest}` : ''}`;
}

/** The compare view's route while the address is its, else null (the string keeps the snapshot stable). */
export function useCompareRoute(): CompareRoute | null {
  const hash = useSyncExternalStore(subscribeToAddress, () =>
    window.location.hash.startsWith(COMPARE_PREFIX) ? window.location.hash : '',
  );
  return hash ? parseCompareRoute(hash) : null;
}

/** Opens the compare view on two VMs or snapshots (a new history entry: Back returns to where it was opened). */
export function showCompare(store: AppStore, a: string | null, b: string | null): void {
  openView([store], formatCompareRoute({ a, b }), 'side by side');
}

/** Changes the sides in place (swap, close one): replaces the entry, as choosing a VM does in an episode. */
export function replaceCompare(route: CompareRoute): void {
  replaceView(formatCompareRoute(route));
}
