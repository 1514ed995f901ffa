// The replay timeline's zoom and pan: the time under the pointer stays put, the window never leaves the recording.
import { describe, expect, it } from 'vitest';
import { centreOn, keepInView, panBy, windowOf, zoomAround } from './timeline-view.js';

describe('replay timeline view', () => {
  it('zooming in keeps the anchor at the same fraction of the window', () => {
    const view = zoomAround(null, 100, 25, 0.5)!;
    expect(view.to - view.from).toBeCloseTo(50);
    expect((25 - view.from) / (view.to - view.from)).toBeCloseTo(0.25);
    const closer = zoomAround(view, 100, 25, 0.1)!;
    expect(closer.to - closer.from).toBeCloseTo(5);
    expect((25 - closer.from) / (closer.to - closer.from)).toBeCloseTo(0.25);
  });

  it('zooming out past the whole recording shows the whole of it again', () => {
    expect(zoomAround({ from: 10, to: 20 }, 100, 15, 20)).toBeNull();
    expect(windowOf(null, 100)).toEqual({ from: 0, to: 100 });
  });

  it('stops at a tenth of a second', () => {
    const view = zoomAround({ from: 10, to: 10.2 }, 100, 10.1, 0.01)!;
    expect(view.to - view.from).toBeCloseTo(0.1);
  });

  it('panning and centring stay inside the recording', () => {
    expect(panBy({ from: 10, to: 20 }, 100, -50)).toEqual({ from: 0, to: 10 });
    expect(panBy({ from: 10, to: 20 }, 100, 500)).toEqual({ from: 90, to: 100 });
    expect(centreOn({ from: 0, to: 10 }, 100, 50)).toEqual({ from: 45, to: 55 });
    expect(panBy(null, 100, 5)).toBeNull();
  });

  it('playing past the edge moves the window to keep the position in it', () => {
    expect(keepInView({ from: 0, to: 10 }, 100, 5)).toEqual({ from: 0, to: 10 });
    const moved = keepInView({ from: 0, to: 10 }, 100, 12)!;
    expect(moved.from).toBeCloseTo(11);
    expect(moved.to).toBeCloseTo(21);
  });
});
