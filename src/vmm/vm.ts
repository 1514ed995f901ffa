// A VM as JavaScript sees it: a thin EventEmitter over the native VM (docs/vmm.md).
import { EventEmitter } from 'node:events';
import {
  loadNative,
  type CheckpointInfo,
  type CheckpointProgress,
  type DeviceResources,
  type MemoryStats,
  type NativeVm,
  type NetworkInfo,
  type ResourcesOption,
  type VmExit,
  type VmState,
  type VmTrace,
} from './native.js';
import { resolveVmOptions, type VmOptions } from './vm-options.js';

export type {
  CheckpointInfo,
  CheckpointProgress,
  DeviceResources,
  DiskConfig,
  DiskInfo,
  MemoryStats,
  NetworkInfo,
  NetworkRefusal,
  NetworkRule,
  ResourcesOption,
  VsockConfig,
  VmExit,
  VmExitReason,
  VmState,
  VmTrace,
  VmTraceStep,
} from './native.js';
export type { VmOptions } from './vm-options.js';

interface VmEvents {
  /** A batch of guest output from the serial console. */
  console: [chunk: Buffer];
  /** Emitted once, after every vCPU has stopped. */
  exit: [exit: VmExit];
}

export class Vm extends EventEmitter<VmEvents> {
  /** Settles once with how the VM ended; never rejects. */
  readonly exited: Promise<VmExit>;
  #native: NativeVm | undefined;
  #exit: VmExit | undefined;
  #settle!: (exit: VmExit) => void;

  private constructor() {
    super();
    this.exited = new Promise((resolve) => (this.#settle = resolve));
  }

  /** Validates the options (clear errors before the VMM is touched), then creates the VM; it starts paused. */
  static async create(options: VmOptions): Promise<Vm> {
    const config = await resolveVmOptions(options);
    const binding = loadNative();
    const vm = new Vm();
    vm.#native = await binding.createVm(
      config,
      (chunk) => vm.emit('console', chunk),
      // The binding drains all console output before it reports the exit.
      (exit) => vm.#onExit(exit),
    );
    return vm;
  }

  /**
   * A new VM that continues from the snapshot in `dir` (docs/snapshots.md); it starts paused, like `create`.
   * The snapshot is checked first: a truncated, corrupted or foreign one is refused with what is wrong.
   * `options.resources`: what its devices need from the host, by device name (a writable disk's new layer, the
   * vsock socket).
   */
  static async restore(dir: string, options: { consoleBufferBytes?: number } & ResourcesOption = {}): Promise<Vm> {
    const binding = loadNative();
    const vm = new Vm();
    vm.#native = await binding.restoreVm(
      dir,
      options,
      (chunk) => vm.emit('console', chunk),
      (exit) => vm.#onExit(exit),
    );
    return vm;
  }

  /**
   * Writes a snapshot of the running (or paused) VM to `dir`, which must not exist. The vCPUs stop only while
   * their state is captured and memory is frozen; the disk writes happen while the VM runs. A VM with a writable
   * disk needs `options.resources['virtio-blk']`: its top layer is frozen into the snapshot and it goes on writing
   * to a new one there.
   */
  checkpoint(
    dir: string,
    onProgress?: (progress: CheckpointProgress) => void,
    options: ResourcesOption = {},
  ): Promise<CheckpointInfo> {
    return this.#vm().checkpoint(dir, onProgress, options);
  }

  /**
   * `count` copies of this VM, running from its current state; it keeps running too. Each child's devices get
   * their own host resources (`children[i]`: with a writable disk its own new layer, with vsock its own socket);
   * the parent's disk goes on in `resources['virtio-blk']`.
   */
  async fork(count: number, options: ResourcesOption & { children?: DeviceResources[] } = {}): Promise<Vm[]> {
    if (!Number.isInteger(count) || count < 1 || count > 1024) {
      throw new RangeError(`fork: count must be a whole number from 1 to 1024 (got ${count})`);
    }
    if (options.children && options.children.length !== count) {
      throw new RangeError(`fork: ${options.children.length} children's resources for ${count} children`);
    }
    const children = Array.from({ length: count }, () => new Vm());
    const natives = await this.#vm().fork(
      children.map((child, i) => ({
        onConsole: (chunk: Buffer) => child.emit('console', chunk),
        onExit: (exit: VmExit) => child.#onExit(exit),
        ...(options.children?.[i] && { resources: options.children[i] }),
      })),
      options.resources ? { resources: options.resources } : {},
    );
    natives.forEach((native, i) => (children[i]!.#native = native));
    return children;
  }

  /**
   * Where the time of the create, restore or fork that made this VM went, step by step, with its KVM ioctls, and
   * when it first entered the guest and first printed (docs/snapshots.md, "Where the time goes").
   */
  trace(): VmTrace {
    return this.#vm().trace();
  }

  /** Resident, private and shared bytes of guest RAM (what a fork really costs). */
  memoryStats(): Promise<MemoryStats> {
    return this.#vm().memoryStats();
  }

  /** Its network as the host sees it: forwards, refusals, counters (docs/network.md); null without one. */
  network(after = 0): NetworkInfo | null {
    return this.#vm().network(after);
  }

  /** CPU time the VM's running vCPUs have used so far, in nanoseconds: sample it twice for a CPU percentage. */
  cpuTimeNs(): number {
    return this.#vm().cpuTimeNs();
  }

  get state(): VmState {
    return this.#exit ? 'exited' : this.#vm().state;
  }

  start(): void {
    this.#vm().start();
  }

  pause(): Promise<void> {
    return this.#vm().pause();
  }

  resume(): void {
    this.#vm().resume();
  }

  /** Resolves once the VM has ended and `exit` was emitted (reason `killed`, unless it had already ended). */
  async kill(): Promise<void> {
    await this.#vm().kill();
    await this.exited;
  }

  /** Queues console input for the guest; returns how many bytes were accepted (fewer when the queue is full). */
  write(data: string | Buffer): number {
    if (this.#exit) {
      const message = `cannot write to the console: the VM has exited (${this.#exit.reason})`;
      throw Object.assign(new Error(message), { code: 'ESRCH' });
    }
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    return bytes.length === 0 ? 0 : this.#vm().writeConsole(bytes);
  }

  /**
   * Stops (true) or resumes (false) the delivery of console output. While it is held the VMM's ring fills; a guest
   * then waits for room at most a moment before its output is dropped and later marked (docs/vmm.md, "Console output
   * and a slow reader"). Nothing once the VM has exited.
   */
  holdConsole(held: boolean): void {
    const native = this.#native as (NativeVm & { holdConsole(held: boolean): void }) | null;
    if (!this.#exit && native) native.holdConsole(held);
  }

  #vm(): NativeVm {
    if (!this.#native) throw new Error('the VM is still being created');
    return this.#native;
  }

  #onExit(exit: VmExit): void {
    if (this.#exit) return;
    this.#exit = exit;
    this.#settle(exit);
    this.emit('exit', exit);
  }
}
