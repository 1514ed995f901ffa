// The Node-API binding of the C VMM (native/binding). The contract is docs/vmm.md; these types mirror it.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { packageRoot } from '../package-root.js';

export type KvmImplementation = 'hardware' | 'pvm' | 'unknown';

export interface KvmProbe {
  present: boolean;
  usable: boolean;
  error?: string;
  apiVersion?: number;
  implementation: KvmImplementation;
  /** Keyed by the KVM_CAP_* name without its prefix: `IRQCHIP`, `PIT2`, `USER_MEMORY`, ... */
  capabilities: Record<string, boolean>;
  /** The capabilities the VMM refuses to run without (a subset of the keys of `capabilities`). */
  required?: string[];
}

/** A virtio-blk disk (docs/disks.md): a raw base image and, for a writable disk, the VM's own top layer. */
export interface DiskConfig {
  base: string;
  /** Opened when it exists (it must sit on `base`), created over `base` when not; absent: the disk is read-only. */
  top?: string;
}

export interface NativeVmConfig {
  kernel: string;
  initrd?: string;
  cmdline?: string;
  memoryMiB: number;
  cpus: number;
  consoleBufferBytes?: number;
  disk?: DiskConfig;
  /**
   * Volumes (docs/disks.md, "Volumes"): volume i is the device `virtio-blk-<i+1>`, serial `smol-vol<i+1>` in the
   * guest; with `top` its writable layer (that device's resource later), without it read-only. At most 4.
   */
  volumes?: DiskConfig[];
  /** A virtio-rng device. */
  rng?: boolean;
  /** A virtio-console on the VM's console (docs/vmm.md, "virtio-console"). */
  virtioConsole?: boolean;
  /** A virtio-vsock device (docs/vmm.md, "vsock"). */
  vsock?: VsockConfig;
  /** Devices their resource alone configures: a `virtio-net` entry gives the VM a network (docs/network.md). */
  resources?: Pick<DeviceResources, 'virtio-net'>;
}

/**
 * A virtio-vsock device whose host side is the Unix socket `path`: connect, send `CONNECT <port>\n`, read
 * `OK <port>\n`, then the stream is the guest's; the guest's connect(2) to CID 2, port P reaches `<path>_<P>`.
 */
export interface VsockConfig {
  path: string;
  /** The guest's CID, 3 or more (default 3). */
  cid?: number;
}

/**
 * What each device needs from the host at a restore, a checkpoint or a fork, keyed by the device's name (docs/vmm.md,
 * "Device resources"); the VMM refuses a name no device has. A new device adds a key here, not an option.
 */
export interface DeviceResources {
  /** The new writable disk layer (it must not exist) over the one the snapshot froze (docs/disks.md). */
  'virtio-blk'?: { path: string };
  /** The same for a writable volume's disk, volume N (docs/disks.md, "Volumes"). */
  'virtio-blk-1'?: { path: string };
  'virtio-blk-2'?: { path: string };
  'virtio-blk-3'?: { path: string };
  'virtio-blk-4'?: { path: string };
  /** The Unix socket the vsock muxer listens on (docs/vmm.md, "vsock"). */
  'virtio-vsock'?: { path: string };
  /**
   * The VM's network configuration file (docs/network.md, "Host resource"): a boot with it gets a virtio-net
   * device, and a restore or fork child of such a VM needs its own (its stack and `ports` forwards are its own).
   */
  'virtio-net'?: { path: string };
}

/**
 * A restored VM or fork child needs a resource for each device of the snapshot that has one: a writable disk its
 * new layer, vsock its socket. A checkpoint of a VM with a writable disk needs the layer it goes on writing.
 */
export interface ResourcesOption {
  resources?: DeviceResources;
}

/** Why the network policy refused a packet (native/vmm/net_policy.h, enum net_rule). */
export type NetworkRule =
  'malformed' | 'protocol' | 'link-local' | 'private' | 'host' | 'reserved' | 'not-allowed' | 'dns-name' | 'fragment';

