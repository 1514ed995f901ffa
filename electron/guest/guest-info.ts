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

export function guestInfo(env: NodeJS.ProcessEnv = process.env, tools: PackageTools = debianPackageTools()): GuestInfo {
  const dir = guestCacheDir(env);
  const current = readCurrentGuest(dir);
  const info: GuestInfo = { dir, kernel: null, initramfs: null };
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
  if (current?.initramfs) {
    const file = path.resolve(dir, current.initramfs.file);
    const present = existsSync(file);
    const expected = expectedInitramfsHash(tools);
    info.initramfs = {
      hash: current.initramfs.hash,
      file,
      present,
      size: present ? statSync(file).size : null,
      upToDate: expected === null ? null : expected === current.initramfs.hash,
    };
  }
  return info;
}
