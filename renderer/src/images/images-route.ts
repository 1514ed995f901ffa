// The images view's place in the address (docs/ui.md, "Images"): `#/images`, beside route.ts's episodes. It is not
// store state: route.ts keeps the episode, VM and snapshot, and an address it does not know means the list, which
// is what the images view leaves behind it.
import { useSyncExternalStore } from 'react';
import type { AppStore } from '../store/app-store.js';
import { closeEpisode } from '../store/selection.js';
import { subscribeToAddress } from '../route.js';

export const IMAGES_HASH = '#/images';

/** Whether the address is the images view's. */
export function useImagesOpen(): boolean {
  return useSyncExternalStore(subscribeToAddress, () => window.location.hash === IMAGES_HASH);
}

/** Opens the images view (a new history entry: Back returns to where it was opened). */
export function showImages(store: AppStore): void {
  closeEpisode(store);
  if (window.location.hash !== IMAGES_HASH) window.location.hash = IMAGES_HASH;
}

/** Back to the episodes list. */
export function leaveImages(store: AppStore): void {
  closeEpisode(store);
  if (window.location.hash === IMAGES_HASH) window.location.hash = '#/';
}
