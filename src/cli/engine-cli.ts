// What the engine's commands share: parsing with positionals, a connected SDK client, output as text or JSON, and
// exit statuses that mean something (README, "The engine and its CLI").
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ApiClientError } from '../api/api-client.js';
import { Smol } from '../../sdk/typescript/smol.js';
import { CommandError, UsageError } from './errors.js';

/** Exit statuses of the engine commands: 0 done, 1 failed, 2 usage, 3 not found, 4 wrong state, 5 no engine. */
export const EXIT = { failed: 1, usage: 2, notFound: 3, conflict: 4, noEngine: 5 } as const;

type FlagsConfig = NonNullable<ParseArgsConfig['options']>;

/** `--json` and `--help`, which every engine command takes. */
export const JSON_FLAG = { json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } } as const;

/** Prints `text` when `help` was asked for; true then. */
export function helpOr(help: boolean, text: string): boolean {
  if (help) process.stdout.write(text);
  return help;
}

export function parseCommand<const O extends FlagsConfig>(
  command: string,
  argv: string[],
  options: O,
  positionals: { min: number; max: number; names: string },
) {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options, strict: true as const, allowPositionals: true as const });
  } catch (error) {
    const message = (error as Error).message.replace(/^.*?'(-[^']*)'.*$/s, 'unknown option $1');
    throw new UsageError(command, message);
  }
  const help = (parsed.values as Record<string, unknown>).help === true;
  if (!help && parsed.positionals.length < positionals.min) {
    throw new UsageError(command, `expected ${positionals.names}`);
  }
  if (parsed.positionals.length > positionals.max) {
    throw new UsageError(command, `unexpected argument ${parsed.positionals[positionals.max]}`);
  }
  return { flags: parsed.values, args: parsed.positionals, help };
}

/** Runs `work` with a client of the engine (started when none runs); API errors become exit statuses. */
export async function withEngine<T>(work: (smol: Smol) => Promise<T>): Promise<T> {
  let smol: Smol;
  try {
    smol = await Smol.connect();
  } catch (error) {
    throw new CommandError((error as Error).message, EXIT.noEngine);
  }
  try {
    return await work(smol);
  } catch (error) {
    if (error instanceof ApiClientError) {
      const status = error.status === 404 ? EXIT.notFound : error.status === 409 ? EXIT.conflict : EXIT.failed;
      throw new CommandError(error.message, status);
    }
    throw error;
  }
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Rows as aligned columns under a header. */
export function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  process.stdout.write(`${[line(header), ...rows.map(line)].join('\n')}\n`);
}

/** "3m 12s", "2h 05m": how long since `since`. */
export function age(since: string | null, now = Date.now()): string {
  if (!since) return '-';
  const seconds = Math.max(0, Math.floor((now - Date.parse(since)) / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m ${String(seconds % 60).padStart(2, '0')}s`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours}h ${String(minutes % 60).padStart(2, '0')}m`;
  return `${Math.floor(hours / 24)}d`;
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}
