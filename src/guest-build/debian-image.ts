// `debian:<suite>` images (docs/images.md): Debian's minbase from the mirror with busybox-static, the guest agent,
// resources/guest-debian's /init and /etc/inittab, and the Smolfile's `init` commands run in it, on a sparse raw ext4
// image <guest cache>/images/debian-<suite>-<hash>.ext4 that VMs boot from (GUEST_ROOT_CMDLINE, the image as their
// disk's base). Built on the host, as root, by mmdebstrap and mke2fs: the guest has no network to fetch packages.
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  ftruncateSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { AGENT_BINARY } from '../agent-client/host-agent.js';
import { packageRoot } from '../package-root.js';
import { guestCacheDir } from '../smol-dirs.js';
import type { Smolfile } from '../smolfile/smolfile.js';
import type { ProgressCallback } from './build-progress.js';
import { createBuildDir, removeAbandonedBuildDirs } from './build-dir.js';
import { removeChrootTree, unmountUnder } from './chroot-tree.js';
import { checkEnv, finishHook, hookEnvironment, initHook, installHook, mmdebstrapArgs } from './debian-hooks.js';
import { readImageRecord, writeImageRecord } from './image-list.js';
import { syncFile } from './guest-assets.js';
import { debianPackageTools, ensurePackages, type PackageTools } from './host-packages.js';
import { isDynamicElf } from './initramfs-build.js';
import { CommandFailedError, runLogged } from './logged-command.js';
import { MmdebstrapOutput, type InitOutput } from './mmdebstrap-output.js';
import { mke2fsArgs, rootfsUuid } from './rootfs-build.js';

/** Bump when the steps below change the image they make. */
export const DEBIAN_RECIPE_VERSION = 1;
export const DEBIAN_MIRROR = 'http://deb.debian.org/debian';
/** The disk's size as the guest sees it; the file is sparse (minbase with busybox takes about 200 MiB of it). */
export const DEBIAN_IMAGE_SIZE_BYTES = 4 * 1024 ** 3;
/** What the image has on top of minbase: busybox runs /init, init and the console's cttyhack. */
export const DEBIAN_INCLUDE = ['busybox-static'];
/** What the host needs to build one. */
export const DEBIAN_HOST_PACKAGES = ['mmdebstrap', 'e2fsprogs', 'debian-archive-keyring'];
export const DEBIAN_RESOURCES = path.join(packageRoot, 'resources', 'guest-debian');
export const SUITE_PATTERN = /^[a-z][a-z0-9-]*$/;
const BUILD_DIR_PREFIX = 'build-debian-';
const MMDEBSTRAP = '/usr/bin/mmdebstrap';
const E2FSCK = '/sbin/e2fsck';
const MKE2FS = '/sbin/mke2fs';

export interface DebianImageRecipe {
  suite: string;
  /** The Smolfile's `init`: shell commands run once, in order, in the tree (as root, with the host's network). */
  init: string[];
  /** The Smolfile's `env`: the whole environment of the init commands, with PATH, HOME and DEBIAN_FRONTEND. */
  env: Record<string, string>;
  /** DEBIAN_MIRROR unless given. */
  mirror?: string;
}

/** The recipe of a Smolfile's `debian:<suite>` image; null when it asks for another image or none. */
export function debianRecipeOf(smolfile: Smolfile): DebianImageRecipe | null {
  if (smolfile.image?.kind !== 'debian') return null;
  return { suite: smolfile.image.suite, init: smolfile.init, env: smolfile.env };
}

export interface ImageFile {
  name: string;
  data: Buffer;
}

/** resources/guest-debian/* by name, then the agent: the files the image gets from this checkout. */
export function readDebianImageFiles(): ImageFile[] {
  if (!existsSync(AGENT_BINARY))
    throw new Error(`${AGENT_BINARY} is missing: build the guest agent first (make -C native agent)`);
  const resources = readdirSync(DEBIAN_RESOURCES).sort();
  const files = resources.map((name) => ({ name, data: readFileSync(path.join(DEBIAN_RESOURCES, name)) }));
  return [...files, { name: 'smol-agent', data: readFileSync(AGENT_BINARY) }];
}

/**
 * The cache key: the recipe version, what minbase gets and the disk's size (constants, here so that changing one
 * is enough), the suite, the mirror, our files' names and bytes, the init commands in order and the env by name.
 * Every string is length-prefixed, so no two different inputs hash alike.
 */
