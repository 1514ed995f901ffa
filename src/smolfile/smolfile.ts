// The Smolfile: a TOML file that says what an episode's VMs boot and run (docs/smolfile.md). This module parses one
// into a typed, normalized object with defaults applied and paths resolved, and collects every problem in the file
// (unknown keys, smolvm keys we do not support yet, wrong types, ranges, missing files), each at its line.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import TOML from '@iarna/toml';
import { readGuest, type SmolfileImage } from './smolfile-guest.js';
import { KNOWN_KEYS, UNSUPPORTED_SMOLVM_KEYS, suggestKey } from './smolfile-keys.js';
import { NETWORK_DEFAULTS, readNetwork, type SmolfileNetwork } from './smolfile-network.js';
import { readVolumes, type SmolfileVolume } from './smolfile-volumes.js';
import { ProblemList, type SmolfileProblem } from './smolfile-problems.js';
import {
  readHealth,
  readWorkload,
  AGENT_KEYS,
  DEV_KEYS,
  type SmolfileHealth,
  type SmolfileWorkload,
} from './smolfile-workload.js';
import { locateKeys, formatKeyPath, type KeyPath } from './toml-locator.js';
import { expected, isTable, readDuration, readInteger, readTable, type TomlTable } from './toml-values.js';
import { parseDuration } from './duration.js';
import { VM_LIMITS } from '../vmm/vm-options.js';

export type { SmolfileImage } from './smolfile-guest.js';
export type { SmolfileHealth } from './smolfile-workload.js';
export type { SmolfileNetwork, SmolfilePort } from './smolfile-network.js';
export type { SmolfileProblem } from './smolfile-problems.js';
export type { SmolfileVolume } from './smolfile-volumes.js';
export { formatProblem } from './smolfile-problems.js';

export interface SmolfileSnapshots {
  /** Checkpoint every this many milliseconds while running; null: only when asked (the default). */
  autoCheckpointMs: number | null;
  /** How many automatic checkpoints to keep; older automatic ones are deleted, checkpoints made by hand never. */
  keep: number;
}

/** A valid Smolfile with every default applied: what the engine boots. */
export interface Smolfile extends SmolfileWorkload {
  /** Absolute path of the Smolfile; relative paths in it were resolved from its directory. */
  path: string;
  /** The root filesystem and agent; null for a bare kernel (`kernel` and no `image`), booted as it is. */
  image: SmolfileImage | null;
  /** Absolute path of the kernel to boot; null: the image's kernel (the guest kernel `smol guest build` makes). */
  kernel: string | null;
  /** Absolute path of an initrd for a bare kernel; null: none. */
  initrd: string | null;
  /** Kernel command-line arguments added after the ones the engine sets; '' when none. */
  cmdline: string;
  cpus: number;
  memoryMiB: number;
  health: SmolfileHealth | null;
  snapshots: SmolfileSnapshots;
  /** `net`, `ports` and `[network]`: off unless `net = true`. */
  network: SmolfileNetwork;
  /** `volumes` (or a non-empty `dev.volumes`): host folders copied into disks of their own (docs/disks.md). */
  volumes: SmolfileVolume[];
}

export const SMOLFILE_DEFAULTS = {
  /** One vCPU boots fastest and makes forks cheapest; a microVM asks for more when its work needs them. */
  cpus: 1,
  /** Guest RAM is only backed as the guest touches it, so this costs what the guest uses, not 512 MiB. */
  memoryMiB: 512,
  snapshots: { autoCheckpointMs: null, keep: 10 },
} as const;

export const SMOLFILE_LIMITS = {
  cpus: { min: VM_LIMITS.cpus.min, max: VM_LIMITS.cpus.max },
  memoryMiB: { min: VM_LIMITS.memoryMiB.min, max: VM_LIMITS.memoryMiB.max },
  cmdlineMaxBytes: VM_LIMITS.cmdlineMaxBytes,
  autoCheckpointMs: { minMs: 1000, maxMs: 24 * 3_600_000 },
  keep: { min: 1, max: 10_000 },
} as const;

export interface SmolfileResult {
  /** The normalized Smolfile, or null when there is any error (warnings alone leave it). */
  smolfile: Smolfile | null;
  /** Errors and warnings in file order. */
  problems: SmolfileProblem[];
}

/**
 * Parses and checks a Smolfile's text. `path` is where the file is (it need not exist when only the text matters):
 * `kernel` and `initrd` are resolved from its directory and must exist. Nothing else outside the arguments is read.
 * `relativeFrom` overrides that directory; null refuses relative paths (a Smolfile given as text, with no directory).
 */
