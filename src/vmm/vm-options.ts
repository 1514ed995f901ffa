// Checks what a caller asks of a VM before the native VMM sees it, so mistakes get messages that name the option.
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import path from 'node:path';
import type { DeviceResources, DiskConfig, NativeVmConfig, VsockConfig } from './native.js';

export interface VmOptions {
  /** ELF64 kernel (Linux vmlinux or a tiny guest) or bzImage. */
  kernel: string;
  initrd?: string;
  cmdline?: string;
  /** Guest RAM in MiB; 256 when omitted. */
  memoryMiB?: number;
  /** Number of vCPUs; 1 when omitted. */
  cpus?: number;
  /** Size of the VMM's console output ring; the VMM's default (1 MiB) when omitted. Tests shrink it. */
  consoleBufferBytes?: number;
  /** A virtio-blk disk, /dev/vda in the guest (docs/disks.md). */
  disk?: DiskConfig;
  /** Further virtio-blk disks, the volumes (docs/disks.md, "Volumes"): at most 4. */
  volumes?: DiskConfig[];
  /** A virtio-rng device (/dev/hwrng in the guest). */
  rng?: boolean;
  /**
   * A virtio-console on the same console as COM1 (/dev/hvc0 in the guest; boot Linux with `console=hvc0`): output
   * crosses a buffer per VM exit instead of a byte, and input goes to it once the guest's driver is up.
   */
  virtioConsole?: boolean;
  /** A virtio-vsock device whose host side is the Unix socket `path` (docs/vmm.md, "vsock"). */
  vsock?: VsockConfig;
  /** A virtio-net device on a user-mode stack, configured by the file at `virtio-net`'s path (docs/network.md). */
  resources?: Pick<DeviceResources, 'virtio-net'>;
}

/** The same limits the native VMM enforces (native/vmm/vm.h), checked here first for clearer messages. */
export const VM_LIMITS = {
  memoryMiB: { min: 2, max: 256 * 1024, default: 256 },
  cpus: { min: 1, max: 64, default: 1 },
  /** The command line page holds 2048 bytes including the terminating NUL (docs/vmm.md). */
  cmdlineMaxBytes: 2047,
  /** The native VMM checks its own bounds; this only keeps out what cannot be a size. */
  consoleBufferBytes: { min: 1, max: 2 ** 31 - 1 },
  volumes: 4, // VM_MAX_VOLUMES
} as const;

const KNOWN_OPTIONS = new Set([
  'kernel',
  'initrd',
  'cmdline',
  'memoryMiB',
  'cpus',
  'consoleBufferBytes',
  'disk',
  'volumes',
  'rng',
  'virtioConsole',
  'vsock',
  'resources',
]);

function checkInteger(name: string, value: unknown, limits: { min: number; max: number }): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < limits.min || value > limits.max) {
    throw new RangeError(`${name} must be an integer between ${limits.min} and ${limits.max} (got ${String(value)})`);
  }
  return value;
}

async function checkFile(what: string, file: unknown): Promise<string> {
  if (typeof file !== 'string' || file === '') {
    throw new TypeError(`${what} must be a file path (got ${JSON.stringify(file)})`);
  }
  const resolved = path.resolve(file);
  let info;
  try {
    info = await stat(resolved);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(code === 'ENOENT' ? `${what} ${resolved}: no such file` : `${what} ${resolved}: ${code ?? err}`);
  }
  if (!info.isFile()) throw new Error(`${what} ${resolved}: not a regular file`);
  try {
    await access(resolved, constants.R_OK);
  } catch {
    throw new Error(`${what} ${resolved}: not readable by this user`);
  }
  return resolved;
}

