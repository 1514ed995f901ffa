// Where the Linux guest's kernel, initramfs and root disk live, and which ones are current.
//
//   <cache>/guest/                        (guestCacheDir: ${SMOL_CACHE:-${XDG_CACHE_HOME:-~/.cache}/smol-studio}/guest)
//     kernel-<hash>/vmlinux               ELF64, physical load addresses: what the VMM boots
//     kernel-<hash>/bzImage               the same kernel, compressed, for boot loaders that want one
//     kernel-<hash>/config, build.json    the final .config and how it was built
//     initramfs-<hash>.cpio               newc cpio, uncompressed
//     rootfs-<hash>.ext4                  the initramfs's tree on a sparse raw ext4 image: a disk base (docs/disks.md)
//     current.json                        the kernel, initramfs and root disk `smol guest build` built or found last
//     logs/                               the output of the last kernel and root disk build for each hash
//
// Entries are published atomically (written under a temporary name, flushed, then renamed), so a reader sees either
// nothing or a complete entry. current.json holds paths relative to the guest directory.
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { guestCacheDir } from '../smol-dirs.js';

export const CURRENT_FILE = 'current.json';
/**
 * The command line the guest is built for: COM1 console, reset through the i8042, end on panic, no PCI probe, and
 * `quiet`: each console byte is a VM exit, and in the lab the boot messages were 3.4 s of a 4.5 s boot (docs/guest.md).
 */
export const GUEST_CMDLINE = 'console=ttyS0 reboot=k panic=-1 pci=off quiet';
/**
 * The same for a VM with a virtio-console, as the engine boots every image: the console is /dev/hvc0, whose output
 * crosses a buffer per VM exit instead of a byte (docs/vmm.md, "virtio-console"). The kernel keeps its messages from
 * before the driver starts and prints them when hvc0 appears.
 */
export const GUEST_HVC_CMDLINE = 'console=hvc0 reboot=k panic=-1 pci=off quiet';

/** A command line whose console is hvc0: the VM gets a virtio-console (the engine's rule, docs/engine.md). */
export function namesHvcConsole(cmdline: string | undefined): boolean {
  return /(^|\s)console=hvc0(,\S*)?(?=\s|$)/.test(cmdline ?? '');
}
/**
 * What to add to GUEST_CMDLINE to boot from the root disk (the rootfs image as the VM's disk base) with no initrd:
 * /dev/vda is the root, mounted read-write by the kernel (each VM writes to its own layer over the shared image), and
 * waited for rather than a panic should the disk show up late; PID 1 is /init, the same script as in the initramfs,
 * not the kernel's default /sbin/init (busybox init, which would skip our mounts and the ready line).
 */
export const GUEST_ROOT_CMDLINE = 'root=/dev/vda rw rootwait init=/init';

/**
 * eth0's configuration for the kernel's IP autoconfiguration (CONFIG_IP_PNP): libslirp's fixed addresses
 * (docs/network.md, "The guest's network"), the stack's DNS as the name server, autoconf off.
 */
export const GUEST_IP_CMDLINE = 'ip=10.0.2.15::10.0.2.2:255.255.255.0:smol:eth0:off:10.0.2.3';

const CURRENT_FORMAT = 1;

export interface CurrentKernel {
  hash: string;
  /** Relative to the guest directory. */
  vmlinux: string;
  bzImage: string;
}

export interface CurrentInitramfs {
  hash: string;
  /** Relative to the guest directory. */
  file: string;
}

export interface CurrentRootfs {
  hash: string;
  /** Relative to the guest directory. */
  file: string;
}

export interface CurrentGuest {
  format: number;
  kernel?: CurrentKernel;
  initramfs?: CurrentInitramfs;
  rootfs?: CurrentRootfs;
  updated: string;
}

/** Absolute paths of the current guest assets; a field is missing when it was never built or its file is gone. */
export interface GuestAssets {
  kernel?: string;
  initramfs?: string;
  /** The root disk image, a raw ext4 file system to use as a disk's base (boot with GUEST_ROOT_CMDLINE). */
  rootfs?: string;
}

