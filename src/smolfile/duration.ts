// Durations in a Smolfile: strings such as "500ms", "10s", "2m", "1h" or "1m30s" (docs/smolfile.md).

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** What a duration looks like, for error messages. */
export const DURATION_EXAMPLES = '"500ms", "10s", "2m" or "1m30s"';

/**
 * Parses a duration string into milliseconds, or returns null when it is not one. A duration is one or more
 * `<integer><unit>` parts with units ms, s, m and h, largest first (`"1h30m"`, `"2s500ms"`). A bare integer
 * (`"10"`) means seconds, as smolvm reads it.
 */
export function parseDuration(text: string): number | null {
  if (/^\d+$/.test(text)) return safe(Number(text) * 1000);
  if (!/^(\d+(ms|s|m|h))+$/.test(text)) return null;
  let total = 0;
  let previousUnitMs = Infinity;
  for (const [, digits, unit] of text.matchAll(/(\d+)(ms|s|m|h)/g)) {
    const unitMs = UNIT_MS[unit as keyof typeof UNIT_MS];
    if (unitMs >= previousUnitMs) return null; // "1s1s" or "1s1m": each unit once, largest first
    previousUnitMs = unitMs;
    total += Number(digits) * unitMs;
  }
  return safe(total);
}

function safe(ms: number): number | null {
  return Number.isSafeInteger(ms) ? ms : null;
}

/** Writes milliseconds back as the shortest duration string: 90000 → "1m30s", 500 → "500ms", 0 → "0s". */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  let rest = ms;
  let text = '';
  for (const [unit, unitMs] of [
    ['h', UNIT_MS.h],
    ['m', UNIT_MS.m],
    ['s', UNIT_MS.s],
    ['ms', UNIT_MS.ms],
  ] as const) {
    const count = Math.floor(rest / unitMs);
    if (count > 0) text += `${count}${unit}`;
    rest -= count * unitMs;
  }
  return text;
}
