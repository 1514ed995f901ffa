// The engine's side of a vmhost process: requests with replies, and the VMs' console output and exits as events.
// When the process dies, every pending request fails and `died` says how (docs/engine.md, "Processes").
import { EventEmitter } from 'node:events';
import type { VmExit } from '../vmm/vm.js';
import type { Readable } from 'node:stream';
import { forkVmHost, REPORT_FD, type VmHostLauncher, type VmHostProcess } from './vmhost-launcher.js';
import { CodedError } from '../api/error-codes.js';
import type { VmHostCgroup } from './vmhost-cgroup.js';
import type {
  HostArgs,
  HostMessageIn,
  HostMessageOut,
  HostOp,
  HostProgress,
  HostResult,
  VmHostJailStatus,
  VmHostService,
} from './vmhost-protocol.js';

const TAKEN_EVERY_MS = 50;
const TAKEN_BATCH_BYTES = 2 ** 20;

interface VmHostEvents {
  console: [vm: string, data: Buffer];
  exit: [vm: string, exit: VmExit];
  /**
   * The process ended without being asked to: `how` is its exit code or signal; `cause`, when known, is why in a
   * user's words (`out of memory (limit 80 MiB)`: its cgroup's OOM killer ended it).
   */
  died: [how: string, cause?: string];
  /** Its cgroup was removed (it ended), or could not be (the message says which and why). */
  cgroupRemoved: [];
  cgroupLeft: [message: string];
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  onProgress?: HostProgress;
}

export class VmHost extends EventEmitter<VmHostEvents> {
  readonly #child: VmHostProcess;
  readonly #pending = new Map<number, Pending>();
  readonly ready: Promise<void>;
  #seq = 0;
  #closing = false;
  #dead: string | null = null;
  readonly #joined = new Set<number>();
  #cgroupRemoved: Promise<void> = Promise.resolve();
  #disconnected = false;
  #pid: number | undefined;
  /** Console bytes received and not yet reported taken (consoleTaken calls, batched: TAKEN_EVERY_MS or 1 MiB). */
  #taken = 0;
  #takenTimer: NodeJS.Timeout | null = null;
  /** What the vmhost's jail put in force (null: SMOL_JAIL=0), once it is ready. */
  jail: VmHostJailStatus | null = null;
  /** Its cgroup (docs/security.md, "Limits"): null when it runs without one; `limitsNote` then says why. */
  cgroup: VmHostCgroup | null;
  limitsNote: string | null;

