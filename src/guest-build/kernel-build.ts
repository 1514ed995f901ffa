// The guest kernel: Debian's linux-source, `make tinyconfig` plus resources/guest-kernel/smol.config, checked
// option by option, built into kernel-<hash>/ under the guest cache (see guest-assets.ts for the layout).
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../package-root.js';
import type { ProgressCallback } from './build-progress.js';
import { createBuildDir, removeAbandonedBuildDirs } from './build-dir.js';
import { kernelDirName, publishEntry, syncFile, type CurrentKernel } from './guest-assets.js';
import { ensurePackages, type PackageTools } from './host-packages.js';
import { findDroppedOptions, formatDroppedOptions } from './kconfig-fragment.js';
import { runLogged } from './logged-command.js';

/** Bump when the steps below change in a way that changes the kernel they produce. */
export const KERNEL_RECIPE_VERSION = 1;
export const KERNEL_FRAGMENT = path.join(packageRoot, 'resources', 'guest-kernel', 'smol.config');
const KERNEL_FRAGMENT_NAME = path.basename(KERNEL_FRAGMENT);
const BUILD_DIR_PREFIX = 'build-kernel-';
export const KERNEL_PACKAGES = [
  'linux-source',
  'build-essential',
  'bc',
  'flex',
  'bison',
  'libelf-dev',
  'libssl-dev',
  'xz-utils',
  'cpio',
];
/** `  CC      kernel/fork.o` lines of a full build, measured; used until a build here has counted its own. */
const DEFAULT_COMPILE_LINES = 900;

export interface KernelSource {
  /** The versioned package that holds the tarball, e.g. linux-source-6.1. */
  package: string;
  version: string;
  tarball: string;
}

/** What a built kernel directory records about itself (build.json). */
export interface KernelBuildInfo {
  hash: string;
  release: string;
  source: { package: string; version: string };
  recipeVersion: number;
  fragmentSha256: string;
  builtAt: string;
  buildSeconds: number;
  compileLines: number;
  sizes: { vmlinux: number; bzImage: number };
}

export interface KernelBuildResult {
  current: CurrentKernel;
  dir: string;
  cached: boolean;
  info: KernelBuildInfo | null;
}

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/** The cache key: the fragment's bytes, the source package and version, and the recipe version. */
export function kernelHash(inputs: { fragment: string | Buffer; source: Pick<KernelSource, 'package' | 'version'> }) {
  return createHash('sha256')
    .update(`smol-guest-kernel\0recipe ${KERNEL_RECIPE_VERSION}\0`)
    .update(`${inputs.source.package}=${inputs.source.version}\0`)
    .update(inputs.fragment)
    .digest('hex')
    .slice(0, 16);
}

/** The tarball the `linux-source` meta package points at (its Depends names linux-source-X.Y). */
export function findKernelSource(tools: PackageTools, fileExists = existsSync): KernelSource {
  const pkg = /\b(linux-source-\d+\.\d+)\b/.exec(tools.depends('linux-source'))?.[1];
  if (!pkg) throw new Error('linux-source is installed but does not depend on a linux-source-X.Y package');
  const version = tools.installedVersions([pkg]).get(pkg);
  const tarball = `/usr/src/${pkg}.tar.xz`;
  if (!version || !fileExists(tarball)) {
    throw new Error(`${tarball} is missing; reinstall it with: apt-get install --reinstall ${pkg}`);
  }
  return { package: pkg, version, tarball };
}

export function readKernelBuildInfo(dir: string): KernelBuildInfo | null {
  try {
    return JSON.parse(readFileSync(path.join(dir, 'build.json'), 'utf8')) as KernelBuildInfo;
  } catch {
    return null;
  }
}

/** How many compile lines to expect: the most recent build's count, else a measured default. */
function expectedCompileLines(guestDir: string): number {
  const infos = readdirSync(guestDir)
    .filter((name) => name.startsWith('kernel-'))
    .map((name) => readKernelBuildInfo(path.join(guestDir, name)))
    .filter((info): info is KernelBuildInfo => info !== null && info.compileLines > 0)
    .sort((a, b) => b.builtAt.localeCompare(a.builtAt));
  return infos[0]?.compileLines ?? DEFAULT_COMPILE_LINES;
}

export interface KernelBuildOptions {
  guestDir: string;
  tools: PackageTools;
  force?: boolean;
  onProgress?: ProgressCallback;
  signal?: AbortSignal;
  jobs?: number;
}