export function parseSmolfile(text: string, options: { path: string; relativeFrom?: string | null }): SmolfileResult {
  const source = text.startsWith('\ufeff') ? text.slice(1) : text;
  let document: TomlTable;
  try {
    document = TOML.parse(source) as TomlTable;
  } catch (err) {
    return { smolfile: null, problems: [syntaxProblem(err, source)] };
  }
  const problems = new ProblemList(locateKeys(source));
  const file = path.resolve(options.path);
  checkKeys(problems, [], document);

  const dir = options.relativeFrom === undefined ? path.dirname(file) : options.relativeFrom;
  const guest = readGuest(problems, document, dir);
  const cpus = optional(document.cpus, (v) => readInteger(problems, ['cpus'], v, SMOLFILE_LIMITS.cpus));
  const memoryMiB = optional(document.memory, (v) =>
    readInteger(problems, ['memory'], v, SMOLFILE_LIMITS.memoryMiB, 'a whole number of MiB'),
  );
  // smolvm's [dev] profile, merged into the keys it shadows by readWorkload and readNetwork (docs/smolfile.md).
  const dev = optional(document.dev, (v) => readTable(problems, ['dev'], v)) ?? {};
  if (document.image === undefined && document.kernel !== undefined) {
    const agentKeys: KeyPath[] = [
      ...AGENT_KEYS.filter((k) => document[k] !== undefined).map((k) => [k]),
      ...DEV_KEYS.filter((k) => k !== 'ports' && dev[k] !== undefined).map((k) => ['dev', k]),
    ];
    for (const at of agentKeys) {
      const key = formatKeyPath(at);
      problems.error(
        at,
        `\`${key}\` needs the guest agent, which comes with an image, but this Smolfile boots a bare kernel ` +
          `(\`kernel\` and no \`image\`); add image = "builtin" or remove \`${key}\``,
      );
    }
  }
  const workload = readWorkload(problems, document, dev);
  const health = optional(document.health, (v) => readHealth(problems, v));
  const snapshots = optional(document.snapshots, (v) => readSnapshots(problems, v));
  const network = readNetwork(problems, document, dev);
  const volumes = readVolumes(problems, document, dev, dir);
  if (document.service !== undefined) readService(problems, document.service);

  if (problems.hasErrors()) return { smolfile: null, problems: problems.list() };
  const smolfile: Smolfile = {
    path: file,
    ...guest,
    cpus: cpus ?? SMOLFILE_DEFAULTS.cpus,
    memoryMiB: memoryMiB ?? SMOLFILE_DEFAULTS.memoryMiB,
    ...workload,
    health: health ?? null,
    snapshots: snapshots ?? { ...SMOLFILE_DEFAULTS.snapshots },
    network: network ?? NETWORK_DEFAULTS,
    volumes: volumes ?? [],
  };
  return { smolfile, problems: problems.list() };
}

const READ_ERRORS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EISDIR: 'is a directory',
  EACCES: 'permission denied',
};

/** Reads and parses a Smolfile. Throws only when the file cannot be read; everything else is a problem. */
export async function loadSmolfile(file: string): Promise<SmolfileResult> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    const reason = ownValue(READ_ERRORS, code) ?? (err as Error).message;
    throw new Error(`${file}: ${reason}`, { cause: err });
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    // Where the first bad byte is: the first replacement character in a lossy decoding (good enough for a message).
    const lossy = bytes.toString('utf8');
    const before = lossy.slice(0, Math.max(0, lossy.indexOf('\ufffd'))).split('\n');
    const line = before.length;
    const column = (before.at(-1)?.length ?? 0) + 1;
    const message = 'the file is not UTF-8 text (a Smolfile is TOML, which must be UTF-8)';
    return { smolfile: null, problems: [{ severity: 'error', key: '', line, column, message }] };
  }
  return parseSmolfile(text, { path: file });
}

function optional<T>(value: unknown, read: (value: unknown) => T | undefined): T | undefined {
  return value === undefined ? undefined : read(value);
}

/**
 * @iarna/toml's errors carry a 0-based line and column, and a message that repeats them with an excerpt. For a key
 * defined twice it points past the value; we point at the key instead, and name it.
 */