/** One refused packet (the VM keeps the last 64). */
export interface NetworkRefusal {
  /** 1, 2, ... in the order refused: pass the last one seen to `network(after)` for newer ones only. */
  seq: number;
  /** The destination address ("-" when the frame had none). */
  destination: string;
  /** TCP or UDP destination port; 0 otherwise. */
  port: number;
  protocol: 'tcp' | 'udp' | 'icmp' | 'other';
  rule: NetworkRule;
  /** The DNS name, for `dns-name`. */
  name?: string;
}

export interface NetworkInfo {
  /** The `ports` forwards as bound on 127.0.0.1 (a lone guest port's chosen host port among them). */
  forwards: { host: number; guest: number }[];
  /** Refusals counted per rule since the VM (or this restore of it) started. */
  refused: Record<NetworkRule, number>;
  events: NetworkRefusal[];
  /** Frames handed to the stack, handed to the guest, refused by the policy, dropped on a full receive queue; new
   * connections refused at the 512-socket cap. */
  frames: { sent: number; received: number; refused: number; dropped: number; connectionsRefused: number };
  /** Host sockets the stack holds. */
  sockets: number;
}

/** A disk layer chain as `diskInfo` reads it. */
export interface DiskInfo {
  size: number;
  base: string;
  /** Top first. */
  layers: { path: string; frozen: boolean }[];
}

export type VmState = 'created' | 'running' | 'paused' | 'exited';
export type VmExitReason = 'reset' | 'poweroff' | 'shutdown' | 'panic' | 'killed' | 'error';

export interface VmExit {
  reason: VmExitReason;
  code: number;
  message: string;
}

export interface CheckpointProgress {
  phase: 'memory';
  done: number;
  total: number;
}

/** What `checkpoint` wrote (docs/snapshots.md). */
export interface CheckpointInfo {
  id: string;
  dir: string;
  /** `full`: all of memory; `diff`: the pages written since `parentDir`'s snapshot. */
  kind: 'full' | 'diff';
  parentDir: string | null;
  /** How long the vCPUs were stopped. */
  pauseMs: number;
  /** Writing the snapshot to disk after the VM ran again. */
  writeMs: number;
  /** Pages frozen into a new memory layer by this checkpoint. */
  dirtyPages: number;
  /** Pages in the snapshot's memory layer on disk. */
  pages: number;
  bytesWritten: number;
  memoryBytes: number;
  cpus: number;
  /** The disk layer this checkpoint froze (or the read-only image), which the snapshot needs; null without a disk. */
  disk: string | null;
  /**
   * Its steps (docs/snapshots.md, "Where the time goes"): the pause's, then the write's, in ms since JavaScript
   * asked; startMs, firstEntryMs and firstOutputMs are null.
   */
  trace: VmTrace;
}

export interface MemoryStats {
  guestBytes: number;
  /** Pages of guest RAM this VM has touched. */
  residentBytes: number;
  /** Of those, pages only this VM has (its own writes). */
  privateBytes: number;
  /** Of those, pages read from a snapshot layer other VMs may map too. */
  sharedBytes: number;
}

/** One step of the operation that made a VM (docs/snapshots.md, "Where the time goes"). */
export interface VmTraceStep {
  step: string;
  ms: number;
  /** KVM ioctls the operation's thread made during the step. */
  kvmIoctls: number;
}

/**
 * Where the time of the operation that made a VM (create, restore, fork) went, in ms since JavaScript asked for it:
 * its steps on the native side, and when the VM was started, first entered the guest and first printed (null: not
 * yet). A fork child's steps begin with the parent's checkpoint and the time its elder siblings took.
 */
export interface VmTrace {
  steps: VmTraceStep[];
  totalMs: number;
  kvmIoctls: number;
  startMs: number | null;
  firstEntryMs: number | null;
  firstOutputMs: number | null;
}

export interface ForkCallbacks extends ResourcesOption {
  onConsole: (chunk: Buffer) => void;
  onExit: (exit: VmExit) => void;
}

