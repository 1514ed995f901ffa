import { describe, expect, it } from 'vitest';
import type { VmTrace } from '../vmm/vm.js';
import { formatTraceBreakdown, traceBreakdown } from './trace.js';

const trace = (steps: [string, number, number][], extra: Partial<VmTrace> = {}): VmTrace => ({
  steps: steps.map(([step, ms, kvmIoctls]) => ({ step, ms, kvmIoctls })),
  totalMs: steps.reduce((a, [, ms]) => a + ms, 0),
  kvmIoctls: steps.reduce((a, [, , n]) => a + n, 0),
  startMs: 4,
  firstEntryMs: 5,
  firstOutputMs: null,
  ...extra,
});

describe('trace breakdown', () => {
  it('takes the median of each step in the order steps first appear, a missing step counting 0', () => {
    const b = traceBreakdown(
      [
        trace([
          ['a', 1, 2],
          ['b', 3, 1],
        ]),
        trace([
          ['a', 2, 2],
          ['c', 1, 0],
          ['b', 5, 1],
        ]),
        trace([
          ['a', 3, 2],
          ['b', 4, 1],
        ]),
      ],
      [5, 9, 9],
    );
    expect(b.steps.map((s) => [s.step, s.p50_ms, s.kvmIoctls])).toEqual([
      ['a', 2, 2],
      ['b', 4, 1],
      ['c', 0, 0],
    ]);
    expect(b.nativeTotal_p50_ms).toBe(7);
    expect(b.afterNative_p50_ms).toBe(1);
    expect(b.firstEntry_p50_ms).toBe(5);
    expect(b.firstOutput_p50_ms).toBeNull();
  });

  it('prints one line per step under its metric', () => {
    const lines = formatTraceBreakdown(traceBreakdown([trace([['memory slots', 7.25, 1]])]));
    expect(lines[0]).toMatch(/step \(p50 of 1\)\s+ms\s+ioctls/);
    expect(lines).toContainEqual(expect.stringMatching(/^ {4}memory slots\s+7\.250\s+1$/));
  });

  it('refuses to summarize no traces', () => {
    expect(() => traceBreakdown([])).toThrow('at least one trace');
  });
});
