// What changed on a disk between two points (docs/diff.md): both flat images listed by the sandboxed reader
// (disk-reader.ts), entries matched by path, and for the changed text files under a size cap a unified diff made by
// diffutils' diff in the same sandbox. An entry counts as changed when its type, mode, owner, size or symlink target
// differ, or its modification or change time does (rsync's quick check is size and mtime; ctime is added because a
// guest can set mtime back but not ctime).
import path from 'node:path';
import { runSandboxed, type SandboxLimits } from './reader-sandbox.js';
import { dumpInodes, listDisk, statInodes, type DiskEntry, type EntryType, type ReaderOptions } from './disk-reader.js';

export interface EntryMeta {
  type: EntryType;
  /** Permission bits as octal text ("0644"), with setuid, setgid and sticky. */
  mode: string;
  uid: number;
  gid: number;
  size: number;
  /** A symlink's target. */
  target?: string;
}

export type ChangedField = 'type' | 'mode' | 'owner' | 'size' | 'target' | 'content' | 'times';

export interface FileChange {
  /** From the disk's root, with a leading slash. */
  path: string;
  change: 'added' | 'removed' | 'changed';
  before: EntryMeta | null;
  after: EntryMeta | null;
  /** For "changed": what differs ("content" when the size is the same and the times differ). */
  fields: ChangedField[];
  /** A unified diff of a changed text file under the cap. */
  diff?: string;
  /** Why a changed file has no diff: "binary", "over N bytes", "diff cap reached". */
  diffNote?: string;
}

export interface DiskDiff {
  added: number;
  removed: number;
  changed: number;
  /** Sorted by path; at most DiffCaps.files (then `truncated`). */
  files: FileChange[];
  truncated: boolean;
  /** What the reader could not read on either side (a corrupt directory, a loop), prefixed by the side. */
  problems: string[];
}

export interface DiffCaps {
  /** A text diff is made only for files of at most this many bytes on both sides. */
  textBytes: number;
  /** Text diffs made per disk. */
  textFiles: number;
  /** Entries returned per disk. */
  files: number;
}

const SYMLINK_TARGET_BYTES = 4096;

function meta(entry: DiskEntry, target?: string): EntryMeta {
  return {
    type: entry.type,
    mode: entry.mode.toString(8).padStart(4, '0'),
    uid: entry.uid,
    gid: entry.gid,
    size: entry.size,
    ...(target !== undefined ? { target } : {}),
  };
}

/**
 * The diff from image `a` to image `b`; `work` is a scratch directory of the engine's (0700 above it, made if
 * missing), never shown to the reader: each run gets new directories made in it (disk-reader.ts).
 */
export async function diffDisks(
  a: string,
  b: string,
  work: string,
  reader: ReaderOptions,
  caps: DiffCaps,
): Promise<DiskDiff> {
  const left = await listDisk(a, work, reader);
  const right = await listDisk(b, work, reader);
  const problems = [...left.problems.map((p) => `before: ${p}`), ...right.problems.map((p) => `after: ${p}`)];
  const changes: FileChange[] = [];
  // Same path, type and size: only the inode's times (and a symlink's target) can tell.
  const closer: Array<[DiskEntry, DiskEntry]> = [];
  for (const [p, before] of left.entries) {
    const after = right.entries.get(p);
    if (!after) {
      changes.push({ path: `/${p}`, change: 'removed', before: meta(before), after: null, fields: [] });
      continue;
    }
    const fields: ChangedField[] = [];
    if (before.type !== after.type) fields.push('type');
    if (before.mode !== after.mode) fields.push('mode');
    if (before.uid !== after.uid || before.gid !== after.gid) fields.push('owner');
    if (before.type === after.type && before.size !== after.size && before.type !== 'dir') fields.push('size');
    if (before.type === after.type && (before.type === 'file' || before.type === 'symlink'))
      closer.push([before, after]);
    if (fields.length)
      changes.push({ path: `/${p}`, change: 'changed', before: meta(before), after: meta(after), fields });
  }
  for (const [p, after] of right.entries) {
    if (!left.entries.has(p))
      changes.push({ path: `/${p}`, change: 'added', before: null, after: meta(after), fields: [] });
  }
  await lookCloser(a, b, work, reader.limits, closer, changes);
  await onlyOneSideTargets(a, b, work, reader.limits, changes, left.entries, right.entries);
  changes.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
  await textDiffs(a, b, work, reader.limits, caps, changes, left.entries, right.entries);
  const count = (kind: FileChange['change']) => changes.filter((c) => c.change === kind).length;
  return {
    added: count('added'),
    removed: count('removed'),
    changed: count('changed'),
    files: changes.slice(0, caps.files),
    truncated: changes.length > caps.files,
    problems,
  };
}

