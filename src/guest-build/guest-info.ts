// `smol guest info` without the command line: what current.json names, whether the files are there, and whether
// they still match the recipe in this checkout (a changed fragment, init or package version means: rebuild).
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { guestCacheDir } from '../smol-dirs.js';
import { readCurrentGuest } from './guest-assets.js';
import { debianPackageTools, type PackageTools } from './host-packages.js';
import { initramfsHash, readInitramfsResources } from './initramfs-build.js';
import {
  findKernelSource,
  KERNEL_FRAGMENT,
  kernelHash,
  readKernelBuildInfo,
  type KernelBuildInfo,
} from './kernel-build.js';
import { ROOTFS_SIZE_BYTES, rootfsHash } from './rootfs-build.js';

export interface GuestInfo {
  dir: string;
  kernel: {
    hash: string;
    vmlinux: string;
    bzImage: string;
    present: boolean;
    build: KernelBuildInfo | null;
    /** null when the recipe's hash cannot be computed here (linux-source is not installed). */
    upToDate: boolean | null;
  } | null;
  initramfs: {
    hash: string;
    file: string;
    present: boolean;
    size: number | null;
    upToDate: boolean | null;
  } | null;
  rootfs: {
    hash: string;
    file: string;
    present: boolean;
    /** The disk's size (apparent) and what the sparse file takes on the host's disk. */
    size: number | null;
    allocated: number | null;
    upToDate: boolean | null;
  } | null;
}

function expectedKernelHash(tools: PackageTools): string | null {
  try {
    return kernelHash({ fragment: readFileSync(KERNEL_FRAGMENT), source: findKernelSource(tools) });
  } catch {
    return null;
  }
}

function expectedInitramfsHash(tools: PackageTools): string | null {
  try {
    const busyboxVersion = tools.installedVersions(['busybox-static']).get('busybox-static');
    return busyboxVersion ? initramfsHash({ files: readInitramfsResources(), busyboxVersion }) : null;
  } catch {
    return null;
  }
}

function expectedRootfsHash(tools: PackageTools, initramfs: string | null): string | null {
  try {
    const e2fsprogsVersion = tools.installedVersions(['e2fsprogs']).get('e2fsprogs');
    if (!initramfs || !e2fsprogsVersion) return null;
    return rootfsHash({ initramfsHash: initramfs, sizeBytes: ROOTFS_SIZE_BYTES, e2fsprogsVersion });
  } catch {
    return null;
  }
}

export function guestInfo(env: NodeJS.ProcessEnv = process.env, tools: PackageTools = debianPackageTools()): GuestInfo {
  const dir = guestCacheDir(env);
  const current = readCurrentGuest(dir);
  const info: GuestInfo = { dir, kernel: null, initramfs: null, rootfs: null };
  if (current?.kernel) {
    const vmlinux = path.resolve(dir, current.kernel.vmlinux);
    const expected = expectedKernelHash(tools);
    info.kernel = {
      hash: current.kernel.hash,
      vmlinux,
      bzImage: path.resolve(dir, current.kernel.bzImage),
      present: existsSync(vmlinux),
      build: readKernelBuildInfo(path.dirname(vmlinux)),
      upToDate: expected === null ? null : expected === current.kernel.hash,
    };
  }
  const expectedInitramfs = current?.initramfs || current?.rootfs ? expectedInitramfsHash(tools) : null;
  if (current?.initramfs) {
    const file = path.resolve(dir, current.initramfs.file);
    const present = existsSync(file);
    const expected = expectedInitramfs;
    info.initramfs = {
      hash: current.initramfs.hash,
      file,
      present,
      size: present ? statSync(file).size : null,
      upToDate: expected === null ? null : expected === current.initramfs.hash,
    };
  }
  if (current?.rootfs) {
    const file = path.resolve(dir, current.rootfs.file);
    const stats = existsSync(file) ? statSync(file) : null;
    const expected = expectedRootfsHash(tools, expectedInitramfs);
    info.rootfs = {
      hash: current.rootfs.hash,
      file,
      present: stats !== null,
      size: stats?.size ?? null,
      allocated: stats ? stats.blocks * 512 : null,
      upToDate: expected === null ? null : expected === current.rootfs.hash,
    };
  }
  return info;
}
