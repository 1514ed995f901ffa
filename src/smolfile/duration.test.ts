import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './duration.js';

describe('Smolfile durations', () => {
  it.each([
    ['500ms', 500],
    ['5s', 5000],
    ['2m', 120_000],
    ['1h', 3_600_000],
    ['1m30s', 90_000],
    ['1h2m3s4ms', 3_723_004],
    ['0s', 0],
    ['10', 10_000], // a bare number is seconds, as smolvm reads it
  ])('reads %s as %i ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', ' 5s', '5 s', '5S', '1.5s', '-1s', 's', '5sec', '1s1m', '1s1s', '1d', '5s ', '99999999999999999h'])(
    'refuses %j',
    (text) => {
      expect(parseDuration(text)).toBeNull();
    },
  );

  it('writes durations back in the shortest form', () => {
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(500)).toBe('500ms');
    expect(formatDuration(90_000)).toBe('1m30s');
    expect(formatDuration(86_400_000)).toBe('24h');
    for (const text of ['1h2m3s4ms', '5s', '2m', '750ms']) expect(formatDuration(parseDuration(text) ?? -1)).toBe(text);
  });
});
