// The vmhost as a typed service (docs/engine.md, "Processes"): one interface says every operation, what it takes
// and what it answers. The engine calls it through a generic proxy (VmHost.call in vmhost.ts); the vmhost serves it
// with a generic dispatcher (vmhost-main.ts). Messages go over Node's IPC channel with advanced serialization (or an
// Electron MessagePort), so console bytes travel as Buffers. A failure keeps its name, message and errno code.
import type { ErrorData } from '../api/error-codes.js';
import type { JailStatus } from '../vmm/native.js';
import type { CheckpointInfo, DeviceResources, MemoryStats, NetworkInfo, VmExit, VmOptions } from '../vmm/vm.js';

/** Checkpoint progress: pages of memory written so far, of all. */
export type HostProgress = (done: number, total: number) => void;

/** The operations of a vmhost. Each takes one plain-data argument (and a progress callback where it says). */
export interface VmHostService {
  create(args: { vm: string; options: VmOptions }): Promise<void>;
  /** `resources`: what the restored VM's devices need from the host, by device name (its vsock socket, its disk layer). */
  restore(args: { vm: string; dir: string; resources: DeviceResources }): Promise<void>;
  start(args: { vm: string }): Promise<void>;
  pause(args: { vm: string }): Promise<void>;
  resume(args: { vm: string }): Promise<void>;
  /** Ends the VM if it runs here; nothing when it does not. */
  kill(args: { vm: string }): Promise<void>;
  stats(args: { vm: string }): Promise<MemoryStats>;
  /** CPU time and memory of each named VM that is running here (the others are left out). */
  sample(args: { vms: string[] }): Promise<Array<{ vm: string; cpuNs: number; memory: MemoryStats }>>;
  /**
   * The VM's network as its stack sees it (docs/network.md, "Seen from the host"): forwards, refusal counters and the
   * refusals after `after` (a seq); null for a VM without a network.
   */
  network(args: { vm: string; after?: number }): Promise<NetworkInfo | null>;
  /** Queues console input; answers how many bytes wait for room in the VMM's queue. */
  write(args: { vm: string; data: Buffer }): Promise<number>;
  /** The engine took this many bytes of console output (console-credit.ts: what bounds output in flight). */
  consoleTaken(args: { bytes: number }): Promise<void>;
  /** Flattens a frozen disk layer (docs/disks.md, "Flattening"); no VM involved. */
  flatten(args: { path: string }): Promise<{ depthBefore: number; depthAfter: number; bytes: number }>;
  /** Writes the disk the chain at `path` reads as a sparse raw file `out` for a diff's reader (docs/diff.md). */
  exportDisk(args: { path: string; out: string }): Promise<{ size: number; bytes: number }>;
  /** `resources['virtio-blk']`: the layer a VM with a disk writes to after the checkpoint froze the one it wrote. */
  checkpoint(
    args: { vm: string; dir: string; resources: DeviceResources },
    progress?: HostProgress,
  ): Promise<CheckpointInfo>;
  /**
   * Children get the given names and resources; they are running when the reply comes. `resources`: the parent's
   * from the fork on (with a disk, the layer it goes on with).
   */
  fork(args: {
    vm: string;
    resources: DeviceResources;
    children: Array<{ vm: string; resources: DeviceResources }>;
  }): Promise<void>;
}

export type HostOp = keyof VmHostService;
export type HostArgs<K extends HostOp> = Parameters<VmHostService[K]>[0];
export type HostResult<K extends HostOp> = Awaited<ReturnType<VmHostService[K]>>;

/** Every operation's name, so that the dispatcher can refuse one that is not in the interface. */
export const HOST_OPS = [
  'create',
  'restore',
  'start',
  'pause',
  'resume',
  'kill',
  'stats',
  'sample',
  'network',
  'write',
  'consoleTaken',
  'flatten',
  'exportDisk',
  'checkpoint',
  'fork',
] as const satisfies readonly HostOp[];

// Every operation of the interface is in HOST_OPS (this fails to compile when one is missing).
type Missing = Exclude<HostOp, (typeof HOST_OPS)[number]>;
const complete: Missing extends never ? true : Missing = true;
void complete;

export interface HostMessageIn {
  seq: number;
  op: HostOp;
  args: unknown;
}

export type HostMessageOut =
  | { kind: 'reply'; seq: number; ok: true; result: unknown }
  | { kind: 'reply'; seq: number; ok: false; error: ErrorData }
  | { kind: 'console'; vm: string; data: Uint8Array }
  | { kind: 'exit'; vm: string; exit: VmExit }
  | { kind: 'progress'; seq: number; done: number; total: number }
  | { kind: 'ready'; pid: number; jail?: VmHostJailStatus | null };

/** What a vmhost's jail put in force (docs/security.md): the native lockdown's status and its namespaces. */
export interface VmHostJailStatus extends JailStatus {
  /** The namespaces it runs in (`mount`, `pid`, `user`); empty when none. */
  namespaces: string[];
  /** Why it runs without them, when it does. */
  namespacesReason: string | null;
}