export interface NativeVm {
  checkpoint(
    dir: string,
    onProgress?: (progress: CheckpointProgress) => void,
    options?: ResourcesOption,
  ): Promise<CheckpointInfo>;
  /** The children are running when it resolves; `options.resources` are the parent's after the fork. */
  fork(children: ForkCallbacks[], options?: ResourcesOption): Promise<NativeVm[]>;
  memoryStats(): Promise<MemoryStats>;
  /** Where the time of the operation that made it went (also after its exit). */
  trace(): VmTrace;
  /** CPU time the running vCPU threads have used, in nanoseconds. */
  cpuTimeNs(): number;
  /** The VM's network as the host sees it (docs/network.md, "Seen from the host"); null without a network. */
  network(after?: number): NetworkInfo | null;
  start(): void;
  resume(): void;
  pause(): Promise<void>;
  kill(): Promise<void>;
  /** Returns how many bytes the console input queue accepted. */
  writeConsole(data: Buffer): number;
  readonly state: VmState;
}

/** The prepared VMs of this process (docs/snapshots.md, "Prepared VMs"). */
export interface VmPoolStats {
  /** At most this many are kept (SMOL_VM_POOL, default 64; 0: none). */
  max: number;
  /** How many recent demand wants ready: the largest batch of the last 30 s, at most max. */
  target: number;
  ready: number;
  /** Creates, restores and fork children that took a prepared VM, and those that found none. */
  taken: number;
  missed: number;
  made: number;
  closed: number;
  failed: number;
  /** Destroyed VMs whose (slow) last close its thread did, and those it has still to do. */
  reaped: number;
  reaping: number;
  /** Its thread is running. */
  thread: boolean;
}

/** An opaque zstd decompression context (native/binding/zstd_wrap.cc). */
export type ZstdStreamHandle = { readonly __zstdStream: unique symbol };

export interface NativeBinding {
  /** Never throws. */
  kvmProbe(): KvmProbe;
  /** The prepared VMs: `max` sets how many at most (0 closes them all), `drain` closes them and stops the thread. */
  vmPool(options?: { max?: number; drain?: boolean }): VmPoolStats;
  createVm(
    config: NativeVmConfig,
    onConsole: (chunk: Buffer) => void,
    onExit: (exit: VmExit) => void,
  ): Promise<NativeVm>;
  /** A new VM (state `created`) that continues from the snapshot in `dir`. */
  restoreVm(
    dir: string,
    options: { consoleBufferBytes?: number } & ResourcesOption,
    onConsole: (chunk: Buffer) => void,
    onExit: (exit: VmExit) => void,
  ): Promise<NativeVm>;
  /** A new, empty writable layer at `path` (which must not exist) over a raw image or a frozen layer. */
  createDiskLayer(path: string, below: string): Promise<void>;
  /** The chain under a layer or image, checked as a VM would open it. */
  diskInfo(path: string): Promise<DiskInfo>;
  /**
   * The frozen layer at `path` rewritten in place to sit on the base alone (same id, same reads), so that chains
   * stay short however many checkpoints a VM takes (docs/disks.md, "Flattening").
   */
  flattenDiskLayer(path: string): Promise<{ depthBefore: number; depthAfter: number; bytes: number }>;
  /**
   * The disk as the chain at `path` reads it, written to `out` (which must not exist) as a sparse raw image: what a
   * file-system reader is given for a diff (docs/diff.md). `bytes` is the data written, the rest holes.
   */
  exportDisk(path: string, out: string): Promise<{ size: number; bytes: number }>;
  /**
   * The snapshot directory opened and checked as a restore opens it (its state's checksum, its memory layer's header,
   * and its parents'), without reading guest memory; rejects with the VMM's message and code.
   */
  snapshotInfo(dir: string): Promise<SnapshotInfo>;
  /**
   * Where a sparse file has data (SEEK_DATA/SEEK_HOLE), as [start, end) byte ranges in order; the whole file as one
   * range on a file system without them. Packing a .smolmachine skips the holes (docs/smolmachine.md).
   */
  dataExtents(path: string): Promise<{ size: number; extents: Array<[number, number]> }>;
  /**
   * zstd on libuv's thread pool (.smolmachine chunks, src/engine/zstd.ts): at most `size` bytes, refused with
   * "more than N" past them and "zstd failed: <libzstd's reason>" when damaged; into `into` (at least size + 1 bytes,
   * the promise then gives the count) or a new Buffer.
   */
  zstdDecompress(data: Buffer, size: number): Promise<Buffer>;
  zstdDecompress(data: Buffer, size: number, into: Buffer): Promise<number>;
  /** One frame with its content size and a checksum, at `level` (1 to 19). */
  zstdCompress(data: Buffer, level: number): Promise<Buffer>;
  /** A zstd stream's decompression context (one per stream; zstdStreamDecode feeds it, one call at a time). */
  zstdStreamNew(): ZstdStreamHandle;
  /**
   * Up to `max` bytes of the stream's output from `data` (empty: what the context still holds); `consumed`, how much
   * of `data` it took (the rest goes in the next call); `ended`, the last frame is whole and all of it given out.
   */
  zstdStreamDecode(
    stream: ZstdStreamHandle,
    data: Buffer,
    max: number,
  ): Promise<{ out: Buffer; consumed: number; ended: boolean }>;
  /**
   * Jails the calling process (docs/security.md): core dumps off, `nofile` open files, no capabilities,
   * no_new_privs and the seccomp allow-list on every thread; a forbidden call writes `seccomp: <name>` to `reportFd`
   * (default stderr) and the process dies by SIGSYS. Once per process.
   */
  jailLockdown(options?: { reportFd?: number; nofile?: number; root?: JailRoot }): JailStatus;
  /**
   * Test hook: a system call no allow-list has (personality), or with 'ioctl' an ioctl request none has (TIOCSTI).
   * A jailed process does not return from it.
   */
  jailTestForbidden(kind?: 'ioctl'): void;
}

