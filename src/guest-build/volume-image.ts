// A Smolfile volume's disk (docs/disks.md, "Volumes"): the host folder as it is now, copied into a sparse ext4 image
// by mke2fs -d, in the images directory as volume-<hash>.ext4. The hash is of the folder's tree (names, types, modes,
// owners, sizes, modification times, symlink targets), so an unchanged folder is not built again and a changed one
// gets a new image (and a new base snapshot: its name is part of the base key).
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  ftruncateSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  type Stats,
} from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { pidAlive } from '../pid-alive.js';

const run = promisify(execFile);

const MKE2FS = '/sbin/mke2fs';
const MiB = 2 ** 20;
/** Room for writes beyond a copy of the content (docs/disks.md): content × 2 + 64 MiB. */
const HEADROOM_BYTES = 64 * MiB;

export interface VolumeTree {
  /** The tree's hash (hex, 16 digits): its image's name. */
  hash: string;
  /** Bytes its files and directories take, rounded up to blocks, and its entry count. */
  bytes: number;
  entries: number;
}

/** The largest folder a volume takes, in MiB of content (SMOL_VOLUME_MAX_MIB raises it; docs/disks.md). */
export const DEFAULT_VOLUME_MAX_MIB = 4096;

export function volumeMaxBytes(env: NodeJS.ProcessEnv = process.env): number {
  const text = env.SMOL_VOLUME_MAX_MIB;
  if (text === undefined || text === '') return DEFAULT_VOLUME_MAX_MIB * MiB;
  const mib = Number(text);
  if (!Number.isSafeInteger(mib) || mib < 1) {
    throw new Error(`SMOL_VOLUME_MAX_MIB=${JSON.stringify(text)} is not a whole number of MiB (1 or more)`);
  }
  return mib * MiB;
}

/** Refuses a tree over the cap, naming the folder, its size and the cap. */
function checkCap(folder: string, tree: VolumeTree, env: NodeJS.ProcessEnv): VolumeTree {
  const max = volumeMaxBytes(env);
  if (tree.bytes > max) {
    throw new Error(
      `the volume folder ${folder} holds ${(tree.bytes / MiB).toFixed(1)} MiB (${tree.entries} entries), more than ` +
        `the cap of ${max / MiB} MiB for a volume: set SMOL_VOLUME_MAX_MIB to raise it (docs/disks.md, "Volumes")`,
    );
  }
  return tree;
}

/** One entry's part of the hash, and what it adds to the size. */
function account(hash: ReturnType<typeof createHash>, rel: string, info: Stats): number {
  hash.update(`${rel}\0${info.mode}\0${info.uid}:${info.gid}\0${info.size}\0${info.mtimeMs}\0`);
  return Math.ceil(info.size / 4096) * 4096 + 4096;
}

/** Walks `folder` (never following symbolic links) and hashes what mke2fs -d would copy; over the cap, refuses. */
export function volumeTree(folder: string, env: NodeJS.ProcessEnv = process.env): VolumeTree {
  const hash = createHash('sha256');
  let bytes = 0;
  let entries = 0;
  const walk = (dir: string, relative: string) => {
    for (const name of readdirSync(dir).sort()) {
      const file = path.join(dir, name);
      const rel = `${relative}/${name}`;
      const info = lstatSync(file);
      entries++;
      bytes += account(hash, rel, info);
      if (info.isSymbolicLink()) hash.update(`${readlinkSync(file)}\0`);
      else if (info.isDirectory()) walk(file, rel);
    }
  };
  const root = lstatSync(folder);
  hash.update(`/\0${root.mode}\0${root.uid}:${root.gid}\0`);
  walk(folder, '');
  return checkCap(folder, { hash: hash.digest('hex').slice(0, 16), bytes, entries }, env);
}

/** How many entries the chunked walk reads between two turns of the event loop (a few ms of work each). */
const ENTRIES_PER_TURN = 256;

/**
 * volumeTree without holding the event loop: the same walk and hash in chunks of ENTRIES_PER_TURN entries, letting
 * other work run between them, so an engine hashing a big folder still answers its API. Synchronous reads within a
 * chunk: awaiting each lstat through libuv's thread pool was 8x slower (50,000 entries on tmpfs: 11 s against 1.4 s).
 */
