// Command-line parsing shared by the commands: node:util parseArgs with errors rewritten to name the flag.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './errors.js';

function rewriteParseError(command: string, err: unknown): Error {
  const { code, message } = err as { code?: string; message: string };
  const quoted = /'([^']*)'/.exec(message)?.[1];
  switch (code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return new UsageError(command, `unknown option ${quoted ?? message}`);
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return new UsageError(command, `unexpected argument ${quoted ?? message}`);
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const flag = /(--?[\w-]+)/.exec(message)?.[1];
      if (!flag) return new UsageError(command, message);
      if (message.includes('does not take')) return new UsageError(command, `${flag} takes no value`);
      if (message.includes('ambiguous')) {
        return new UsageError(command, `${flag} needs a value (write ${flag}=-… for a value that starts with -)`);
      }
      return new UsageError(command, `${flag} needs a value`);
    }
    default:
      return err instanceof Error ? err : new Error(String(err));
  }
}

type FlagsConfig = NonNullable<ParseArgsConfig['options']>;

/** Parses flags only (no positionals); every unknown flag or stray argument is a UsageError. */
export function parseFlags<const O extends FlagsConfig>(command: string, args: string[], options: O) {
  try {
    return parseArgs({ args, options, strict: true as const, allowPositionals: false as const }).values;
  } catch (err) {
    throw rewriteParseError(command, err);
  }
}

/** Parses a decimal integer flag value and checks its range. */
export function parseIntegerFlag(
  command: string,
  flag: string,
  value: string | undefined,
  limits: { min: number; max: number; default: number },
): number {
  if (value === undefined) return limits.default;
  const n = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < limits.min || n > limits.max) {
    throw new UsageError(command, `${flag} must be an integer from ${limits.min} to ${limits.max} (got ${value})`);
  }
  return n;
}