/** Builds the kernel unless kernel-<hash>/ exists (or `force`); returns where it is. */
export async function buildKernel(options: KernelBuildOptions): Promise<KernelBuildResult> {
  const { guestDir, tools } = options;
  const report = options.onProgress ?? (() => {});
  report({ step: 'kernel packages', detail: KERNEL_PACKAGES.join(' ') });
  ensurePackages(tools, KERNEL_PACKAGES, (missing) =>
    report({ step: 'kernel packages', detail: `apt-get install ${missing.join(' ')}` }),
  );
  const source = findKernelSource(tools);
  const fragment = readFileSync(KERNEL_FRAGMENT);
  const hash = kernelHash({ fragment, source });
  const dir = path.join(guestDir, kernelDirName(hash));
  const current: CurrentKernel = {
    hash,
    vmlinux: path.join(kernelDirName(hash), 'vmlinux'),
    bzImage: path.join(kernelDirName(hash), 'bzImage'),
  };
  for (const name of removeAbandonedBuildDirs(guestDir, BUILD_DIR_PREFIX)) {
    report({ step: 'kernel', detail: `removed ${name}, left behind by a build that died` });
  }
  if (existsSync(path.join(dir, 'vmlinux')) && !options.force) {
    report({ step: 'kernel', detail: `cached ${kernelDirName(hash)} (${source.package} ${source.version})` });
    return { current, dir, cached: true, info: readKernelBuildInfo(dir) };
  }

  const started = Date.now();
  mkdirSync(path.join(guestDir, 'logs'), { recursive: true });
  const log = path.join(guestDir, 'logs', `kernel-${hash}.log`);
  writeFileSync(log, `smol guest build: kernel ${hash} from ${source.package} ${source.version}\n`);
  // Under the cache, not /tmp: the tree is about 1.5 GB once built, more than a tmpfs /tmp usually has.
  const work = createBuildDir(guestDir, BUILD_DIR_PREFIX);
  try {
    const src = path.join(work, 'linux');
    mkdirSync(src);
    const env = { ...process.env, ARCH: 'x86_64', KBUILD_BUILD_USER: 'smol', KBUILD_BUILD_HOST: 'smol-studio' };
    const run = (command: string, args: string[], onLine?: (line: string) => void) =>
      runLogged(command, args, { cwd: src, log, env, onLine, signal: options.signal });

    report({ step: 'kernel extract', detail: source.tarball });
    await run('tar', ['-xf', source.tarball, '--strip-components=1']);

    report({ step: 'kernel configure', detail: 'make tinyconfig' });
    await run('make', ['tinyconfig']);
    report({ step: 'kernel configure', detail: 'merge smol.config' });
    await run('scripts/kconfig/merge_config.sh', ['-m', '.config', KERNEL_FRAGMENT]);
    report({ step: 'kernel configure', detail: 'make olddefconfig' });
    await run('make', ['olddefconfig']);
    const dropped = findDroppedOptions(fragment.toString('utf8'), readFileSync(path.join(src, '.config'), 'utf8'));
    if (dropped.length > 0) {
      throw new Error(
        `${dropped.length} option(s) of ${KERNEL_FRAGMENT} did not survive make olddefconfig ` +
          `(a dependency is missing, or another option selects them); fix the fragment:\n` +
          formatDroppedOptions(dropped, path.relative(process.cwd(), KERNEL_FRAGMENT)),
      );
    }
    report({ step: 'kernel configure', detail: `all ${KERNEL_FRAGMENT_NAME} options present`, fraction: 1 });

    const jobs = options.jobs ?? os.availableParallelism() + 1;
    const expected = expectedCompileLines(guestDir);
    let compiled = 0;
    report({ step: 'kernel compile', detail: `make -j${jobs} vmlinux bzImage`, fraction: 0 });
    await run('make', [`-j${jobs}`, 'vmlinux', 'bzImage'], (line) => {
      const cc = /^\s+CC\s+(\S+)/.exec(line);
      if (!cc) return;
      compiled += 1;
      const file = cc[1]!.startsWith(`${src}/`) ? cc[1]!.slice(src.length + 1) : cc[1]!; // objtool prints full paths
      report({ step: 'kernel compile', detail: file, fraction: Math.min(0.99, compiled / expected) });
    });
    report({ step: 'kernel compile', detail: `${compiled} files compiled`, fraction: 1 });

    report({ step: 'kernel install', detail: dir });
    const staging = path.join(work, 'out');
    mkdirSync(staging);
    // DEBUG_INFO_NONE leaves little to strip; --strip-debug keeps the symbol table for debuggers.
    await run('objcopy', ['--strip-debug', 'vmlinux', path.join(staging, 'vmlinux')]);
    copyFileSync(path.join(src, 'arch/x86/boot/bzImage'), path.join(staging, 'bzImage'));
    copyFileSync(path.join(src, '.config'), path.join(staging, 'config'));
    const info: KernelBuildInfo = {
      hash,
      release: readFileSync(path.join(src, 'include/config/kernel.release'), 'utf8').trim(),
      source: { package: source.package, version: source.version },
      recipeVersion: KERNEL_RECIPE_VERSION,
      fragmentSha256: sha256(fragment),
      builtAt: new Date().toISOString(),
      buildSeconds: Math.round((Date.now() - started) / 1000),
      compileLines: compiled,
      sizes: {
        vmlinux: statSync(path.join(staging, 'vmlinux')).size,
        bzImage: statSync(path.join(staging, 'bzImage')).size,
      },
    };
    writeFileSync(path.join(staging, 'build.json'), JSON.stringify(info, null, 2) + '\n');
    for (const name of ['vmlinux', 'bzImage', 'config', 'build.json']) syncFile(path.join(staging, name));
    publishEntry(staging, dir, { replace: options.force === true });
    report({ step: 'kernel install', detail: `${kernelDirName(hash)} (Linux ${info.release})`, fraction: 1 });
    return { current, dir, cached: false, info };
  } finally {
    report({ step: 'kernel cleanup', detail: `removing the build tree ${work}` });
    rmSync(work, { recursive: true, force: true });
  }
}
