import { describe, expect, it } from 'vitest';
import { median, p90, quantile } from './stats.js';

describe('benchmark statistics', () => {
  it('median of an odd count is the middle sample, whatever the order', () => {
    expect(median([5, 1, 3])).toBe(3);
  });

  it('median of an even count is the mean of the two middle samples', () => {
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });

  it('p90 interpolates between the closest ranks', () => {
    expect(p90([1, 2, 3, 4])).toBeCloseTo(3.7);
    const oneToTen = [10, 9, 8, 7, 6, 5, 4, 3, 2, 1];
    expect(p90(oneToTen)).toBeCloseTo(9.1);
    expect(median(oneToTen)).toBe(5.5);
  });

  it('p90 of twenty runs sits between the 18th and 19th fastest', () => {
    const samples = Array.from({ length: 20 }, (_, i) => i + 1);
    expect(p90(samples)).toBeCloseTo(18.1);
  });

  it('a single sample is its own median and p90', () => {
    expect(median([7])).toBe(7);
    expect(p90([7])).toBe(7);
  });

  it('quantile 0 and 1 are the minimum and the maximum', () => {
    expect(quantile([3, 1, 2], 0)).toBe(1);
    expect(quantile([3, 1, 2], 1)).toBe(3);
  });

  it('does not reorder the caller’s samples', () => {
    const samples = [3, 1, 2];
    median(samples);
    expect(samples).toEqual([3, 1, 2]);
  });

  it('refuses no samples, non-finite samples and a quantile outside [0, 1]', () => {
    expect(() => median([])).toThrow('quantile of no samples');
    expect(() => median([1, NaN])).toThrow('samples must be finite numbers');
    expect(() => quantile([1], 1.5)).toThrow('quantile must be between 0 and 1 (got 1.5)');
  });
});