/**
 * A jail's root (docs/security.md, "The jail's mount table"): only these paths, each where it is on the host. The
 * process must be the first of its own PID namespace, in a mount namespace that is not `hostMntNs` (the engine's
 * /proc/self/ns/mnt); a path that does not exist is left out.
 */
export interface JailRoot {
  binds: JailBind[];
  hostMntNs: string;
}
export interface JailBind {
  path: string;
  /** Read-write; otherwise read-only. */
  write?: boolean;
  /** A device node such as /dev/kvm (its mount allows devices). */
  device?: boolean;
}

/** What jailLockdown put in force. */
export interface JailStatus {
  seccomp: boolean;
  noNewPrivs: boolean;
  /** The effective capability set, as /proc/PID/status's CapEff shows it (16 hex digits). */
  capEff: string;
  nofile: number;
  /** The root holds only the binds (jailLockdown's root). */
  mounts: boolean;
  /** How many of the binds were present and mounted. */
  binds: number;
}

/** What `snapshotInfo` found in a snapshot directory. */
export interface SnapshotInfo {
  /** The VMM's id of the snapshot (hex), which its memory layer carries too. */
  id: string;
  /** The directory of the snapshot its memory layer is a diff against; null for a full one. */
  parentDir: string | null;
  memoryBytes: number;
  cpus: number;
  /** Pages in its own memory layer. */
  pages: number;
}

export const nativeModulePath = path.join(packageRoot, 'native', 'build', 'Release', 'smol.node');

const BUILD_FIX = 'run npm run build:native';
let binding: NativeBinding | undefined;

/** Loads the addon once; throws an Error that names the file and the fix when it is missing or broken. */
export function loadNative(): NativeBinding {
  if (binding) return binding;
  if (!existsSync(nativeModulePath)) {
    throw new Error(`native module not built: ${nativeModulePath} does not exist; ${BUILD_FIX}`);
  }
  let loaded: Partial<NativeBinding>;
  try {
    loaded = createRequire(import.meta.url)(nativeModulePath) as Partial<NativeBinding>;
  } catch (err) {
    throw new Error(`cannot load native module ${nativeModulePath}: ${(err as Error).message}; ${BUILD_FIX}`, {
      cause: err,
    });
  }
  const missing = (['kvmProbe', 'createVm', 'restoreVm'] as const).filter((name) => typeof loaded[name] !== 'function');
  if (missing.length > 0) {
    throw new Error(
      `native module ${nativeModulePath} does not export ${missing.join(', ')} (stale build?); ${BUILD_FIX}`,
    );
  }
  binding = loaded as NativeBinding;
  return binding;
}