/** Times for the same-size files and targets for the symlinks present on both sides. */
async function lookCloser(
  a: string,
  b: string,
  work: string,
  limits: SandboxLimits,
  pairs: Array<[DiskEntry, DiskEntry]>,
  changes: FileChange[],
): Promise<void> {
  if (pairs.length === 0) return;
  const before = await statInodes(
    a,
    work,
    pairs.map(([x]) => x.ino),
    limits,
  );
  const after = await statInodes(
    b,
    work,
    pairs.map(([, y]) => y.ino),
    limits,
  );
  // Slow symlinks keep their target in a data block: dumped, at most a page.
  const slow = pairs.filter(
    ([x, y]) => x.type === 'symlink' && (!before.get(x.ino)?.fastTarget || !after.get(y.ino)?.fastTarget),
  );
  const slowBefore = await dumpInodes(
    a,
    work,
    'links-a',
    slow.map(([x]) => x.ino),
    SYMLINK_TARGET_BYTES,
    limits,
  );
  const slowAfter = await dumpInodes(
    b,
    work,
    'links-b',
    slow.map(([, y]) => y.ino),
    SYMLINK_TARGET_BYTES,
    limits,
  );
  const slowTargets = new Map<DiskEntry, string | undefined>();
  slow.forEach(([x, y], i) => {
    slowTargets.set(x, slowBefore[i]?.toString('utf8'));
    slowTargets.set(y, slowAfter[i]?.toString('utf8'));
  });
  const byPath = new Map(changes.map((c) => [c.path, c]));
  for (const [x, y] of pairs) {
    const dx = before.get(x.ino);
    const dy = after.get(y.ino);
    const fields: ChangedField[] = [];
    let targets: [string | undefined, string | undefined] | null = null;
    if (x.type === 'symlink') {
      targets = [dx?.fastTarget ?? slowTargets.get(x), dy?.fastTarget ?? slowTargets.get(y)];
      if (targets[0] !== targets[1]) fields.push('target');
    } else if (!dx || !dy || dx.mtime !== dy.mtime || (dx.ctime !== dy.ctime && !metadataMoved(x, y))) {
      fields.push(x.size === y.size ? 'content' : 'times');
    }
    const where = `/${x.path}`;
    const known = byPath.get(where);
    if (known) {
      if (targets) Object.assign(known, { before: meta(x, targets[0]), after: meta(y, targets[1]) });
      for (const field of fields) if (field !== 'times' || !known.fields.includes('size')) known.fields.push(field);
    } else if (fields.length) {
      changes.push({
        path: where,
        change: 'changed',
        before: meta(x, targets?.[0]),
        after: meta(y, targets?.[1]),
        fields,
      });
    }
  }
}

