// The crash-point harness's bounded run inside npm test (docs/engine.md, "Crash points"): every named point once, then a
// random kill, a random point and another random kill, in one data dir, each followed by the checks of src/torture/torture.ts (the next engine starts,
// the store checks clean, every snapshot restores and runs, no vmhost outlives its engine). `npm run torture` runs
// it longer.
import { describe, expect, it } from 'vitest';
import { CRASH_POINTS } from '../../src/engine/crash-points.js';
import { torture } from '../../src/torture/torture.js';

describe('crash points', () => {
  it('every kill, at each named point and at random moments, is survived', { timeout: 900_000 }, async () => {
    const lines: string[] = [];
    const report = await torture({ iterations: CRASH_POINTS.length + 3, seed: 20261202, log: (l) => lines.push(l) });
    expect(report.failures, lines.join('\n')).toEqual([]);
    // Each point was reached (a point no operation passes any more would test nothing).
    for (const point of CRASH_POINTS)
      expect(report.points[point].fired, `${point} never fired`).toBeGreaterThanOrEqual(1);
    expect(report.random.tried).toBe(2);
  });
});
