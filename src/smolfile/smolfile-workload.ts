// What runs in the guest, through its agent: the workload command, its environment, `init` and `[health]`
// (docs/smolfile.md, "What runs").
import type { ProblemList } from './smolfile-problems.js';
import {
  expected,
  readDuration,
  readInteger,
  readString,
  readStringArray,
  readTable,
  type TomlTable,
} from './toml-values.js';
import { formatKeyPath, type KeyPath } from './toml-locator.js';

/** Keys that need the guest agent, so a bare kernel cannot have them. */
export const AGENT_KEYS = ['entrypoint', 'cmd', 'env', 'workdir', 'user', 'init', 'health', 'volumes'] as const;

/** What runs in the guest, through the agent. */
export interface SmolfileWorkload {
  /** The workload command (Docker semantics); null: the image's default. */
  entrypoint: string[] | null;
  cmd: string[] | null;
  env: Record<string, string>;
  /** Absolute directory in the guest; null: the image's default. */
  workdir: string | null;
  /** User (or uid, with an optional `:group`) the workload and exec run as; null: root. */
  user: string | null;
  /** Shell commands run once, as root, on the first boot; the base snapshot is taken after them. */
  init: string[];
}

export interface SmolfileHealth {
  /** The check's argv, run in the guest; exit status 0 is healthy. */
  exec: string[];
  intervalMs: number;
  timeoutMs: number;
  /** How long after the guest is ready before the first check. */
  startupGraceMs: number;
  /** Consecutive failures before the VM counts as unhealthy. */
  retries: number;
}

export const HEALTH_DEFAULTS = { intervalMs: 10_000, timeoutMs: 5_000, startupGraceMs: 0, retries: 3 } as const;

const DAY_MS = 24 * 3_600_000;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const USER = /^[^\s:]+(:[^\s:]+)?$/;

/** `env` at `at` (`['env']` or `['dev', 'env']`): a name given twice in the one list is a warning, the last wins. */
function readEnv(problems: ProblemList, at: KeyPath, value: unknown): Record<string, string> | undefined {
  const entries = readStringArray(problems, at, value);
  if (!entries) return undefined;
  const env = new Map<string, string>();
  const firstIndex = new Map<string, number>();
  let ok = true;
  entries.forEach((entry, index) => {
    const equals = entry.indexOf('=');
    const name = equals < 0 ? entry : entry.slice(0, equals);
    if (equals < 0 || !ENV_NAME.test(name)) {
      const why = equals < 0 ? ' (no =)' : ' (a name is letters, digits and _, not starting with a digit)';
      const where = formatKeyPath([...at, index]);
      problems.error([...at, index], `\`${where}\`: expected "NAME=value", found ${JSON.stringify(entry)}${why}`);
      ok = false;
      return;
    }
    const first = firstIndex.get(name);
    if (first === undefined) firstIndex.set(name, index);
    else {
      const line = problems.where([...at, first]).line;
      problems.warning(
        [...at, index],
        `\`${formatKeyPath([...at, index])}\` sets ${name} again (first at line ${line}); the last one wins`,
      );
    }
    env.set(name, entry.slice(equals + 1));
  });
  return ok ? Object.fromEntries(env) : undefined;
}

function readWorkdir(problems: ProblemList, at: KeyPath, value: unknown): string | undefined {
  const dir = readString(problems, at, value, 'an absolute path in the guest');
  return dir === undefined || dir.startsWith('/') ? dir : expected(problems, at, 'an absolute path', value);
}

/** The keys of smolvm's `[dev]` profile that Smol Studio reads (`volumes` in smolfile-volumes.ts). */
export const DEV_KEYS = ['env', 'init', 'workdir', 'ports', 'volumes'] as const;

/**
 * The workload keys, with `[dev]` (`dev`, the table or `{}`) merged in as smolvm merges it
 * (src/cli/smolfile.rs, build_create_params): `dev.env` is appended to `env` (so a name in both takes the
 * `[dev]` value), a non-empty `dev.init` replaces `init`, `dev.workdir` replaces `workdir`. When a key is wrong the
 * problems say so and the caller discards the result; the fallbacks in it only keep its type simple.
 */
export function readWorkload(problems: ProblemList, document: TomlTable, dev: TomlTable = {}): SmolfileWorkload {
  const read = <T>(table: TomlTable, at: KeyPath, reader: (value: unknown) => T | undefined): T | null => {
    const key = at.at(-1) as string;
    return table[key] === undefined ? null : (reader(table[key]) ?? null);
  };
  const env = read(document, ['env'], (value) => readEnv(problems, ['env'], value));
  const devEnv = read(dev, ['dev', 'env'], (value) => readEnv(problems, ['dev', 'env'], value));
  const init = read(document, ['init'], (value) => readStringArray(problems, ['init'], value));
  const devInit = read(dev, ['dev', 'init'], (value) => readStringArray(problems, ['dev', 'init'], value));
  const workdir = read(document, ['workdir'], (value) => readWorkdir(problems, ['workdir'], value));
  const devWorkdir = read(dev, ['dev', 'workdir'], (value) => readWorkdir(problems, ['dev', 'workdir'], value));
  return {
    entrypoint: read(document, ['entrypoint'], (value) => readStringArray(problems, ['entrypoint'], value)),
    cmd: read(document, ['cmd'], (value) => readStringArray(problems, ['cmd'], value)),
    env: { ...env, ...devEnv },
    workdir: devWorkdir ?? workdir,
    user: read(document, ['user'], (value) => {
      const what = 'a user name or uid, optionally with :group';
      const name = readString(problems, ['user'], value, what);
      return name === undefined || USER.test(name) ? name : expected(problems, ['user'], what, value);
    }),
    init: devInit?.length ? devInit : (init ?? []),
  };
}

export function readHealth(problems: ProblemList, value: unknown): SmolfileHealth | undefined {
  const table = readTable(problems, ['health'], value);
  if (!table) return undefined;
  let exec: string[] | undefined;
  if (table.exec === undefined) {
    problems.error(
      ['health'],
      '`health.exec` is missing: a health check needs a command, such as ["test", "-e", "/ready"]',
    );
  } else {
    exec = readStringArray(problems, ['health', 'exec'], table.exec);
    if (exec?.length === 0) exec = expected(problems, ['health', 'exec'], 'a non-empty array of strings', table.exec);
  }
  const duration = (key: string, minMs: number, fallback: number) =>
    table[key] === undefined ? fallback : readDuration(problems, ['health', key], table[key], { minMs, maxMs: DAY_MS });
  const health = {
    exec,
    intervalMs: duration('interval', 1, HEALTH_DEFAULTS.intervalMs),
    timeoutMs: duration('timeout', 1, HEALTH_DEFAULTS.timeoutMs),
    startupGraceMs: duration('startup_grace', 0, HEALTH_DEFAULTS.startupGraceMs),
    retries:
      table.retries === undefined
        ? HEALTH_DEFAULTS.retries
        : readInteger(problems, ['health', 'retries'], table.retries, { min: 1, max: 1000 }),
  };
  if (Object.values(health).some((field) => field === undefined)) return undefined;
  return health as SmolfileHealth;
}
