// Reads a guest's ext4 disk for a diff (docs/diff.md) through e2fsprogs' debugfs in the reader sandbox
// (reader-sandbox.ts), never through the host kernel and never by parsing ext4 here: the engine only splits
// debugfs's bounded text output. Directories are listed breadth-first (one sandboxed debugfs per depth, `ls -p
// <inode>` for each directory at it, so no guest name is ever put on a command line), `stat` gives the times and
// fast symlink targets of the entries a diff must look closer at, and `dump` copies the few files a text diff needs.
import { closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { freshOutputDir, runSandboxed, type SandboxLimits, type SandboxResult } from './reader-sandbox.js';

export type EntryType = 'file' | 'dir' | 'symlink' | 'fifo' | 'socket' | 'char' | 'block' | 'unknown';

export interface DiskEntry {
  /** From the disk's root, without a leading slash ("etc/hostname"). */
  path: string;
  ino: number;
  type: EntryType;
  /** Permission bits with setuid, setgid and sticky (0o7777). */
  mode: number;
  uid: number;
  gid: number;
  size: number;
}

/** What `stat` adds for an entry a diff looks closer at. */
export interface EntryDetail {
  /** "seconds:nanoseconds" as the inode holds them, hex. */
  mtime: string;
  ctime: string;
  /** A fast symlink's target (a slow one's is dumped). */
  fastTarget?: string;
}

/** The disk cannot be read (not ext4, corrupt beyond what debugfs reads, over a cap); the message says which. */
export class DiskReadError extends Error {}

export interface ReaderOptions {
  limits: SandboxLimits;
  /** Entries listed before the listing stops with an error. */
  maxEntries: number;
  /** Directory depth listed before the listing stops with an error. */
  maxDepth: number;
}

const DEBUGFS = '/usr/sbin/debugfs';
const TYPES: Record<number, EntryType> = {
  0o040000: 'dir',
  0o100000: 'file',
  0o120000: 'symlink',
  0o010000: 'fifo',
  0o140000: 'socket',
  0o020000: 'char',
  0o060000: 'block',
};
/** One `ls -p` entry: /inode/mode/uid/gid/name/size/ (a name may hold newlines: lines are joined until one matches). */
const LS_ENTRY = /^\/(\d+)\/([0-7]{1,7})\/(\d+)\/(\d+)\/([\s\S]*)\/(\d*)\/$/;
/** An ls -p line is at most a 255-byte name and six numbers. */
const LS_LINE_BYTES = 320;

/**
 * A debugfs run of `commands` over `image`, its output split per command (in the order given). `work` is the
 * engine's own scratch directory, never shown to the reader: the commands file is written, before the sandbox
 * starts, into a new directory made in it for this run and shown read-only at /in; `out`, when given, is a
 * directory made by freshOutputDir for this run, shown writable at /out.
 */
async function debugfs(
  image: string,
  work: string,
  commands: string[],
  limits: SandboxLimits,
  out?: string,
): Promise<string[]> {
  await mkdir(work, { recursive: true, mode: 0o700 });
  const input = await mkdtemp(path.join(work, 'in-'));
  let result: SandboxResult;
  try {
    await chmod(input, 0o755); // nobody reads the commands; the directory above is the engine's alone
    await writeFile(path.join(input, 'commands'), commands.join('\n') + '\n', { flag: 'wx', mode: 0o644 });
    result = await runSandboxed({
      argv: [DEBUGFS, '-c', '-f', '/in/commands', '/disk'],
      image,
      mounts: [{ host: input, at: '/in' }, ...(out ? [{ host: out, at: '/out', writable: true }] : [])],
      scratch: work,
      limits,
    });
  } finally {
    await rm(input, { recursive: true, force: true }); // read-only to the reader: only what the engine wrote
  }
  failed(result, 'debugfs');
  const text = result.stdout.toString('utf8');
  // debugfs echoes each command as "debugfs: CMD" before its output; the next one expected ends this one's.
  const parts: string[] = [];
  let at = 0;
  for (let i = 0; i < commands.length; i++) {
    const head = `debugfs: ${commands[i]}\n`;
    const start = text.indexOf(head, at);
    if (start < 0) throw new DiskReadError(`debugfs stopped before "${commands[i]}"${stderrLine(result)}`);
    const next = i + 1 < commands.length ? text.indexOf(`debugfs: ${commands[i + 1]}\n`, start + head.length) : -1;
    const end = next < 0 ? text.length : next;
    parts.push(text.slice(start + head.length, end));
    at = end;
  }
  return parts;
}

function failed(result: SandboxResult, what: string): void {
  if (result.killed === 'timeout') throw new DiskReadError(`${what} passed its time limit`);
  if (result.killed === 'output') throw new DiskReadError(`${what} printed more than the reader's output cap`);
  if (result.code === null) throw new DiskReadError(`${what} was killed (a resource limit)${stderrLine(result)}`);
  // debugfs says a disk it cannot open on stderr, then "Filesystem not open" for every command.
  const open = /^.*while (trying to open|opening filesystem).*$/m.exec(result.stderr);
  if (open) throw new DiskReadError(open[0].replace(/^debugfs: /, '').replace('/disk', 'the disk'));
}

function stderrLine(result: SandboxResult): string {
  const line = result.stderr
    .split('\n')
    .find((l) => l.trim() && !l.startsWith('debugfs 1.'))
    ?.trim();
  return line ? ` (${line})` : '';
}

/** Every entry of the disk, by path; problems (unreadable directories, loops) are listed, not thrown. */
export async function listDisk(
  image: string,
  work: string,
  options: ReaderOptions,
): Promise<{ entries: Map<string, DiskEntry>; problems: string[] }> {
  const entries = new Map<string, DiskEntry>();
  const problems: string[] = [];
  const seenDirs = new Set<number>([2]);
  let level: Array<{ ino: number; path: string }> = [{ ino: 2, path: '' }];
  for (let depth = 0; level.length > 0; depth++) {
    if (depth > options.maxDepth) throw new DiskReadError(`directories nest deeper than ${options.maxDepth} levels`);
    const room = options.maxEntries - entries.size;
    const limits = {
      ...options.limits,
      outputBytes: Math.min(options.limits.outputBytes, room * LS_LINE_BYTES + 2 ** 20),
    };
    let parts: string[];
    try {
      parts = await debugfs(
        image,
        work,
        level.map((dir) => `ls -p <${dir.ino}>`),
        limits,
      );
    } catch (error) {
      if (error instanceof DiskReadError && /output cap/.test(error.message)) throw tooMany(options.maxEntries);
      throw error;
    }
    const next: typeof level = [];
    level.forEach((dir, i) => {
      const listed = parseLs(parts[i]!);
      if (listed.problem) problems.push(`/${dir.path}: ${listed.problem}`);
      for (const entry of listed.entries) {
        const full = dir.path ? `${dir.path}/${entry.name}` : entry.name;
        if (entries.has(full)) continue; // a corrupt directory naming an entry twice
        entries.set(full, { ...entry.fields, path: full });
        if (entries.size > options.maxEntries) throw tooMany(options.maxEntries);
        if (entry.fields.type !== 'dir') continue;
        if (seenDirs.has(entry.fields.ino)) problems.push(`/${full}: a directory seen before (a loop), not followed`);
        else {
          seenDirs.add(entry.fields.ino);
          next.push({ ino: entry.fields.ino, path: full });
        }
      }
    });
    level = next;
  }
  return { entries, problems };
}

function tooMany(max: number): DiskReadError {
  return new DiskReadError(`the disk holds more than ${max} entries, the diff's cap (SMOL_DIFF_MAX_ENTRIES)`);
}

function parseLs(text: string): {
  entries: Array<{ name: string; fields: Omit<DiskEntry, 'path'> }>;
  problem?: string;
} {
  const entries: Array<{ name: string; fields: Omit<DiskEntry, 'path'> }> = [];
  let pending = '';
  let problem: string | undefined;
  for (const line of text.split('\n')) {
    if (!pending && !line.startsWith('/')) {
      if (line.trim()) problem ??= line.trim().slice(0, 200);
      continue;
    }
    pending = pending ? `${pending}\n${line}` : line;
    const m = LS_ENTRY.exec(pending);
    if (!m) {
      if (pending.length > LS_LINE_BYTES * 4) {
        problem ??= 'an entry debugfs printed could not be read';
        pending = '';
      }
      continue;
    }
    pending = '';
    const name = m[5]!;
    if (name === '.' || name === '..' || name === '' || name.includes('/')) continue;
    const mode = parseInt(m[2]!, 8);
    entries.push({
      name,
      fields: {
        ino: Number(m[1]),
        type: TYPES[mode & 0o170000] ?? 'unknown',
        mode: mode & 0o7777,
        uid: Number(m[3]),
        gid: Number(m[4]),
        size: m[6] ? Number(m[6]) : 0,
      },
    });
  }
  return { entries, problem };
}

/** The times and fast symlink targets of these inodes (those debugfs could not stat are left out). */
export async function statInodes(
  image: string,
  work: string,
  inodes: number[],
  limits: SandboxLimits,
): Promise<Map<number, EntryDetail>> {
  const details = new Map<number, EntryDetail>();
  if (inodes.length === 0) return details;
  const parts = await debugfs(
    image,
    work,
    inodes.map((ino) => `stat <${ino}>`),
    limits,
  );
  inodes.forEach((ino, i) => {
    const text = parts[i]!;
    const mtime = /^ *mtime: (0x[0-9a-f]+(?::[0-9a-f]+)?)/m.exec(text)?.[1];
    const ctime = /^ *ctime: (0x[0-9a-f]+(?::[0-9a-f]+)?)/m.exec(text)?.[1];
    if (!mtime || !ctime) return;
    const fast = /^Fast link dest: "(.*)"$/m.exec(text)?.[1];
    details.set(ino, { mtime, ctime, ...(fast !== undefined ? { fastTarget: fast } : {}) });
  });
  return details;
}

/**
 * Copies these inodes' contents into `<work>/<name>` (made new for this run by freshOutputDir, /out in the sandbox;
 * the name must not have been used in `work` before) as files named by their index; answers each one's bytes (null
 * where debugfs wrote nothing, something not a regular file, or more than `capBytes`).
 */
export async function dumpInodes(
  image: string,
  work: string,
  name: string,
  inodes: number[],
  capBytes: number,
  limits: SandboxLimits,
): Promise<Array<Buffer | null>> {
  if (inodes.length === 0) return [];
  await mkdir(work, { recursive: true, mode: 0o700 });
  const out = await freshOutputDir(work, name);
  const commands = inodes.map((ino, i) => `dump <${ino}> /out/${i}`);
  await debugfs(image, work, commands, { ...limits, fileBytes: capBytes + 1 }, out);
  return inodes.map((_, i) => readWritten(path.join(out, String(i)), capBytes));
}

/**
 * A file the reader wrote, if it is a regular file of at most capBytes: never followed through a link it made (its
 * directory is the engine's, which the reader cannot replace; the file itself is opened with O_NOFOLLOW).
 */
function readWritten(file: string, capBytes: number): Buffer | null {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    const stat = fstatSync(fd);
    return stat.isFile() && stat.size <= capBytes ? readFileSync(fd) : null;
  } finally {
    closeSync(fd);
  }
}