export function debianImageHash(recipe: Required<DebianImageRecipe>, files: ImageFile[]): string {
  const hash = createHash('sha256').update(`smol-debian-image\0recipe ${DEBIAN_RECIPE_VERSION}\0`);
  const field = (label: string, value: string | Buffer) => {
    const bytes = typeof value === 'string' ? Buffer.from(value) : value;
    hash.update(`${label} ${bytes.length}\0`).update(bytes);
  };
  field('include', DEBIAN_INCLUDE.join(','));
  field('size', String(DEBIAN_IMAGE_SIZE_BYTES));
  field('suite', recipe.suite);
  field('mirror', recipe.mirror);
  for (const file of files) field(`file ${file.name}`, file.data);
  hash.update(`init ${recipe.init.length}\0`);
  for (const command of recipe.init) field('command', command);
  for (const name of Object.keys(recipe.env).sort()) field(`env ${name}`, recipe.env[name] ?? '');
  return hash.digest('hex').slice(0, 16);
}

export const debianImageName = (suite: string, hash: string) => `debian-${suite}-${hash}`;

/** <guest cache>/images: the built images, their records and logs. */
export function imagesDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(guestCacheDir(env), 'images');
}

/** Checks a recipe and fills in the mirror; throws naming what is wrong. */
export function checkRecipe(recipe: DebianImageRecipe): Required<DebianImageRecipe> {
  if (!SUITE_PATTERN.test(recipe.suite))
    throw new Error(`debian:${recipe.suite}: a suite is a lower-case name such as bookworm, trixie or stable`);
  const mirror = recipe.mirror ?? DEBIAN_MIRROR;
  if (!/^(https?|file):\/\/\S+$/.test(mirror)) throw new Error(`${mirror}: not a mirror URL (http://…)`);
  checkEnv(recipe.env);
  return { suite: recipe.suite, init: [...recipe.init], env: { ...recipe.env }, mirror };
}

/** Where the image of `recipe` is, built or not; never builds. */
export function locateDebianImage(recipe: DebianImageRecipe, dir = imagesDir()) {
  const checked = checkRecipe(recipe);
  const hash = debianImageHash(checked, readDebianImageFiles());
  const name = debianImageName(checked.suite, hash);
  const file = path.join(dir, `${name}.ext4`);
  return { recipe: checked, hash, name, file, built: existsSync(file) };
}

export interface DebianImageOptions extends DebianImageRecipe {
  force?: boolean;
  onProgress?: ProgressCallback;
  signal?: AbortSignal;
  /** imagesDir() unless given. */
  dir?: string;
  tools?: PackageTools;
}

export interface DebianImageResult {
  file: string;
  hash: string;
  cached: boolean;
  /** Each init command and what it printed (from the build's record when cached). */
  initOutput: InitOutput[];
  /** The disk's size (the file's apparent size), and what the sparse file takes on the host's disk. */
  size: number;
  allocated: number;
  /** How long the build took; null when cached and the record does not say. */
  seconds: number | null;
}

/** Builds debian-<suite>-<hash>.ext4 unless it is there (or `force`); returns where it is. */
export async function ensureDebianImage(options: DebianImageOptions): Promise<DebianImageResult> {
  const dir = options.dir ?? imagesDir();
  const report = options.onProgress ?? (() => {});
  const { recipe, hash, name, file } = locateDebianImage(options, dir);
  mkdirSync(dir, { recursive: true });
  if (existsSync(file) && !options.force) {
    const record = readImageRecord(dir, name);
    report({ step: 'image', detail: `cached ${name}.ext4`, fraction: 1 });
    return { ...sizes(file), file, hash, cached: true, initOutput: record?.initOutput ?? [], seconds: null };
  }

  report({ step: 'prepare', detail: DEBIAN_HOST_PACKAGES.join(' ') });
  ensurePackages(options.tools ?? debianPackageTools(), DEBIAN_HOST_PACKAGES, (missing) =>
    report({ step: 'prepare', detail: `apt-get install ${missing.join(' ')}` }),
  );
  if (process.getuid?.() !== 0) {
    throw new Error(
      'building a Debian image needs root (mmdebstrap --mode=root, chroot and mounts); run the build as root ' +
        '(sudo smol image build)',
    );
  }
  if (isDynamicElf(AGENT_BINARY))
    throw new Error(`${AGENT_BINARY} is dynamically linked; native/Makefile builds it with -static`);
  for (const dead of removeAbandonedBuildDirs(dir, BUILD_DIR_PREFIX, Date.now(), removeChrootTree)) {
    report({ step: 'prepare', detail: `removed ${dead}, left behind by a build that died` });
  }

  const started = Date.now();
  mkdirSync(path.join(dir, 'logs'), { recursive: true });
  const log = path.join(dir, 'logs', `${name}.log`);
  writeFileSync(log, `smol image build: debian:${recipe.suite} from ${recipe.mirror}, ${name}\n`);
  // Under the cache, not /tmp (a tmpfs may be too small for the tree), and on the image's file system for the rename.
  const work = createBuildDir(dir, BUILD_DIR_PREFIX);
  let built: DebianImageResult;
  try {
    const initOutput = await buildTree({ ...options, recipe, work, log, report });
    report({ step: 'image', detail: `mke2fs ${name}.ext4`, fraction: 0.2 });
    const image = path.join(work, `${name}.ext4`);
    await makeImage(path.join(work, 'tree'), image, hash, log, options.signal);
    const seconds = Math.round((Date.now() - started) / 1000);
    const { suite, mirror, init } = recipe;
    writeImageRecord(dir, name, { suite, mirror, hash, init, seconds, initOutput });
    publish(image, file, options.force ?? false);
    built = { ...sizes(file), file, hash, cached: false, initOutput, seconds };
  } catch (err) {
    removeWork(work, err);
    throw err;
  }
  removeWork(work);
  report({ step: 'image', detail: `${name}.ext4 (${describeSizes(built)})`, fraction: 1 });
  return built;
}