export const kernelDirName = (hash: string) => `kernel-${hash}`;
export const initramfsFileName = (hash: string) => `initramfs-${hash}.cpio`;
export const rootfsFileName = (hash: string) => `rootfs-${hash}.ext4`;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function pickStrings<K extends string>(value: unknown, keys: readonly K[]): Record<K, string> | undefined {
  if (!isObject(value)) return undefined;
  const picked = {} as Record<K, string>;
  for (const key of keys) {
    const field = value[key];
    if (typeof field !== 'string' || field === '') return undefined;
    picked[key] = field;
  }
  return picked;
}

/** current.json, or null when there is none or it cannot be read (a rebuild rewrites it). */
export function readCurrentGuest(guestDir: string): CurrentGuest | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path.join(guestDir, CURRENT_FILE), 'utf8'));
  } catch {
    return null;
  }
  if (!isObject(parsed) || parsed.format !== CURRENT_FORMAT) return null;
  const current: CurrentGuest = {
    format: CURRENT_FORMAT,
    updated: typeof parsed.updated === 'string' ? parsed.updated : '',
  };
  const kernel = pickStrings(parsed.kernel, ['hash', 'vmlinux', 'bzImage'] as const);
  if (kernel) current.kernel = kernel;
  const initramfs = pickStrings(parsed.initramfs, ['hash', 'file'] as const);
  if (initramfs) current.initramfs = initramfs;
  const rootfs = pickStrings(parsed.rootfs, ['hash', 'file'] as const);
  if (rootfs) current.rootfs = rootfs;
  return current;
}

/** Flushes a file to disk, so that a rename after it cannot publish an empty file after a crash. */
export function syncFile(file: string): void {
  const fd = openSync(file, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes `<path>` atomically: a temporary file in the same directory, flushed, then a rename. */
export function writeFileAtomic(file: string, data: string | Buffer): void {
  const tmp = `${file}.tmp-${process.pid}-${Date.now()}`;
  try {
    writeFileSync(tmp, data);
    syncFile(tmp);
    renameSync(tmp, file);
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** Records the kernel, initramfs and/or root disk as current, keeping what is not given. */
export function updateCurrentGuest(
  guestDir: string,
  update: { kernel?: CurrentKernel; initramfs?: CurrentInitramfs; rootfs?: CurrentRootfs },
  now: Date = new Date(),
): CurrentGuest {
  const previous = readCurrentGuest(guestDir);
  const current: CurrentGuest = { format: CURRENT_FORMAT, updated: now.toISOString() };
  const kernel = update.kernel ?? previous?.kernel;
  const initramfs = update.initramfs ?? previous?.initramfs;
  const rootfs = update.rootfs ?? previous?.rootfs;
  if (kernel) current.kernel = kernel;
  if (initramfs) current.initramfs = initramfs;
  if (rootfs) current.rootfs = rootfs;
  writeFileAtomic(path.join(guestDir, CURRENT_FILE), JSON.stringify(current, null, 2) + '\n');
  return current;
}

/**
 * Moves a finished temporary file or directory to its final name. When the final name already exists, `replace`
 * swaps the new entry in (the old one is renamed aside first, so the name never points at nothing); otherwise the
 * existing entry wins and ours is removed (another build of the same inputs finished first).
 */
export function publishEntry(tmp: string, final: string, options: { replace?: boolean } = {}): void {
  const aside = `${final}.old-${process.pid}-${Date.now()}`;
  try {
    if (options.replace && existsSync(final)) renameSync(final, aside);
    renameSync(tmp, final);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (!existsSync(final) || (code !== 'ENOTEMPTY' && code !== 'EEXIST')) throw err;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
    rmSync(aside, { recursive: true, force: true });
  }
}

/** The current kernel (vmlinux), initramfs and root disk, for `smol boot`, `smol doctor` and the engine; never throws. */
export function findGuestAssets(env: NodeJS.ProcessEnv = process.env): GuestAssets {
  const dir = guestCacheDir(env);
  const current = readCurrentGuest(dir);
  const assets: GuestAssets = {};
  const resolve = (relative: string | undefined) => {
    if (relative === undefined) return undefined;
    const file = path.resolve(dir, relative);
    return existsSync(file) ? file : undefined;
  };
  const kernel = resolve(current?.kernel?.vmlinux);
  const initramfs = resolve(current?.initramfs?.file);
  const rootfs = resolve(current?.rootfs?.file);
  if (kernel) assets.kernel = kernel;
  if (initramfs) assets.initramfs = initramfs;
  if (rootfs) assets.rootfs = rootfs;
  return assets;
}
