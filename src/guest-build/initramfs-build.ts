// The base initramfs: Debian's busybox-static with its applet links, resources/guest-initramfs (/init and
// /etc/inittab) and the guest agent (/sbin/smol-agent, built by `make -C native agent`), as an uncompressed newc
// cpio archive initramfs-<hash>.cpio under the guest cache.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import path from 'node:path';
import { AGENT_BINARY } from '../agent-client/host-agent.js';
import { packageRoot } from '../package-root.js';
import type { ProgressCallback } from './build-progress.js';
import { newcArchive, type CpioEntry } from './cpio-newc.js';
import { initramfsFileName, writeFileAtomic, type CurrentInitramfs } from './guest-assets.js';
import { ensurePackages, type PackageTools } from './host-packages.js';

/** Bump when the archive's layout changes. */
export const INITRAMFS_RECIPE_VERSION = 2;
export const INITRAMFS_RESOURCES = path.join(packageRoot, 'resources', 'guest-initramfs');
export const INITRAMFS_PACKAGES = ['busybox-static'];
const BUSYBOX = '/bin/busybox';
/**
 * File → path in the archive, mode. busybox init stays PID 1 and starts the agent from /etc/inittab (docs/agent.md,
 * "In the guest").
 */
const RESOURCE_FILES = [
  { name: 'init', source: path.join(INITRAMFS_RESOURCES, 'init'), target: 'init', mode: 0o755 },
  { name: 'inittab', source: path.join(INITRAMFS_RESOURCES, 'inittab'), target: 'etc/inittab', mode: 0o644 },
  { name: 'smol-agent', source: AGENT_BINARY, target: 'sbin/smol-agent', mode: 0o755 },
] as const;
const DIRECTORIES: [string, number][] = [
  ['bin', 0o755],
  ['sbin', 0o755],
  ['usr', 0o755],
  ['usr/bin', 0o755],
  ['usr/sbin', 0o755],
  ['dev', 0o755],
  ['etc', 0o755],
  ['proc', 0o555],
  ['sys', 0o555],
  ['root', 0o700],
  ['run', 0o755],
  ['tmp', 0o1777],
];

export interface InitramfsInputs {
  files: { name: string; data: Buffer }[];
  busyboxVersion: string;
}

export interface InitramfsBuildResult {
  current: CurrentInitramfs;
  file: string;
  cached: boolean;
  size: number;
}

/**
 * The cache key: the resource files and the agent binary (names and bytes), busybox-static's version and the
 * recipe version.
 */
export function initramfsHash(inputs: InitramfsInputs): string {
  const hash = createHash('sha256').update(`smol-guest-initramfs\0recipe ${INITRAMFS_RECIPE_VERSION}\0`);
  hash.update(`busybox-static=${inputs.busyboxVersion}\0`);
  for (const file of inputs.files) hash.update(`${file.name}\0${file.data.length}\0`).update(file.data);
  return hash.digest('hex').slice(0, 16);
}

export function readInitramfsResources(): InitramfsInputs['files'] {
  if (!existsSync(AGENT_BINARY))
    throw new Error(`${AGENT_BINARY} is missing: build the guest agent first (make -C native agent)`);
  return RESOURCE_FILES.map(({ name, source }) => ({ name, data: readFileSync(source) }));
}

/** True when an ELF file has a PT_INTERP program header, i.e. needs a dynamic loader the initramfs lacks. */
export function isDynamicElf(file: string): boolean {
  const fd = openSync(file, 'r');
  try {
    const header = Buffer.alloc(64);
    readSync(fd, header, 0, 64, 0);
    if (header.toString('latin1', 0, 4) !== '\x7fELF' || header[4] !== 2)
      throw new Error(`${file} is not an ELF64 file`);
    const phoff = Number(header.readBigUInt64LE(0x20));
    const phentsize = header.readUInt16LE(0x36);
    const phnum = header.readUInt16LE(0x38);
    const table = Buffer.alloc(phentsize * phnum);
    readSync(fd, table, 0, table.length, phoff);
    for (let i = 0; i < phnum; i++) if (table.readUInt32LE(i * phentsize) === 3) return true; // PT_INTERP
    return false;
  } finally {
    closeSync(fd);
  }
}

