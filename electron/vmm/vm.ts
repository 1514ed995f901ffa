// A VM as JavaScript sees it: a thin EventEmitter over the native VM (docs/vmm.md).
import { EventEmitter } from 'node:events';
import { loadNative, type NativeVm, type VmExit, type VmState } from './native.js';
import { resolveVmOptions, type VmOptions } from './vm-options.js';

export type { VmExit, VmExitReason, VmState } from './native.js';
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
    if (this.#exit) throw new Error(`cannot write to the console: the VM has exited (${this.#exit.reason})`);
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    return bytes.length === 0 ? 0 : this.#vm().writeConsole(bytes);
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
