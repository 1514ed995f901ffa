// `volumes` and `[dev] volumes` (docs/smolfile.md, "volumes"): smolvm's "HOST:GUEST[:ro]" entries. Each host folder,
// relative to the Smolfile, becomes a disk of its own in the guest, mounted at GUEST (docs/disks.md, "Volumes").
import { realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import type { ProblemList } from './smolfile-problems.js';
import { relativeRefused } from './smolfile-guest.js';
import { readStringArray, type TomlTable } from './toml-values.js';
import { formatKeyPath, type KeyPath } from './toml-locator.js';
import { VM_LIMITS } from '../vmm/vm-options.js';
import { smolHomeDir } from '../smol-dirs.js';

export interface SmolfileVolume {
  /** The host folder, absolute (resolved from the Smolfile's directory). */
  host: string;
  /** Where the guest mounts it: an absolute path, normalized, not `/`. */
  guest: string;
  /** `:ro`: mounted read-only, and the disk refuses writes. */
  readOnly: boolean;
}

/** At most this many volumes: the VMM's disks besides the root disk (VM_MAX_VOLUMES). */
export const MAX_VOLUMES = VM_LIMITS.volumes;

const real = (file: string) => {
  try {
    return realpathSync(file);
  } catch {
    return path.resolve(file);
  }
};
const within = (inner: string, outer: string) =>
  inner === outer || inner.startsWith(outer.endsWith('/') ? outer : `${outer}/`);

/**
 * Why a folder cannot be a volume, or null: the host's root, or the engine's data dir (SMOL_HOME), a folder in it or
 * one holding it (its image would copy the snapshots and disks, and a running engine changes them meanwhile).
 */
export function refusedFolder(host: string, env: NodeJS.ProcessEnv = process.env): string | null {
  const folder = real(host);
  if (folder === '/') return "is the host's whole file system: a volume is a project's folder";
  const home = real(smolHomeDir(env));
  if (within(folder, home) || within(home, folder)) {
    const how = folder === home ? 'is' : within(folder, home) ? 'is inside' : 'holds';
    return `${how} the engine's data dir ${home} (SMOL_HOME): a volume of it would copy the snapshots and disks`;
  }
  return null;
}

/** One entry, or the reason it is wrong. */
function parseEntry(entry: string, dir: string | null): SmolfileVolume | string {
  const parts = entry.split(':');
  let mode = 'rw';
  if (parts.length === 3) mode = parts.pop()!;
  if (parts.length !== 2 || !parts[0] || !parts[1]) {
    return `expected "HOST:GUEST" or "HOST:GUEST:ro", found ${JSON.stringify(entry)}`;
  }
  if (mode !== 'ro' && mode !== 'rw') return `the mode after GUEST is "ro" or "rw", found ${JSON.stringify(mode)}`;
  const [hostPart, guestPart] = parts as [string, string];
  if (!guestPart.startsWith('/')) return `the guest path ${JSON.stringify(guestPart)} is not absolute`;
  const guest = path.posix.normalize(guestPart).replace(/\/+$/, '');
  if (guest === '') return 'the guest path is `/`: a volume cannot replace the root';
  const relative = relativeRefused(hostPart, dir);
  if (relative) return `the host folder ${relative}`;
  const host = path.resolve(dir ?? '/', hostPart);
  let info;
  try {
    info = statSync(host);
  } catch {
    return `the host folder ${hostPart} (${host}) does not exist`;
  }
  if (!info.isDirectory()) return `${hostPart} (${host}) is not a directory: a volume is a folder`;
  const refused = refusedFolder(host);
  if (refused) return `${hostPart} (${host}) ${refused}`;
  return { host, guest, readOnly: mode === 'ro' };
}

function readList(
  problems: ProblemList,
  at: KeyPath,
  value: unknown,
  dir: string | null,
): SmolfileVolume[] | undefined {
  const entries = readStringArray(problems, at, value);
  if (!entries) return undefined;
  const volumes: SmolfileVolume[] = [];
  const firstAt = new Map<string, number>();
  let ok = true;
  entries.forEach((entry, index) => {
    const where = [...at, index];
    const parsed = parseEntry(entry, dir);
    if (typeof parsed === 'string') {
      problems.error(where, `\`${formatKeyPath(where)}\`: ${parsed}`);
      ok = false;
      return;
    }
    const first = firstAt.get(parsed.guest);
    if (first !== undefined) {
      const line = problems.where([...at, first]).line;
      problems.error(
        where,
        `\`${formatKeyPath(where)}\`: ${parsed.guest} is mounted already (\`${formatKeyPath([...at, first])}\`, ` +
          `line ${line}); each guest path takes one volume`,
      );
      ok = false;
      return;
    }
    firstAt.set(parsed.guest, index);
    volumes.push(parsed);
  });
  if (ok && volumes.length > MAX_VOLUMES) {
    problems.error(at, `\`${formatKeyPath(at)}\` has ${volumes.length} volumes; at most ${MAX_VOLUMES} fit`);
    return undefined;
  }
  return ok ? volumes : undefined;
}

/**
 * `volumes`, with `dev.volumes` merged as the other lists of the profile are (as `ports`): a non-empty
 * `dev.volumes` replaces `volumes`, an empty one keeps them. Both are checked whichever is used.
 */
export function readVolumes(
  problems: ProblemList,
  document: TomlTable,
  dev: TomlTable,
  dir: string | null,
): SmolfileVolume[] | undefined {
  const top = document.volumes === undefined ? [] : readList(problems, ['volumes'], document.volumes, dir);
  const fromDev = dev.volumes === undefined ? [] : readList(problems, ['dev', 'volumes'], dev.volumes, dir);
  if (!top || !fromDev) return undefined;
  return fromDev.length > 0 ? fromDev : top;
}
