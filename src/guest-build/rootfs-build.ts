// The root disk: the initramfs's tree (busybox-static, /init, /etc/inittab, the guest agent) on a raw ext4 file
// system image, rootfs-<hash>.ext4 under the guest cache. A VM uses it as its disk's read-only base (each VM writes to
// a layer of its own, docs/disks.md) and boots from it with GUEST_ROOT_CMDLINE instead of an initrd. mke2fs -d makes
// it, debugfs then gives every file root's ownership and one fixed time, so the same inputs make the same bytes.
import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import type { ProgressCallback } from './build-progress.js';
import { createBuildDir, removeAbandonedBuildDirs } from './build-dir.js';
import type { CpioEntry } from './cpio-newc.js';
import { rootfsFileName, syncFile, type CurrentInitramfs, type CurrentRootfs } from './guest-assets.js';
import { ensurePackages, type PackageTools } from './host-packages.js';
import { initramfsHash, readInitramfsEntries, readInitramfsResources } from './initramfs-build.js';
import { runLogged } from './logged-command.js';

/** Bump when the steps below change the image they make. */
export const ROOTFS_RECIPE_VERSION = 1;
/** The disk's size as the guest sees it. The file is sparse: only what mke2fs writes takes space (about 3 MiB). */
export const ROOTFS_SIZE_BYTES = 2 * 1024 ** 3;
export const ROOTFS_LABEL = 'smol-root';
export const ROOTFS_PACKAGES = ['e2fsprogs'];
/**
 * Every time stamp in the image (the file system's, each file's), 2026-01-01T00:00:00Z, so that the image depends on
 * its inputs only. A forced rebuild then replaces the image with the same bytes, which matters: disk layers refer to
 * their base by path, and a different file system under an existing layer would be garbage to the guest.
 */
export const ROOTFS_EPOCH = 1_767_225_600;
const BUILD_DIR_PREFIX = 'build-rootfs-';
const MiB = 1024 * 1024;
// Absolute: a user's PATH on Debian has no /sbin. /sbin is /usr/sbin on a merged /usr, and e2fsprogs is there either way.
const MKE2FS = '/sbin/mke2fs';
const DEBUGFS = '/sbin/debugfs';
const E2FSCK = '/sbin/e2fsck';
const TIME_FIELDS = ['atime', 'mtime', 'ctime', 'crtime'];

export interface RootfsInputs {
  initramfsHash: string;
  sizeBytes: number;
  e2fsprogsVersion: string;
}

export interface RootfsBuildResult {
  current: CurrentRootfs;
  file: string;
  cached: boolean;
  /** The disk's size (the file's apparent size). */
  size: number;
  /** What the sparse file takes on the host's disk. */
  allocated: number;
}

/**
 * The cache key: the initramfs's hash (which covers every file in the tree and busybox's version), the image size,
 * e2fsprogs' version and the recipe version.
 */
export function rootfsHash(inputs: RootfsInputs): string {
  return createHash('sha256')
    .update(`smol-guest-rootfs\0recipe ${ROOTFS_RECIPE_VERSION}\0`)
    .update(`initramfs ${inputs.initramfsHash}\0size ${inputs.sizeBytes}\0e2fsprogs=${inputs.e2fsprogsVersion}\0`)
    .digest('hex')
    .slice(0, 16);
}

/** The file system's UUID (and directory hash seed): fixed per image, different between images. */
export function rootfsUuid(hash: string): string {
  const hex = createHash('sha256').update(`smol-guest-rootfs-uuid\0${hash}`).digest('hex');
  return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20, 32)].join('-');
}

/**
 * Writes the initramfs's entries under `dir` (created here), with their modes, and returns the paths written.
 * Device nodes are left out: the only one, /dev/console, is there so that an initramfs's init has a console; with
 * a disk root the kernel mounts devtmpfs on /dev before it starts init (CONFIG_DEVTMPFS_MOUNT).
 */
export function writeRootfsTree(dir: string, entries: CpioEntry[]): string[] {
  mkdirSync(dir);
  const written: string[] = [];
  const dirModes: [string, number][] = [];
  for (const entry of entries) {
    if (path.posix.isAbsolute(entry.path) || entry.path.split('/').includes('..'))
      throw new Error(`${entry.path}: not a path inside the root file system`);
    const target = path.join(dir, entry.path);
    if (entry.type === 'chardev') continue;
    if (entry.type === 'dir') {
      mkdirSync(target, { mode: 0o755 });
      dirModes.push([target, entry.mode ?? 0o755]);
    } else if (entry.type === 'file') {
      writeFileSync(target, entry.data);
      chmodSync(target, entry.mode ?? 0o644); // after the write: the umask applies to writeFileSync's mode
    } else {
      symlinkSync(entry.target, target);
    }
    written.push(entry.path);
  }
  // Directory modes last, deepest first, so that read-only ones (/proc is 0555) did not stop the writes above.
  for (const [target, mode] of dirModes.reverse()) chmodSync(target, mode);
  return written;
}

