// `smol guest build` without the command line: the initramfs and the root disk with the same tree (seconds), then the
// kernel (minutes), each recorded in current.json as soon as it exists, so a failed kernel build still leaves a usable
// initramfs and root disk behind.
import { mkdirSync } from 'node:fs';
import { guestCacheDir } from '../smol-dirs.js';
import type { ProgressCallback } from './build-progress.js';
import { updateCurrentGuest, type CurrentGuest } from './guest-assets.js';
import { debianPackageTools, type PackageTools } from './host-packages.js';
import { buildInitramfs, type InitramfsBuildResult } from './initramfs-build.js';
import { buildKernel, type KernelBuildResult } from './kernel-build.js';
import { buildRootfs, type RootfsBuildResult } from './rootfs-build.js';

export interface GuestBuildOptions {
  env?: NodeJS.ProcessEnv;
  force?: boolean;
  onProgress?: ProgressCallback;
  signal?: AbortSignal;
  tools?: PackageTools;
}

export interface GuestBuildResult {
  dir: string;
  initramfs: InitramfsBuildResult;
  rootfs: RootfsBuildResult;
  kernel: KernelBuildResult;
  current: CurrentGuest;
}

export async function buildGuest(options: GuestBuildOptions = {}): Promise<GuestBuildResult> {
  const dir = guestCacheDir(options.env);
  mkdirSync(dir, { recursive: true });
  const tools = options.tools ?? debianPackageTools();
  const common = { guestDir: dir, tools, force: options.force ?? false, onProgress: options.onProgress };
  const initramfs = buildInitramfs(common);
  updateCurrentGuest(dir, { initramfs: initramfs.current });
  const rootfs = await buildRootfs({ ...common, initramfs: initramfs.current, signal: options.signal });
  updateCurrentGuest(dir, { rootfs: rootfs.current });
  const kernel = await buildKernel({ ...common, signal: options.signal });
  const current = updateCurrentGuest(dir, { kernel: kernel.current });
  return { dir, initramfs, rootfs, kernel, current };
}
