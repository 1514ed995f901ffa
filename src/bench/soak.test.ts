import { describe, expect, it } from 'vitest';
import { growthVerdict, type SoakSample } from './soak.js';

function run(fds: (t: number) => number): SoakSample[] {
  return Array.from({ length: 61 }, (_, i) => ({
    t_s: i * 5,
    disk_mib: 72,
    snapshots: 10,
    chain_depth: 8,
    engine_rss_mib: 70 + (i % 3),
    engine_fds: 25,
    vmhost_rss_mib: 66,
    vmhost_fds: fds(i * 5),
  }));
}

describe('growthVerdict', () => {
  it('passes flat series and names one that keeps growing', () => {
    expect(growthVerdict(run(() => 26)).filter((s) => s.unbounded)).toEqual([]);
    // one fd a checkpoint (1 s apart), as the soak run of 2026-12-02 saw in the vmhost
    const leak = growthVerdict(run((t) => 26 + t));
    expect(leak.filter((s) => s.unbounded).map((s) => s.series)).toEqual(['vmhost_fds']);
    expect(leak.find((s) => s.series === 'vmhost_fds')).toMatchObject({ min: 26, max: 326, slope_per_min: 60 });
  });

  it('leaves the warm-up out: filling up to keep is not growth', () => {
    expect(growthVerdict(run((t) => 26 + Math.min(t, 30))).filter((s) => s.unbounded)).toEqual([]);
  });
});
