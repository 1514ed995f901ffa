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
} from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

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

/** Walks `folder` (never following symbolic links) and hashes what mke2fs -d would copy. */
export function volumeTree(folder: string): VolumeTree {
  const hash = createHash('sha256');
  let bytes = 0;
  let entries = 0;
  const walk = (dir: string, relative: string) => {
    for (const name of readdirSync(dir).sort()) {
      const file = path.join(dir, name);
      const rel = `${relative}/${name}`;
      const info = lstatSync(file);
      entries++;
      bytes += Math.ceil(info.size / 4096) * 4096 + 4096;
      hash.update(`${rel}\0${info.mode}\0${info.uid}:${info.gid}\0${info.size}\0${info.mtimeMs}\0`);
      if (info.isSymbolicLink()) hash.update(`${readlinkSync(file)}\0`);
      else if (info.isDirectory()) walk(file, rel);
    }
  };
  const root = lstatSync(folder);
  hash.update(`/\0${root.mode}\0${root.uid}:${root.gid}\0`);
  walk(folder, '');
  return { hash: hash.digest('hex').slice(0, 16), bytes, entries };
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
export async function ensureVolumeImage(folder: string, dir: string): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const tree = volumeTree(folder);
    const file = path.join(dir, volumeImageName(tree));
    if (existsSync(file)) return file;
    mkdirSync(dir, { recursive: true });
    const partial = `${file}.partial-${randomBytes(6).toString('hex')}`;
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
      if (volumeTree(folder).hash !== tree.hash && attempt === 0) continue; // changed while copied: once more
      chmodSync(partial, 0o444);
      renameSync(partial, file);
      return file;
    } finally {
      rmSync(partial, { force: true });
    }
  }
}