/** Paths of busybox's applets, as `busybox --list-full` gives them (bin/sh, usr/bin/awk, …). */
function busyboxApplets(): string[] {
  const result = spawnSync(BUSYBOX, ['--list-full'], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${BUSYBOX} --list-full failed: ${result.stderr || result.error?.message}`);
  return result.stdout.split('\n').filter((line) => line !== '' && line !== 'bin/busybox');
}

/** Everything in the archive, parents first. */
export function initramfsEntries(files: InitramfsInputs['files'], busybox: Buffer, applets: string[]): CpioEntry[] {
  const entries: CpioEntry[] = DIRECTORIES.map(([dir, mode]) => ({ type: 'dir', path: dir, mode }));
  entries.push({ type: 'chardev', path: 'dev/console', major: 5, minor: 1, mode: 0o600 });
  entries.push({ type: 'file', path: 'bin/busybox', data: busybox, mode: 0o755 });
  const known = new Set(['.', ...entries.map((entry) => entry.path)]);
  for (const applet of applets) {
    if (known.has(applet)) continue;
    const parent = path.posix.dirname(applet);
    if (!known.has(parent)) throw new Error(`busybox applet ${applet} is in ${parent}/, which the initramfs lacks`);
    entries.push({ type: 'symlink', path: applet, target: '/bin/busybox' });
    known.add(applet);
  }
  for (const { name, source, target, mode } of RESOURCE_FILES) {
    const file = files.find((f) => f.name === name);
    if (!file) throw new Error(`${source} is missing`);
    entries.push({ type: 'file', path: target, data: file.data, mode });
  }
  return entries;
}

/**
 * The archive's entries from this host's busybox-static and `files` (readInitramfsResources()); the root disk
 * (rootfs-build.ts) holds the same tree. Both programs must be static: there is no dynamic loader in the guest.
 */
export function readInitramfsEntries(files: InitramfsInputs['files']): CpioEntry[] {
  if (isDynamicElf(BUSYBOX)) {
    throw new Error(
      `${BUSYBOX} is dynamically linked (Debian's busybox package?); the guest needs busybox-static: ` +
        'apt-get install busybox-static',
    );
  }
  if (isDynamicElf(AGENT_BINARY))
    throw new Error(`${AGENT_BINARY} is dynamically linked; native/Makefile builds it with -static`);
  return initramfsEntries(files, readFileSync(BUSYBOX), busyboxApplets());
}

export interface InitramfsBuildOptions {
  guestDir: string;
  tools: PackageTools;
  force?: boolean;
  onProgress?: ProgressCallback;
}

/** Builds initramfs-<hash>.cpio unless it exists (or `force`); returns where it is. */
export function buildInitramfs(options: InitramfsBuildOptions): InitramfsBuildResult {
  const { guestDir, tools } = options;
  const report = options.onProgress ?? (() => {});
  report({ step: 'initramfs', detail: INITRAMFS_PACKAGES.join(' ') });
  ensurePackages(tools, INITRAMFS_PACKAGES, (missing) =>
    report({ step: 'initramfs', detail: `apt-get install ${missing.join(' ')}` }),
  );
  const busyboxVersion = tools.installedVersions(['busybox-static']).get('busybox-static') ?? 'unknown';
  const files = readInitramfsResources();
  const hash = initramfsHash({ files, busyboxVersion });
  const name = initramfsFileName(hash);
  const file = path.join(guestDir, name);
  const current: CurrentInitramfs = { hash, file: name };
  if (existsSync(file) && !options.force) {
    report({ step: 'initramfs', detail: `cached ${name}`, fraction: 1 });
    return { current, file, cached: true, size: statSync(file).size };
  }
  report({ step: 'initramfs', detail: `packing ${name}` });
  const archive = newcArchive(readInitramfsEntries(files));
  writeFileAtomic(file, archive);
  report({ step: 'initramfs', detail: `${name} (${(archive.length / 1024 / 1024).toFixed(1)} MiB)`, fraction: 1 });
  return { current, file, cached: false, size: archive.length };
}
