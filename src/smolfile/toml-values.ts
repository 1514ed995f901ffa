// Reading typed values out of parsed TOML, reporting what was expected and what was found at the value's key.
//
// @iarna/toml turns `2.0` and `2` into the same JavaScript number, and integers beyond 2^53 into (sometimes
// wrapped) bigints; the value's source text from the locator tells them apart and is what messages quote.
import { DURATION_EXAMPLES, formatDuration, parseDuration } from './duration.js';
import type { ProblemList } from './smolfile-problems.js';
import { formatKeyPath, type KeyPath } from './toml-locator.js';

export type TomlTable = { [key: string]: unknown };

export function isTable(value: unknown): value is TomlTable {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

const INTEGER_LITERAL = /^[+-]?(\d[\d_]*|0x[\da-fA-F_]+|0o[0-7_]+|0b[01_]+)$/;

function isInteger(value: unknown, raw: string | undefined): boolean {
  if (typeof value === 'bigint') return true;
  if (typeof value !== 'number') return false;
  return raw === undefined ? Number.isInteger(value) : INTEGER_LITERAL.test(raw);
}

function quote(text: string): string {
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

/** "a string \"2\"", "a float 2.0", "an array": the found half of a message. */
export function describeValue(value: unknown, raw?: string): string {
  if (typeof value === 'string') return `a string ${quote(raw ?? JSON.stringify(value))}`;
  if (typeof value === 'number' || typeof value === 'bigint') {
    return `${isInteger(value, raw) ? 'an integer' : 'a float'} ${quote(raw ?? String(value))}`;
  }
  if (typeof value === 'boolean') return `a boolean ${String(value)}`;
  if (value instanceof Date) return `a date-time ${quote(raw ?? value.toISOString())}`;
  if (Array.isArray(value)) return value.length > 0 && value.every(isTable) ? 'an array of tables' : 'an array';
  return 'a table';
}

const name = (path: KeyPath) => `\`${formatKeyPath(path)}\``;

/** Reports "`key`: expected …, found …" at the key. */
export function expected(problems: ProblemList, path: KeyPath, what: string, value: unknown): undefined {
  problems.error(path, `${name(path)}: expected ${what}, found ${describeValue(value, problems.raw(path))}`);
  return undefined;
}

export function readTable(problems: ProblemList, path: KeyPath, value: unknown): TomlTable | undefined {
  return isTable(value) ? value : expected(problems, path, `a table ([${formatKeyPath(path)}])`, value);
}

export function readString(problems: ProblemList, path: KeyPath, value: unknown, what = 'a string') {
  return typeof value === 'string' ? value : expected(problems, path, what, value);
}

/** An array whose every element is a string; each element that is not is reported at its own line. */
export function readStringArray(problems: ProblemList, path: KeyPath, value: unknown): string[] | undefined {
  if (!Array.isArray(value)) return expected(problems, path, 'an array of strings, such as ["a", "b"]', value);
  let ok = true;
  value.forEach((element, index) => {
    if (typeof element === 'string') return;
    expected(problems, [...path, index], 'a string', element);
    ok = false;
  });
  return ok ? (value as string[]) : undefined;
}

export function readInteger(
  problems: ProblemList,
  path: KeyPath,
  value: unknown,
  range: { min: number; max: number },
  what = 'an integer',
): number | undefined {
  const raw = problems.raw(path);
  const wanted = `${what} from ${range.min} to ${range.max}`;
  if (!isInteger(value, raw)) return expected(problems, path, wanted, value);
  if (typeof value !== 'number' || value < range.min || value > range.max) {
    problems.error(path, `${name(path)}: expected ${wanted}, found ${raw ?? String(value)}`);
    return undefined;
  }
  return value;
}

/** A duration string (duration.ts), in milliseconds, within the limits; `or` names other accepted values. */
export function readDuration(
  problems: ProblemList,
  path: KeyPath,
  value: unknown,
  limits: { minMs: number; maxMs: number; or?: string },
): number | undefined {
  const raw = problems.raw(path);
  const wanted = `a duration such as ${DURATION_EXAMPLES}${limits.or ? `, or ${limits.or}` : ''}`;
  if (typeof value !== 'string') {
    const hint = isInteger(value, raw) ? ` (write "${String(value)}s" for seconds)` : '';
    problems.error(path, `${name(path)}: expected ${wanted}, found ${describeValue(value, raw)}${hint}`);
    return undefined;
  }
  const ms = parseDuration(value);
  if (ms === null) return expected(problems, path, wanted, value);
  if (ms < limits.minMs || ms > limits.maxMs) {
    const range = `from ${formatDuration(limits.minMs)} to ${formatDuration(limits.maxMs)}`;
    problems.error(path, `${name(path)}: expected a duration ${range}, found ${raw ?? JSON.stringify(value)}`);
    return undefined;
  }
  return ms;
}