function syntaxProblem(err: unknown, source: string): SmolfileProblem {
  const { line = 0, col = 0, message } = err as { line?: number; col?: number; message?: string };
  const text = String(message ?? err)
    .split('\n')[0]
    ?.replace(/ at row \d+, col \d+, pos \d+:$/, '');
  let reason = text ? text.charAt(0).toLowerCase() + text.slice(1) : 'cannot parse';
  let column = col + 1;
  const lineText = source.split('\n')[line] ?? '';
  const redefined = /^(\s*)\[*\s*([^=\]]*?)\s*[=\]]/.exec(lineText);
  if (text === "Can't redefine existing key" && redefined?.[1] !== undefined && redefined[2]) {
    column = redefined[1].length + 1;
    reason = `\`${redefined[2]}\` is already defined (a key or table can be defined only once)`;
  }
  return { severity: 'error', key: '', line: line + 1, column, message: `TOML syntax error: ${reason}` };
}

/** `record[key]` without what objects inherit: a Smolfile key named `constructor` is just an unknown key. */
function ownValue<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/** Unknown keys and smolvm keys we do not support, in the top-level table and in the tables we know. */
function checkKeys(problems: ProblemList, table: KeyPath, value: TomlTable): void {
  const known = ownValue(KNOWN_KEYS, formatKeyPath(table)) ?? [];
  for (const key of Object.keys(value)) {
    const keyPath = [...table, key];
    if (known.includes(key)) {
      const child = value[key];
      if (ownValue(KNOWN_KEYS, formatKeyPath(keyPath)) && isTable(child)) checkKeys(problems, keyPath, child);
      continue;
    }
    const instead = ownValue(UNSUPPORTED_SMOLVM_KEYS, formatKeyPath(keyPath));
    if (instead !== undefined) {
      const name = formatKeyPath(keyPath);
      problems.error(keyPath, `smolvm's \`${name}\` is not supported by Smol Studio yet: ${instead}`);
      continue;
    }
    const suggestion = suggestKey(key, known);
    const where = table.length === 0 ? '' : ` in [${formatKeyPath(table)}]`;
    const hint = suggestion
      ? `; did you mean \`${formatKeyPath([...table, suggestion])}\`?`
      : table.length === 0
        ? ' (docs/smolfile.md lists the keys)'
        : ` (its keys: ${known.join(', ')})`;
    problems.error(keyPath, `unknown key \`${formatKeyPath(keyPath)}\`${where}${hint}`);
  }
}

/**
 * smolvm's `[service]`: the port (`port`, or its other name `listen`) and protocol a deployed service listens on.
 * smolvm reads it only to deploy, never to run a machine, and Smol Studio does not deploy, so it has no effect: its
 * values are checked, and a warning says so.
 */
function readService(problems: ProblemList, value: unknown): void {
  const table = readTable(problems, ['service'], value);
  if (!table) return;
  for (const key of ['port', 'listen'] as const) {
    if (table[key] !== undefined) readInteger(problems, ['service', key], table[key], { min: 1, max: 65535 }, 'a port');
  }
  const protocol = table.protocol;
  if (protocol !== undefined && protocol !== 'http' && protocol !== 'tcp') {
    expected(problems, ['service', 'protocol'], '"http" or "tcp"', protocol);
  }
  problems.warning(
    ['service'],
    "`[service]` is smolvm's deployment metadata and has no effect in Smol Studio, which does not deploy " +
      'services; forward the port with `ports` (or `[dev] ports`) to reach it from the host',
  );
}

function readSnapshots(problems: ProblemList, value: unknown): SmolfileSnapshots | undefined {
  const table = readTable(problems, ['snapshots'], value);
  if (!table) return undefined;
  let autoCheckpointMs: number | null | undefined = SMOLFILE_DEFAULTS.snapshots.autoCheckpointMs;
  const auto = table.auto_checkpoint;
  if (auto === 'off' || auto === 0 || (typeof auto === 'string' && parseDuration(auto) === 0)) {
    autoCheckpointMs = null;
  } else if (auto !== undefined) {
    const limits = { ...SMOLFILE_LIMITS.autoCheckpointMs, or: '"off"' };
    autoCheckpointMs = readDuration(problems, ['snapshots', 'auto_checkpoint'], auto, limits);
  }
  const keep = optional(table.keep, (v) => readInteger(problems, ['snapshots', 'keep'], v, SMOLFILE_LIMITS.keep));
  if (keep !== undefined && autoCheckpointMs === null) {
    problems.warning(
      ['snapshots', 'keep'],
      '`snapshots.keep` has no effect while `snapshots.auto_checkpoint` is off: it limits automatic checkpoints only',
    );
  }
  if (autoCheckpointMs === undefined || (table.keep !== undefined && keep === undefined)) return undefined;
  return { autoCheckpointMs, keep: keep ?? SMOLFILE_DEFAULTS.snapshots.keep };
}
