import { describe, expect, it } from 'vitest';
import type { MetricSample } from '../../../src/api/schema.js';
import { KEPT, MetricsStore, summed } from './metrics.js';

const sample = (seconds: number, cpuPercent: number, residentMiB: number): MetricSample => ({
  at: new Date(Date.UTC(2026, 11, 1, 6, 0, seconds)).toISOString(),
  cpuPercent,
  memory: { guestBytes: 16 << 20, residentBytes: residentMiB << 20, privateBytes: 0, sharedBytes: 0 },
});

describe('metrics for the sparklines', () => {
  it('keeps the newest samples per VM, skips repeats, and tells only that VM’s listeners', () => {
    const store = new MetricsStore();
    let told = 0;
    store.subscribe('vm-a', () => told++);
    for (let i = 0; i < KEPT + 10; i++) store.add('vm-a', sample(i * 2, i, 1));
    store.add('vm-a', sample(0, 99, 1)); // older than the newest: already had it
    store.add('vm-b', sample(1, 5, 1));
    expect(store.samples('vm-a')).toHaveLength(KEPT);
    expect(store.samples('vm-a')[0]!.cpuPercent).toBe(10);
    expect(told).toBe(KEPT + 10);
  });

  it('takes an episode’s cgroup counters instead of the sum when asked and they are there', () => {
    const counted = (at: number, cpu: number, mib: number) => ({
      ...sample(at, 1, 1),
      cgroup: { cpuPercent: cpu, memoryBytes: mib * (1 << 20), memoryLimitBytes: 240 * (1 << 20), oomKills: 0 },
    });
    const series = [
      [counted(0, 30, 70), sample(2, 5, 2)],
      [counted(0, 30, 70), sample(2, 5, 2)],
    ];
    expect(summed(series, { fromCgroup: true }).map((p) => [p.cpu, p.memory / (1 << 20), p.limit])).toEqual([
      [30, 70, 240 * (1 << 20)],
      [10, 4, null],
    ]);
    expect(summed(series).map((p) => [p.cpu, p.memory / (1 << 20), p.limit])).toEqual([
      [2, 2, null],
      [10, 4, null],
    ]);
  });

  it('sums an episode’s VMs per moment', () => {
    const points = summed([
      [sample(0, 10, 4), sample(2, 20, 5)],
      [sample(0, 1, 1), sample(2, 2, 1), sample(4, 3, 1)],
    ]);
    expect(points.map((p) => [p.cpu, p.memory / (1 << 20)])).toEqual([
      [11, 5],
      [22, 6],
      [3, 1],
    ]);
  });
});