/** The mke2fs command line (after the file has been made `sizeBytes` long; see makeExt4Image). */
export function mke2fsArgs(tree: string, file: string, sizeBytes: number, uuid: string): string[] {
  if (!Number.isSafeInteger(sizeBytes) || sizeBytes <= 0 || sizeBytes % MiB !== 0)
    throw new RangeError(`the root disk's size must be a whole number of MiB (got ${sizeBytes})`);
  // lazy_journal_init: the journal's 64 MiB are holes in a new sparse file, zeros already; mke2fs would write them.
  const extended = `root_owner=0:0,lazy_journal_init=1,hash_seed=${uuid}`;
  return [
    '-q',
    '-t',
    'ext4',
    '-d',
    tree,
    '-L',
    ROOTFS_LABEL,
    '-U',
    uuid,
    '-E',
    extended,
    '-F',
    file,
    `${sizeBytes / MiB}M`,
  ];
}

/**
 * debugfs commands that make `paths` owned by root (mke2fs -d copies the owner of each file it reads, which is the
 * user who built) and give them all the same times (mke2fs copies those too, and a ctime cannot be set any other way).
 */
export function debugfsNormalizeCommands(paths: string[], epoch: number): string {
  const lines: string[] = [];
  for (const relative of paths) {
    if (/["\\\s]/.test(relative)) throw new Error(`${relative}: a name debugfs cannot be given`);
    const name = `"/${relative}"`;
    lines.push(`sif ${name} uid 0`, `sif ${name} gid 0`);
    for (const field of TIME_FIELDS) lines.push(`sif ${name} ${field} @${epoch}`);
  }
  return lines.join('\n') + '\n';
}

/** One extended attribute to set in a disk: `path` relative to its root ('' is the root). */
export interface Ext4Xattr {
  path: string;
  name: string;
  value: Buffer;
}

/**
 * debugfs commands that set `xattrs` in a disk, each value read from a file `valueFile(i)` names (values are bytes).
 * Names are quoted as debugfs's parser reads them (a `"` doubled); one with a line break cannot be given at all.
 */
export function debugfsXattrCommands(xattrs: Ext4Xattr[], valueFile: (index: number) => string): string {
  const quote = (text: string, what: string) => {
    if (/[\r\n]/.test(text)) throw new Error(`${what} has a line break, which debugfs cannot be given`);
    return `"${text.replaceAll('"', '""')}"`;
  };
  return xattrs
    .map((x, i) => {
      const where = `/${x.path}`;
      const file = quote(where, `${JSON.stringify(where)} (it has extended attributes)`);
      return `ea_set -f ${quote(valueFile(i), 'the work directory')} ${file} ${quote(x.name, `extended attribute ${JSON.stringify(x.name)}`)}\n`;
    })
    .join('');
}

/**
 * Sets `xattrs` in the ext4 image `file` with debugfs (after mke2fs -d, which copies a tree's own xattrs: the tree's
 * file system may not hold them; docs/images.md). `work` gets the value files for the run. Fails naming the first
 * that could not be set.
 */
export async function setExt4Xattrs(
  file: string,
  xattrs: Ext4Xattr[],
  options: { work: string; log: string; signal?: AbortSignal },
): Promise<void> {
  if (xattrs.length === 0) return;
  const dir = path.join(options.work, 'xattr-values');
  mkdirSync(dir);
  try {
    xattrs.forEach((x, i) => writeFileSync(path.join(dir, String(i)), x.value));
    const commands = path.join(dir, 'commands');
    writeFileSync(
      commands,
      debugfsXattrCommands(xattrs, (i) => path.join(dir, String(i))),
    );
    const problems: string[] = [];
    const onLine = (line: string) => {
      if (line.trim() !== '' && !/^debugfs[: ]/.test(line)) problems.push(line.trim());
    };
    await runLogged(DEBUGFS, ['-w', '-f', commands, file], {
      cwd: options.work,
      log: options.log,
      signal: options.signal,
      onLine,
    });
    if (problems.length > 0) {
      throw new Error(`setting the image's extended attributes failed: ${problems.slice(0, 5).join('; ')}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface Ext4ImageOptions {
  tree: string;
  /** Where to make the image; must not exist. */
  file: string;
  sizeBytes: number;
  uuid: string;
  /** The paths written into `tree` (writeRootfsTree), relative to it. */
  paths: string[];
  /** Gets every command and its output. */
  log: string;
  signal?: AbortSignal;
}

/** Makes the ext4 image of `tree`, with root's ownership and ROOTFS_EPOCH everywhere, and checks it with e2fsck. */
export async function makeExt4Image(options: Ext4ImageOptions): Promise<void> {
  const { file, log, signal } = options;
  const cwd = path.dirname(file);
  const env = { ...process.env, E2FSPROGS_FAKE_TIME: String(ROOTFS_EPOCH) };
  // The file at its full size first: mke2fs then knows how big the device is, "discards" it (punches holes), sees
  // that this leaves zeros and marks the inode tables as zeroed. Made by mke2fs itself, the file is empty when mke2fs
  // looks; the inode tables are then left for the guest kernel's ext4lazyinit to zero, which would write 32 MiB of
  // zeros into every VM's own disk layer after it boots.
  const fd = openSync(file, 'wx');
  try {
    ftruncateSync(fd, options.sizeBytes);
  } finally {
    closeSync(fd);
  }
  await runLogged(MKE2FS, mke2fsArgs(options.tree, file, options.sizeBytes, options.uuid), { cwd, log, env, signal });

  const commands = `${file}.debugfs`;
  writeFileSync(commands, debugfsNormalizeCommands(options.paths, ROOTFS_EPOCH));
  // debugfs echoes each command as `debugfs: …` and prints its banner; anything else is an error, and it exits 0 anyway.
  const problems: string[] = [];
  const onLine = (line: string) => {
    if (line.trim() !== '' && !/^debugfs[: ]/.test(line)) problems.push(line.trim());
  };
  try {
    await runLogged(DEBUGFS, ['-w', '-f', commands, file], { cwd, log, env, signal, onLine });
  } finally {
    rmSync(commands, { force: true });
  }
  if (problems.length > 0) throw new Error(`debugfs could not normalize ${file}: ${problems.slice(0, 5).join('; ')}`);
  await runLogged(E2FSCK, ['-f', '-n', file], { cwd, log, env, signal });
}

export interface RootfsBuildOptions {
  guestDir: string;
  tools: PackageTools;
  /** The initramfs just built: the disk holds the same tree, and its hash is part of the disk's. */
  initramfs: CurrentInitramfs;
  force?: boolean;
  onProgress?: ProgressCallback;
  signal?: AbortSignal;
  /** ROOTFS_SIZE_BYTES unless a test asks for less. */
  sizeBytes?: number;
}

function result(current: CurrentRootfs, file: string, cached: boolean): RootfsBuildResult {
  const stats = statSync(file);
  return { current, file, cached, size: stats.size, allocated: stats.blocks * 512 };
}

const describeSize = (r: RootfsBuildResult) =>
  `${(r.size / 1024 ** 3).toFixed(1)} GiB ext4, ${(r.allocated / MiB).toFixed(1)} MiB on disk`;

/** Builds rootfs-<hash>.ext4 unless it exists (or `force`); returns where it is. */
export async function buildRootfs(options: RootfsBuildOptions): Promise<RootfsBuildResult> {
  const { guestDir, tools } = options;
  const sizeBytes = options.sizeBytes ?? ROOTFS_SIZE_BYTES;
  const report = options.onProgress ?? (() => {});
  report({ step: 'rootfs', detail: ROOTFS_PACKAGES.join(' ') });
  ensurePackages(tools, ROOTFS_PACKAGES, (missing) =>
    report({ step: 'rootfs', detail: `apt-get install ${missing.join(' ')}` }),
  );
  const e2fsprogsVersion = tools.installedVersions(['e2fsprogs']).get('e2fsprogs') ?? 'unknown';
  const hash = rootfsHash({ initramfsHash: options.initramfs.hash, sizeBytes, e2fsprogsVersion });
  const name = rootfsFileName(hash);
  const file = path.join(guestDir, name);
  const current: CurrentRootfs = { hash, file: name };
  for (const dead of removeAbandonedBuildDirs(guestDir, BUILD_DIR_PREFIX)) {
    report({ step: 'rootfs', detail: `removed ${dead}, left behind by a build that died` });
  }
  if (existsSync(file) && !options.force) {
    const cached = result(current, file, true);
    report({ step: 'rootfs', detail: `cached ${name}`, fraction: 1 });
    return cached;
  }

  mkdirSync(path.join(guestDir, 'logs'), { recursive: true });
  const log = path.join(guestDir, 'logs', `rootfs-${hash}.log`);
  writeFileSync(
    log,
    `smol guest build: rootfs ${hash} from ${options.initramfs.file}, e2fsprogs ${e2fsprogsVersion}\n`,
  );
  // Under the cache, not /tmp: the image is renamed into place from here, which needs the same file system.
  const work = createBuildDir(guestDir, BUILD_DIR_PREFIX);
  try {
    report({ step: 'rootfs', detail: 'writing the tree', fraction: 0 });
    const tree = path.join(work, 'tree');
    const files = readInitramfsResources();
    const busyboxVersion = tools.installedVersions(['busybox-static']).get('busybox-static') ?? 'unknown';
    if (initramfsHash({ files, busyboxVersion }) !== options.initramfs.hash) {
      throw new Error(
        `the initramfs's files changed since ${options.initramfs.file} was built (the agent rebuilt?); run it again`,
      );
    }
    const paths = writeRootfsTree(tree, readInitramfsEntries(files));
    report({ step: 'rootfs', detail: `mke2fs ${name}`, fraction: 0.3 });
    const image = path.join(work, name);
    await makeExt4Image({ tree, file: image, sizeBytes, uuid: rootfsUuid(hash), paths, log, signal: options.signal });
    syncFile(image);
    // rename replaces an image of the same name atomically (a forced build, or a concurrent one): with the same
    // bytes, and a VM that has the old one open keeps reading that.
    renameSync(image, file);
    const built = result(current, file, false);
    report({ step: 'rootfs', detail: `${name} (${describeSize(built)})`, fraction: 1 });
    return built;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
