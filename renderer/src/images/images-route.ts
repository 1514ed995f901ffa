// The images view's place in the address (docs/ui.md, "Images"): `#/images`, beside route.ts's episodes. It is not
// store state: route.ts keeps the episode, VM and snapshot, and opens it as the entry after where it was opened from
// (openView), so Back, the browser's or the view's own, returns there.
import { useSyncExternalStore } from 'react';
import type { AppStore } from '../store/app-store.js';
import { openView, subscribeToAddress } from '../route.js';

export const IMAGES_HASH = '#/images';

/** Whether the address is the images view's. */
export function useImagesOpen(): boolean {
  return useSyncExternalStore(subscribeToAddress, () => window.location.hash === IMAGES_HASH);
}

/** Opens the images view; `stores`: every engine's (whichever has an episode open is where Back returns). */
export function showImages(stores: readonly AppStore[]): void {
  openView(stores, IMAGES_HASH, 'images');
}
