// Messages between the engine and a vmhost process (docs/engine.md, "Processes"), over Node's IPC channel with
// advanced serialization, so console bytes travel as Buffers.
import type { CheckpointInfo, MemoryStats, VmExit, VmOptions } from '../vmm/vm.js';

export type HostRequest =
  | { op: 'create'; vm: string; options: VmOptions }
  /**
   * `vsockPath`: the restored VM's vsock socket, used when the snapshot has a vsock device. `diskTop`: its new
   * writable disk layer, when the snapshot has a disk (docs/disks.md).
   */
  | { op: 'restore'; vm: string; dir: string; vsockPath?: string; diskTop?: string }
  | { op: 'start' | 'pause' | 'resume' | 'kill' | 'stats'; vm: string }
  /** CPU time and memory of each named VM that is running here (the others are left out). */
  | { op: 'sample'; vms: string[] }
  | { op: 'write'; vm: string; data: Buffer }
  /** Flattens a frozen disk layer (docs/disks.md, "Flattening"); no VM involved. */
  | { op: 'flatten'; path: string }
  /** `diskTop`: the layer a VM with a disk writes to after the checkpoint froze the one it wrote. */
  | { op: 'checkpoint'; vm: string; dir: string; diskTop?: string }
  /**
   * Children get the given ids; they are running when the reply comes. With a disk, the parent goes on with
   * `diskTop` and each child writes its own `childDiskTops[i]`.
   */
  | {
      op: 'fork';
      vm: string;
      children: string[];
      childVsockPaths?: string[];
      diskTop?: string;
      childDiskTops?: string[];
    };

export interface HostResults {
  create: null;
  restore: null;
  start: null;
  pause: null;
  resume: null;
  kill: null;
  stats: MemoryStats;
  sample: Array<{ vm: string; cpuNs: number; memory: MemoryStats }>;
  write: number;
  flatten: { depthBefore: number; depthAfter: number; bytes: number };
  checkpoint: CheckpointInfo;
  fork: null;
}

export type HostMessageIn = HostRequest & { seq: number };

export type HostMessageOut =
  | { kind: 'reply'; seq: number; ok: true; result: unknown }
  | { kind: 'reply'; seq: number; ok: false; error: string }
  | { kind: 'console'; vm: string; data: Uint8Array }
  | { kind: 'exit'; vm: string; exit: VmExit }
  | { kind: 'progress'; seq: number; done: number; total: number }
  | { kind: 'ready'; pid: number };
