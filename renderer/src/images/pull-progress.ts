// A pull's progress as the images view shows it, from the engine's image.pull events (src/api/image-routes.ts):
// the step it is at, and each layer's state as `docker pull` shows it (waiting, downloading n of m, cached,
// extracting, done). Pure, so a unit test feeds it events.
import type { EngineEvent } from '../../../src/api/schema.js';

type PullEvent = Extract<EngineEvent, { type: 'image.pull' }>;
export type LayerState = NonNullable<PullEvent['layer']>;

export interface PullProgress {
  step: string | null;
  detail: string | null;
  /** By index, in the image's order. */
  layers: LayerState[];
}

export const noProgress: PullProgress = { step: null, detail: null, layers: [] };

export function applyPullEvent(progress: PullProgress, event: PullEvent): PullProgress {
  if (event.layer) {
    const layers = [...progress.layers];
    layers[event.layer.index] = event.layer;
    return { ...progress, layers };
  }
  return { ...progress, step: event.step ?? progress.step, detail: event.detail ?? null };
}

/** A layer's line: `downloading 1.2 MiB of 3.0 MiB`, `cached`, `done`. */
export function layerLabel(layer: LayerState, format: (bytes: number) => string): string {
  switch (layer.status) {
    case 'downloading':
      return `downloading ${format(layer.received)} of ${format(layer.total)}`;
    case 'downloaded':
      return `downloaded ${format(layer.total)}`;
    default:
      return layer.status;
  }
}

/** How far a layer is, 0…1: downloading counts its bytes, cached and later count as whole. */
export function layerFraction(layer: LayerState): number {
  if (layer.status === 'waiting') return 0;
  if (layer.status === 'downloading') return layer.total > 0 ? Math.min(layer.received / layer.total, 1) : 0;
  return 1;
}
