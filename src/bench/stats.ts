// Summary statistics for benchmark samples.

/**
 * The q-quantile (0 ≤ q ≤ 1) with linear interpolation between the closest ranks (type 7, the default of numpy and
 * R): the median of [1, 2, 3, 4] is 2.5, its p90 is 3.7.
 */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) throw new RangeError('quantile of no samples');
  if (!(q >= 0 && q <= 1)) throw new RangeError(`quantile must be between 0 and 1 (got ${q})`);
  if (samples.some((x) => !Number.isFinite(x))) throw new RangeError('samples must be finite numbers');
  const sorted = [...samples].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const above = Math.ceil(position);
  const low = sorted[below]!;
  return low + (sorted[above]! - low) * (position - below);
}

export function median(samples: readonly number[]): number {
  return quantile(samples, 0.5);
}

export function p90(samples: readonly number[]): number {
  return quantile(samples, 0.9);
}

/** One figure measured on our VMM and QEMU alike: both medians, p90s and samples (to 3 decimals), ours / QEMU. */
export interface PairedMetric<Unit extends string> {
  metric: string;
  unit: Unit;
  ours: { p50: number; p90: number; samples: number[] };
  qemu: { p50: number; p90: number; samples: number[] };
  /** Ours divided by QEMU's, at the median. */
  ratio: number;
}

export function pairedMetric<Sample, Unit extends string>(
  name: string,
  unit: Unit,
  ours: readonly Sample[],
  qemu: readonly Sample[],
  of: (s: Sample) => number,
): PairedMetric<Unit> {
  const round = (x: number) => Math.round(x * 1000) / 1000;
  const stats = (samples: number[]) => ({
    p50: round(median(samples)),
    p90: round(p90(samples)),
    samples: samples.map(round),
  });
  const [a, b] = [stats(ours.map(of)), stats(qemu.map(of))];
  return { metric: name, unit, ours: a, qemu: b, ratio: round(a.p50 / b.p50) };
}