  constructor(
    readonly label: string,
    launch: VmHostLauncher = forkVmHost,
    cgroup: { cgroup: VmHostCgroup | null; note: string | null } = { cgroup: null, note: null },
  ) {
    super();
    this.cgroup = cgroup.cgroup;
    this.limitsNote = cgroup.note;
    this.#child = launch(label);
    // Into its cgroup before it runs any VM: now when the pid is known, else (a utilityProcess) at its first message.
    this.#joinCgroup();
    this.ready = new Promise((resolve, reject) => {
      this.#child.once('message', () => {
        this.#joinCgroup();
        resolve();
      });
      this.#child.once('exit', () => reject(new Error(`the vmhost for ${label} ended before it was ready`)));
    });
    this.ready.catch(() => undefined);
    this.#child.on('message', (message: HostMessageOut) => this.#onMessage(message));
    // The jail's report (a forbidden system call's name) comes on its own pipe, which may still hold it at 'exit'.
    const report = this.#child.stdio?.[REPORT_FD] as Readable | null | undefined;
    let reported = '';
    const reportDone = report
      ? new Promise<void>((resolve) => {
          report.on('data', (chunk: Buffer) => (reported = (reported + chunk.toString()).slice(-4096)));
          report.on('error', () => resolve());
          report.on('close', () => resolve());
        })
      : Promise.resolve();
    this.#child.on('exit', (code, signal) => {
      const how = signal ? `signal ${signal}` : `exit code ${code}`;
      const limit = this.cgroup?.memoryLimitBytes;
      // Whatever the exit looks like (a launcher in between may turn the SIGKILL into an exit code), an OOM kill in
      // its own cgroup, where it is the only process, is what ended it.
      const oom = limit && this.cgroup!.oomKills() > 0;
      const cause = oom ? `out of memory (limit ${Math.round(limit / 2 ** 20)} MiB)` : undefined;
      this.#removeCgroup();
      if (signal !== 'SIGSYS') return this.#onExit(how, cause);
      const waited = new Promise<void>((resolve) => setTimeout(resolve, 1000).unref());
      void Promise.race([reportDone, waited]).then(() => {
        const seccomp = /seccomp: [^\n]+/.exec(reported)?.[0];
        this.#onExit(seccomp ? `${seccomp}, ${how}` : how);
      });
    });
    // Without a listener, a failed spawn or a send on a closed channel would be thrown into the engine.
    this.#child.on('error', (error) => {
      if (this.#child.exitCode === null && this.#child.signalCode === null && this.#child.pid === undefined)
        this.#onExit(`it could not start: ${error.message}`);
    });
    this.#child.on('disconnect', () => (this.#disconnected = true));
  }

  /**
   * The vmhost's own pid on the host, which its /proc is read by: the one its `ready` message gives (in namespaces
   * its parent is smol-jail, the process the launcher started), else the started process's.
   */
  get pid(): number | undefined {
    return this.#pid ?? this.#child.pid;
  }

  get alive(): boolean {
    return this.#dead === null && !this.#disconnected;
  }

  /**
   * Calls one operation of the vmhost's service (vmhost-protocol.ts): `host.call('checkpoint', {vm, dir}, onProgress)`.
   * A failure in the vmhost arrives as an Error with its name, message, `code` and `errno` (a CodedError).
   */
  async call<K extends HostOp>(op: K, ...params: Parameters<VmHostService[K]>): Promise<HostResult<K>> {
    const [args, onProgress] = params as [HostArgs<K>, HostProgress | undefined];
    if (!this.alive) throw new Error(`the vmhost for ${this.label} is gone (${this.#dead ?? 'disconnected'})`);
    await this.ready;
    const seq = ++this.#seq;
    const message: HostMessageIn = { seq, op, args };
    return new Promise((resolve, reject) => {
      this.#pending.set(seq, { resolve: resolve as (value: unknown) => void, reject, onProgress });
      this.#child.send(message, (error) => {
        if (!error) return;
        this.#pending.delete(seq);
        reject(new Error(`the vmhost for ${this.label} is gone (${error.message})`));
      });
    });
  }

  /** Ends the process (its VMs die with it); resolves once it has gone. */
  async close(): Promise<void> {
    this.#closing = true;
    if (this.#dead || this.#child.exitCode !== null || this.#child.signalCode !== null) return this.#cgroupRemoved;
    const gone = new Promise<void>((resolve) => this.#child.once('exit', () => resolve()));
    this.#child.kill('SIGKILL');
    await gone;
    await this.#cgroupRemoved;
  }

  #onMessage(message: HostMessageOut): void {
    switch (message.kind) {
      case 'reply': {
        const pending = this.#pending.get(message.seq);
        this.#pending.delete(message.seq);
        if (message.ok) pending?.resolve(message.result);
        else pending?.reject(new CodedError(message.error));
        break;
      }
      case 'progress':
        this.#pending.get(message.seq)?.onProgress?.(message.done, message.total);
        break;
      case 'console':
        this.emit(
          'console',
          message.vm,
          Buffer.from(message.data.buffer, message.data.byteOffset, message.data.length),
        );
        this.#tookConsole(message.data.length);
        break;
      case 'exit':
        this.emit('exit', message.vm, message.exit);
        break;
      case 'ready':
        this.#pid = message.pid;
        this.jail = message.jail ?? null;
        this.#joinCgroup(); // by the pid it is known by now, before any call goes out (calls await ready)
        break;
    }
  }

  /**
   * Tells the vmhost what was taken, so that it goes on reading its VMs' consoles (console-credit.ts): a few times a
   * second, or at once when 1 MiB has come, so a guest printing a byte at a time does not cost a reply per byte.
   */
  #tookConsole(bytes: number): void {
    this.#taken += bytes;
    if (this.#taken >= TAKEN_BATCH_BYTES) this.#reportTaken();
    else if (!this.#takenTimer) this.#takenTimer = setTimeout(() => this.#reportTaken(), TAKEN_EVERY_MS).unref();
  }

  #reportTaken(): void {
    if (this.#takenTimer) clearTimeout(this.#takenTimer);
    this.#takenTimer = null;
    const bytes = this.#taken;
    this.#taken = 0;
    if (bytes > 0 && this.alive) this.call('consoleTaken', { bytes }).catch(() => undefined);
  }

  #onExit(how: string, cause?: string): void {
    if (this.#dead) return;
    this.#dead = how;
    const error = new Error(`the vmhost for ${this.label} ended (${cause ? `${cause}, ${how}` : how})`);
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
    if (!this.#closing) this.emit('died', how, cause);
  }

  /**
   * Moves the process into its cgroup: at the spawn (its children, made later, are born in it), and again at its
   * first message, by the pid the vmhost is known by then (a launcher may start it through another process, as
   * smol-jail does). A host that refuses leaves it without limits, said in limitsNote.
   */
  #joinCgroup(): void {
    const pid = this.pid ?? this.#child.pid;
    if (!this.cgroup || pid === undefined || this.#joined.has(pid)) return;
    this.#joined.add(pid);
    try {
      this.cgroup.join(pid);
    } catch (error) {
      if (this.#child.exitCode !== null || this.#child.signalCode !== null) return; // it ended first
      this.limitsNote = `its vmhost could not join the cgroup ${this.cgroup.dirs[0]} (${(error as Error).message})`;
      this.#removeCgroup();
    }
  }

  #removeCgroup(): void {
    const cgroup = this.cgroup;
    if (!cgroup) return;
    this.cgroup = null;
    this.limitsNote ??= 'its vmhost has ended';
    this.#cgroupRemoved = cgroup.remove().then(
      () => void this.emit('cgroupRemoved'),
      (error: unknown) => void this.emit('cgroupLeft', (error as Error).message),
    );
  }
}