export async function volumeTreeAsync(folder: string, env: NodeJS.ProcessEnv = process.env): Promise<VolumeTree> {
  const hash = createHash('sha256');
  let bytes = 0;
  let entries = 0;
  const root = lstatSync(folder);
  hash.update(`/\0${root.mode}\0${root.uid}:${root.gid}\0`);
  // Depth first in name order, as volumeTree's recursion: a stack of directories, each with its names left to read.
  const stack: { dir: string; relative: string; names: string[] }[] = [
    { dir: folder, relative: '', names: readdirSync(folder).sort().reverse() },
  ];
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    const name = top.names.pop();
    if (name === undefined) {
      stack.pop();
      continue;
    }
    const file = path.join(top.dir, name);
    const rel = `${top.relative}/${name}`;
    const info = lstatSync(file);
    bytes += account(hash, rel, info);
    if (info.isSymbolicLink()) hash.update(`${readlinkSync(file)}\0`);
    else if (info.isDirectory()) stack.push({ dir: file, relative: rel, names: readdirSync(file).sort().reverse() });
    if (++entries % ENTRIES_PER_TURN === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  const tree = checkCap(folder, { hash: hash.digest('hex').slice(0, 16), bytes, entries }, env);
  hashed.set(folder, tree);
  return tree;
}

/** The trees ensureVolumeImage just hashed, by folder, for the boot plan that follows it (takeHashedTree). */
const hashed = new Map<string, VolumeTree>();

/** The tree of `folder` as the last ensureVolumeImage found it, once (a later boot hashes the folder again). */
export function takeHashedTree(folder: string): VolumeTree | undefined {
  const tree = hashed.get(folder);
  hashed.delete(folder);
  return tree;
}

/** A partial image's name: the final one, `.partial-`, the pid that writes it and a random part. */
export const partialName = (file: string) => `${file}.partial-${process.pid}-${randomBytes(6).toString('hex')}`;
const PARTIAL = /\.partial-(?:(\d+)-)?[0-9a-f]{12}$/;
/** A partial file without a pid (an older Smol's) is taken as left behind after this long. */
const UNOWNED_PARTIAL_MS = 60 * 60 * 1000;

/**
 * Removes the `*.partial-*` images a killed mke2fs, pull or copy left in `dir` (their writer's pid is gone; one
 * without a pid once it is an hour old); returns their names. Run at engine start and before each build.
 */
export function removeLeftPartials(dir: string, now = Date.now()): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const match = PARTIAL.exec(name);
    if (!match) continue;
    const file = path.join(dir, name);
    const pid = match[1] === undefined ? null : Number(match[1]);
    if (pid !== null && pidAlive(pid)) continue;
    if (pid === null) {
      try {
        if (now - lstatSync(file).mtimeMs < UNOWNED_PARTIAL_MS) continue;
      } catch {
        continue; // removed meanwhile
      }
    }
    rmSync(file, { force: true });
    removed.push(name);
  }
  return removed;
}

export function volumeImageName(tree: VolumeTree): string {
  return `volume-${tree.hash}.ext4`;
}

/** The image's size: content × 2 + 64 MiB, in whole MiB, and at least 1 MiB per 256 entries (inodes). */
export function volumeImageSize(tree: VolumeTree): number {
  const wanted = Math.max(tree.bytes * 2 + HEADROOM_BYTES, tree.entries * 4096 * 2 + HEADROOM_BYTES);
  return Math.ceil(wanted / MiB) * MiB;
}

/**
 * The image of `folder` in `dir`, built when it is not there (tree hashed again afterwards: a folder that changed
 * while it was copied is built again, once). Returns its path.
 */
export async function ensureVolumeImage(
  folder: string,
  dir: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const tree = await volumeTreeAsync(folder, env);
    const file = path.join(dir, volumeImageName(tree));
    if (existsSync(file)) return file;
    mkdirSync(dir, { recursive: true });
    removeLeftPartials(dir);
    const partial = partialName(file);
    try {
      // At full size first, so mke2fs discards it and marks the inode tables zeroed (rootfs-build.ts, makeExt4Image).
      const fd = openSync(partial, 'wx');
      try {
        ftruncateSync(fd, volumeImageSize(tree));
      } finally {
        closeSync(fd);
      }
      const sizeMiB = volumeImageSize(tree) / MiB;
      const args = [
        '-q',
        '-t',
        'ext4',
        '-d',
        folder,
        '-L',
        'smol-volume',
        '-E',
        'lazy_journal_init=1',
        '-F',
        partial,
        `${sizeMiB}M`,
      ];
      try {
        await run(MKE2FS, args);
      } catch (error) {
        const { stderr, message } = error as { stderr?: string; message: string };
        throw new Error(`cannot make the volume image of ${folder}: mke2fs: ${(stderr || message).trim()}`);
      }
      if ((await volumeTreeAsync(folder, env)).hash !== tree.hash && attempt === 0) continue; // changed meanwhile
      chmodSync(partial, 0o444);
      renameSync(partial, file);
      return file;
    } finally {
      rmSync(partial, { force: true });
    }
  }
}