/**
 * Removes the build's directory, tree and all. When a mount in it will not go, the tree stays rather than being
 * deleted through it: that is added to the build's own error, or is the error.
 */
function removeWork(work: string, failure?: unknown): void {
  try {
    removeChrootTree(work);
  } catch (err) {
    const why = `the build tree was left behind: ${(err as Error).message}`;
    if (failure instanceof Error) failure.message += `; ${why}`;
    else throw new Error(why);
  }
}

interface TreeOptions extends DebianImageOptions {
  recipe: Required<DebianImageRecipe>;
  work: string;
  log: string;
  report: ProgressCallback;
}

/** mmdebstrap into <work>/tree with our hooks; returns the init commands' output. */
async function buildTree(options: TreeOptions): Promise<InitOutput[]> {
  const { recipe, work, log } = options;
  const staged = path.join(work, 'files');
  mkdirSync(staged);
  for (const file of readDebianImageFiles()) writeFileSync(path.join(staged, file.name), file.data);
  const marker = `smol-init-${randomBytes(6).toString('hex')}:`;
  const hooks = [
    installHook(staged),
    ...recipe.init.map((command, index) => initHook(command, index, recipe.env, marker)),
    finishHook(),
  ];
  const args = mmdebstrapArgs({ ...recipe, tree: path.join(work, 'tree'), include: DEBIAN_INCLUDE, hooks });
  const output = new MmdebstrapOutput(recipe.init, marker, options.report);
  options.report({ step: 'download', detail: `debian:${recipe.suite} from ${recipe.mirror}` });
  try {
    const env = { ...process.env, ...hookEnvironment(recipe.env), DEBIAN_FRONTEND: 'noninteractive', TMPDIR: work };
    const { signal } = options;
    await runLogged(MMDEBSTRAP, args, { cwd: work, log, env, onLine: output.line, signal, processGroup: true });
  } catch (err) {
    if (options.signal?.aborted || !(err instanceof CommandFailedError)) throw err;
    const status = / (failed with status \d+|was killed by \w+)/.exec(err.message)?.[1] ?? 'failed';
    throw new Error(output.explainFailure({ suite: recipe.suite, mirror: recipe.mirror, status, log }));
  }
  emptyTmp(path.join(work, 'tree', 'tmp'));
  return output.initOutput();
}

/** What init commands left in /tmp: at boot a tmpfs hides it, so it would only take space in the image. */
function emptyTmp(tmp: string): void {
  unmountUnder(tmp); // nothing should be mounted there once mmdebstrap has ended; never delete through a mount
  for (const entry of readdirSync(tmp)) rmSync(path.join(tmp, entry), { recursive: true, force: true });
}

/** The sparse image of `tree`: made at full size first (see makeExt4Image in rootfs-build.ts), then mke2fs -d. */
async function makeImage(tree: string, image: string, hash: string, log: string, signal?: AbortSignal) {
  const fd = openSync(image, 'wx');
  try {
    ftruncateSync(fd, DEBIAN_IMAGE_SIZE_BYTES);
  } finally {
    closeSync(fd);
  }
  const cwd = path.dirname(image);
  await runLogged(MKE2FS, mke2fsArgs(tree, image, DEBIAN_IMAGE_SIZE_BYTES, rootfsUuid(hash)), { cwd, log, signal });
  await runLogged(E2FSCK, ['-f', '-n', image], { cwd, log, signal });
  syncFile(image);
}

/**
 * Moves the finished image to its name. A forced build replaces what is there; otherwise an image that another build
 * of the same recipe published meanwhile is kept (a link fails where a rename would replace it).
 */
function publish(image: string, file: string, force: boolean): void {
  if (force) return renameSync(image, file);
  try {
    linkSync(image, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  rmSync(image, { force: true });
}

function sizes(file: string) {
  const stats = statSync(file);
  return { size: stats.size, allocated: stats.blocks * 512 };
}

export const describeSizes = (s: { size: number; allocated: number }) =>
  `${(s.size / 1024 ** 3).toFixed(1)} GiB ext4, ${(s.allocated / 1024 ** 2).toFixed(1)} MiB on disk`;