/** The targets of symlinks added or removed (a link on both sides got its target in lookCloser). */
async function onlyOneSideTargets(
  a: string,
  b: string,
  work: string,
  limits: SandboxLimits,
  changes: FileChange[],
  left: Map<string, DiskEntry>,
  right: Map<string, DiskEntry>,
): Promise<void> {
  for (const [image, side, entries, tag] of [
    [a, 'before', left, 'one-a'],
    [b, 'after', right, 'one-b'],
  ] as const) {
    const links = changes.filter((c) => c.change !== 'changed' && c[side]?.type === 'symlink');
    const inodes = links.map((c) => entries.get(c.path.slice(1))!.ino);
    if (inodes.length === 0) continue;
    const details = await statInodes(image, work, inodes, limits);
    const slow = inodes.filter((ino) => details.get(ino)?.fastTarget === undefined);
    const dumped = await dumpInodes(image, work, tag, slow, SYMLINK_TARGET_BYTES, limits);
    const slowTargets = new Map(slow.map((ino, i) => [ino, dumped[i]?.toString('utf8')]));
    links.forEach((change, i) => {
      const target = details.get(inodes[i]!)?.fastTarget ?? slowTargets.get(inodes[i]!);
      if (target !== undefined) change[side] = { ...change[side]!, target };
    });
  }
}

/** Unified diffs of the changed regular files under the cap, made by diff(1) in the sandbox. */
async function textDiffs(
  a: string,
  b: string,
  work: string,
  limits: SandboxLimits,
  caps: DiffCaps,
  changes: FileChange[],
  left: Map<string, DiskEntry>,
  right: Map<string, DiskEntry>,
): Promise<void> {
  const wanted: FileChange[] = [];
  for (const change of changes) {
    if (change.change !== 'changed' || change.before?.type !== 'file' || change.after?.type !== 'file') continue;
    if (!change.fields.includes('content') && !change.fields.includes('size')) continue;
    if (change.before.size > caps.textBytes || change.after.size > caps.textBytes) {
      change.diffNote = `over ${caps.textBytes} bytes`;
    } else if (wanted.length >= caps.textFiles) change.diffNote = `the cap of ${caps.textFiles} text diffs was reached`;
    else wanted.push(change);
  }
  if (wanted.length === 0) return;
  const key = (c: FileChange) => c.path.slice(1);
  await dumpInodes(
    a,
    work,
    'a',
    wanted.map((c) => left.get(key(c))!.ino),
    caps.textBytes,
    limits,
  );
  await dumpInodes(
    b,
    work,
    'b',
    wanted.map((c) => right.get(key(c))!.ino),
    caps.textBytes,
    limits,
  );
  // The two dump directories (the engine's, made for those runs), shown read-only: this run writes nothing.
  const result = await runSandboxed({
    argv: ['/usr/bin/diff', '-u', '-r', '/work/a', '/work/b'],
    mounts: [
      { host: path.join(work, 'a'), at: '/work/a' },
      { host: path.join(work, 'b'), at: '/work/b' },
    ],
    scratch: work,
    limits,
  });
  if (result.code !== 0 && result.code !== 1) {
    for (const change of wanted) change.diffNote = `diff failed${result.killed ? ` (${result.killed} cap)` : ''}`;
    return;
  }
  // diff -r heads each file with "diff -u -r /work/a/N /work/b/N"; no line of a hunk can start with "diff ".
  const text = result.stdout.toString('utf8');
  const heads = [...text.matchAll(/^diff -u -r \/work\/a\/(\d+) \/work\/b\/\d+\n/gm)];
  const diffs = new Map<number, string>();
  heads.forEach((head, i) => {
    const end = i + 1 < heads.length ? heads[i + 1]!.index : text.length;
    diffs.set(Number(head[1]), text.slice(head.index + head[0].length, end));
  });
  for (const binary of text.matchAll(/^Binary files \/work\/a\/(\d+) and \/work\/b\/\d+ differ$/gm)) {
    wanted[Number(binary[1])]!.diffNote = 'binary';
  }
  wanted.forEach((change, i) => {
    const body = diffs.get(i);
    if (body === undefined) return; // identical bytes (only the times changed) or binary
    const lines = body.split('\n');
    lines[0] = `--- a${change.path}`;
    lines[1] = `+++ b${change.path}`;
    change.diff = lines.join('\n');
  });
}

/** A chmod or chown moves an inode's change time by itself: then ctime says nothing of its content. */
function metadataMoved(x: DiskEntry, y: DiskEntry): boolean {
  return x.mode !== y.mode || x.uid !== y.uid || x.gid !== y.gid;
}
