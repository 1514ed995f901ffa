// The metrics history's arithmetic: CPU time deltas into percentages, new instances starting over, bounded history.
import { describe, expect, it } from 'vitest';
import { METRICS_HISTORY, MetricsHistory } from './metrics.js';

const memory = { guestBytes: 16 << 20, residentBytes: 4 << 20, privateBytes: 4 << 20, sharedBytes: 0 };
const raw = (instance: string, cpuNs: number) => [{ vm: 'vm-a', instance, cpuNs, memory }];

describe('MetricsHistory', () => {
  it('turns CPU time between two samples into a percentage of one CPU', () => {
    const history = new MetricsHistory();
    expect(history.add(raw('vm-a#1', 0), 10_000)).toEqual([]); // the first sample is only a baseline
    const [point] = history.add(raw('vm-a#1', 1.5e9), 12_000); // 1.5 s of CPU in 2 s
    expect(point?.vm).toBe('vm-a');
    expect(point?.sample.cpuPercent).toBeCloseTo(75);
    expect(point?.sample.at).toBe(new Date(12_000).toISOString());
    expect(point?.sample.memory).toEqual(memory);
    const [two] = history.add(raw('vm-a#1', 5.5e9), 14_000); // two vCPUs busy: 200 %
    expect(two?.sample.cpuPercent).toBeCloseTo(200);
    expect(history.samples('vm-a')).toHaveLength(2);
  });

  it('starts over when the VM gets a new native instance (restore, reset), whose CPU clock restarts', () => {
    const history = new MetricsHistory();
    history.add(raw('vm-a#1', 9e9), 0);
    expect(history.add(raw('vm-a#2', 1e8), 2000)).toEqual([]);
    expect(history.add(raw('vm-a#2', 3e8), 4000)[0]?.sample.cpuPercent).toBeCloseTo(10);
  });

  it('keeps a bounded history, and forgets a removed VM', () => {
    const history = new MetricsHistory();
    for (let i = 0; i <= METRICS_HISTORY + 10; i++) history.add(raw('vm-a#1', i * 1e8), i * 1000);
    const samples = history.samples('vm-a');
    expect(samples).toHaveLength(METRICS_HISTORY);
    expect(samples.at(-1)?.at).toBe(new Date((METRICS_HISTORY + 10) * 1000).toISOString());
    history.remove('vm-a');
    expect(history.samples('vm-a')).toEqual([]);
  });
});