/** Validates options, applies defaults and resolves paths against the current directory. */
export async function resolveVmOptions(options: VmOptions): Promise<NativeVmConfig> {
  if (typeof options !== 'object' || options === null) throw new TypeError('VM options must be an object');
  const unknown = Object.keys(options).filter((key) => !KNOWN_OPTIONS.has(key));
  if (unknown.length > 0) {
    throw new TypeError(`unknown VM option ${unknown.join(', ')} (known: ${[...KNOWN_OPTIONS].join(', ')})`);
  }
  const config: NativeVmConfig = {
    kernel: await checkFile('kernel', options.kernel),
    memoryMiB: checkInteger('memoryMiB', options.memoryMiB ?? VM_LIMITS.memoryMiB.default, VM_LIMITS.memoryMiB),
    cpus: checkInteger('cpus', options.cpus ?? VM_LIMITS.cpus.default, VM_LIMITS.cpus),
  };
  if (options.initrd !== undefined) config.initrd = await checkFile('initrd', options.initrd);
  if (options.cmdline !== undefined) {
    const { cmdline } = options;
    if (typeof cmdline !== 'string') throw new TypeError(`cmdline must be a string (got ${typeof cmdline})`);
    if (cmdline.includes('\0')) throw new RangeError('cmdline must not contain NUL characters');
    const bytes = Buffer.byteLength(cmdline);
    if (bytes > VM_LIMITS.cmdlineMaxBytes) {
      throw new RangeError(`cmdline is ${bytes} bytes; at most ${VM_LIMITS.cmdlineMaxBytes} fit`);
    }
    config.cmdline = cmdline;
  }
  if (options.disk !== undefined) {
    const { disk } = options;
    if (typeof disk !== 'object' || disk === null) throw new TypeError('disk must be an object {base, top?}');
    config.disk = { base: await checkFile('disk.base', disk.base) };
    if (disk.top !== undefined) {
      if (typeof disk.top !== 'string' || disk.top === '') throw new TypeError('disk.top must be a file path');
      config.disk.top = path.resolve(disk.top);
    }
  }
  if (options.volumes !== undefined) {
    const { volumes } = options;
    if (!Array.isArray(volumes)) throw new TypeError('volumes must be an array of {base, top?}');
    if (volumes.length > VM_LIMITS.volumes) {
      throw new RangeError(`at most ${VM_LIMITS.volumes} volumes fit (got ${volumes.length})`);
    }
    config.volumes = [];
    for (const [i, volume] of volumes.entries()) {
      if (typeof volume !== 'object' || volume === null) throw new TypeError(`volumes[${i}] must be {base, top?}`);
      const resolved: DiskConfig = { base: await checkFile(`volumes[${i}].base`, volume.base) };
      if (volume.top !== undefined) {
        if (typeof volume.top !== 'string' || volume.top === '') {
          throw new TypeError(`volumes[${i}].top must be a file path`);
        }
        resolved.top = path.resolve(volume.top);
      }
      config.volumes.push(resolved);
    }
  }
  for (const flag of ['rng', 'virtioConsole'] as const) {
    const value = options[flag];
    if (value === undefined) continue;
    if (typeof value !== 'boolean') throw new TypeError(`${flag} must be true or false (got ${String(value)})`);
    config[flag] = value;
  }
  if (options.vsock !== undefined) {
    const { vsock } = options;
    if (typeof vsock !== 'object' || vsock === null) throw new TypeError('vsock must be an object {path, cid?}');
    if (typeof vsock.path !== 'string' || vsock.path === '') throw new TypeError('vsock.path must be a socket path');
    config.vsock = { path: path.resolve(vsock.path) };
    // sun_path holds 108 bytes, and guest-initiated connections append `_<port>` to the path.
    if (Buffer.byteLength(config.vsock.path) > 95) {
      throw new RangeError(`vsock.path is too long for a Unix socket (at most 95 bytes): ${config.vsock.path}`);
    }
    if (vsock.cid !== undefined) config.vsock.cid = checkInteger('vsock.cid', vsock.cid, { min: 3, max: 2 ** 32 - 1 });
  }
  if (options.resources !== undefined) {
    const { resources } = options;
    if (typeof resources !== 'object' || resources === null || Array.isArray(resources)) {
      throw new TypeError("resources must be an object keyed by device name ({ 'virtio-net': { path } })");
    }
    for (const device of Object.keys(resources)) {
      if (device !== 'virtio-net') throw new TypeError(`resources: a boot takes only 'virtio-net' (got '${device}')`);
    }
    const net = resources['virtio-net'];
    if (net !== undefined)
      config.resources = { 'virtio-net': { path: await checkFile("resources['virtio-net'].path", net?.path) } };
  }
  if (options.consoleBufferBytes !== undefined) {
    config.consoleBufferBytes = checkInteger(
      'consoleBufferBytes',
      options.consoleBufferBytes,
      VM_LIMITS.consoleBufferBytes,
    );
  }
  return config;
}
