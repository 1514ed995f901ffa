import { describe, expect, it } from 'vitest';
import { applyPullEvent, layerFraction, layerLabel, noProgress } from './pull-progress.js';

const layer = (index: number, status: 'waiting' | 'downloading' | 'done', received = 0, total = 100) => ({
  index,
  digest: `sha256:${String(index).repeat(64)}`,
  status,
  received,
  total,
});
const kib = (bytes: number) => `${bytes} B`;

describe('a pull’s progress from image.pull events', () => {
  it('keeps each layer by index and the latest step', () => {
    let progress = applyPullEvent(noProgress, { type: 'image.pull', reference: 'r', step: 'resolve', detail: 'r' });
    progress = applyPullEvent(progress, { type: 'image.pull', reference: 'r', layer: layer(1, 'waiting') });
    progress = applyPullEvent(progress, { type: 'image.pull', reference: 'r', layer: layer(0, 'downloading', 40) });
    progress = applyPullEvent(progress, { type: 'image.pull', reference: 'r', layer: layer(0, 'downloading', 90) });
    expect(progress.step).toBe('resolve');
    expect(progress.layers.map((l) => [l.index, l.status, l.received])).toEqual([
      [0, 'downloading', 90],
      [1, 'waiting', 0],
    ]);
    expect(layerLabel(progress.layers[0]!, kib)).toBe('downloading 90 B of 100 B');
    expect(progress.layers.map(layerFraction)).toEqual([0.9, 0]);
    expect(layerFraction(layer(2, 'done'))).toBe(1);
    expect(layerFraction(layer(3, 'downloading', 5, 0))).toBe(0);
  });
});
