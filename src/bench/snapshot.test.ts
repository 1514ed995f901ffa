import { describe, expect, it } from 'vitest';
import { memAvailableBytes, metric } from './snapshot.js';

describe('snapshot benchmark figures', () => {
  it('reads MemAvailable from /proc/meminfo text, in bytes', () => {
    const meminfo = 'MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:    2048 kB\n';
    expect(memAvailableBytes(meminfo)).toBe(2048 * 1024);
    expect(() => memAvailableBytes('MemTotal: 1 kB\n')).toThrow('no MemAvailable in /proc/meminfo');
  });

  it('says whether a median met its target, and keeps the inputs', () => {
    const met = metric('restore', [3, 4, 5], { memoryMiB: 256 }, { targetMs: 5 });
    expect(met).toMatchObject({ p50_ms: 4, inputs: { memoryMiB: 256 }, target: { p50_ms: 5, met: true } });
    expect(metric('fork', [6, 7], { memoryMiB: 256 }, { targetMs: 5 }).target).toEqual({ p50_ms: 5, met: false });
    expect(metric('write', [1], {})).not.toHaveProperty('target');
  });
});
