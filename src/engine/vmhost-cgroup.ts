// One vmhost's cgroup (docs/security.md, "Limits"): made before the vmhost runs any VM, sized to the VMs it holds
// (their guest RAM plus the VMM's overhead, their vCPUs, a process budget), read for the metrics and for the OOM
// count when the vmhost dies, and removed when it ends. v1 and v2 differ only in the file names used here.
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { prepareParents, type CgroupLayout, type Controller } from './cgroups.js';

const MiB = 2 ** 20;
/** The CFS period the CPU quota is expressed in (the kernel's default, 100 ms). */
const CPU_PERIOD_US = 100_000;
/** On a shrink, the cap never goes below what is in use plus this (v2 would OOM-kill to get under it). */
const SHRINK_SLACK_BYTES = 8 * MiB;

export interface VmHostLimits {
  memoryBytes: number;
  /** CPUs' worth of quota (the vCPUs of its VMs). */
  cpus: number;
  pids: number;
}

/** What a vmhost's cgroup counted (null: that controller is not in use on this host). */
export interface CgroupCounters {
  memoryBytes: number | null;
  memoryLimitBytes: number | null;
  cpuNs: number | null;
  pids: number | null;
  oomKills: number;
}

function readText(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

/** `key N` from a flat-keyed cgroup file (memory.events, memory.oom_control, cpu.stat). */
function keyed(text: string | null, key: string): number | null {
  const match = text === null ? null : new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
  return match ? Number(match[1]) : null;
}

function numberIn(text: string | null): number | null {
  if (text === null || text.trim() === 'max') return null;
  const value = Number(text.trim().split(/\s+/)[0]);
  return Number.isFinite(value) ? value : null;
}

export class VmHostCgroup {
  /** The directory per controller (v2: one directory for all). */
  readonly #dirs: Partial<Record<Controller, string>>;
  #wanted: VmHostLimits | null = null;
  #memoryApplied: number | null = null;
  #removed = false;

  private constructor(
    readonly layout: CgroupLayout,
    readonly name: string,
  ) {
    this.#dirs = Object.fromEntries(
      Object.entries(layout.parents).map(([controller, parent]) => [controller, path.join(parent, name)]),
    );
  }

  /** Makes the cgroup `name` in every hierarchy of `layout`; throws naming the directory and the error. */
  static create(layout: CgroupLayout, name: string): VmHostCgroup {
    const cgroup = new VmHostCgroup(layout, name);
    for (const dir of cgroup.dirs) {
      try {
        try {
          mkdirSync(dir);
        } catch (error) {
          // Another engine removed the empty parent as this one came: made again, controllers and all.
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
          prepareParents(layout);
          mkdirSync(dir);
        }
      } catch (error) {
        cgroup.#rmdirs();
        throw new Error(`cannot create the cgroup ${dir} (${(error as NodeJS.ErrnoException).code ?? error})`);
      }
    }
    return cgroup;
  }

  /** Its directories, one per hierarchy. */
  get dirs(): string[] {
    return [...new Set(Object.values(this.#dirs))];
  }

  /** The memory cap in force, in bytes (null before the first limit). */
  get memoryLimitBytes(): number | null {
    return this.#memoryApplied;
  }

  /** Moves process `pid` (with all its threads) into the cgroup, in every hierarchy. */
  join(pid: number): void {
    const memory = this.#dirs.memory;
    // v1 can bring the pages the process touched before the move along (v2 never moves charges): Node's own
    // start-up memory then counts against the cap too, as it does when the process is born inside.
    if (memory && this.layout.version === 1) {
      try {
        writeFileSync(path.join(memory, 'memory.move_charge_at_immigrate'), '3');
      } catch {
        // a kernel without it: the pages stay charged where they were
      }
    }
    // Never a pid seen from inside a PID namespace (a jailed vmhost is 1 there): written here it would move the
    // host's process of that number, init itself, under this vmhost's limits (seen once, from an early jail).
    if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) {
      throw new Error(`${pid} is not a vmhost's host pid; it does not join ${this.dirs[0]}`);
    }
    for (const dir of this.dirs) writeFileSync(path.join(dir, 'cgroup.procs'), String(pid));
  }

  /**
   * Sets the limits. A cap below what the vmhost uses now (VMs that just ended may not have given their memory back
   * yet) is applied as far as is safe and finished by a later `settle`.
   */
  limit(limits: VmHostLimits): void {
    this.#wanted = limits;
    if (this.#removed) return;
    const { memory, cpu, pids } = this.#dirs;
    const v2 = this.layout.version === 2;
    if (cpu) {
      const quota = Math.max(1000, Math.round(limits.cpus * CPU_PERIOD_US));
      if (v2) writeFileSync(path.join(cpu, 'cpu.max'), `${quota} ${CPU_PERIOD_US}`);
      else {
        writeFileSync(path.join(cpu, 'cpu.cfs_period_us'), String(CPU_PERIOD_US));
        writeFileSync(path.join(cpu, 'cpu.cfs_quota_us'), String(quota));
      }
    }
    if (pids) writeFileSync(path.join(pids, 'pids.max'), String(limits.pids));
    if (memory) this.#applyMemory(limits.memoryBytes);
  }

  /** Finishes a shrink that had to wait for memory to be given back. */
  settle(): void {
    if (!this.#wanted || this.#memoryApplied === null || this.#memoryApplied <= this.#wanted.memoryBytes) return;
    try {
      this.#applyMemory(this.#wanted.memoryBytes);
    } catch {
      // the cgroup went with its vmhost
    }
  }

  #applyMemory(wanted: number): void {
    const dir = this.#dirs.memory!;
    const v2 = this.layout.version === 2;
    let bytes = Math.ceil(wanted / 4096) * 4096;
    if (this.#memoryApplied !== null && bytes < this.#memoryApplied) {
      const used = numberIn(readText(path.join(dir, v2 ? 'memory.current' : 'memory.usage_in_bytes'))) ?? 0;
      bytes = Math.max(bytes, Math.ceil((used + SHRINK_SLACK_BYTES) / 4096) * 4096);
      if (bytes >= this.#memoryApplied) return;
    }
    try {
      writeFileSync(path.join(dir, v2 ? 'memory.max' : 'memory.limit_in_bytes'), String(bytes));
      this.#memoryApplied = bytes;
    } catch (error) {
      // v1 answers EBUSY when it could not reclaim down to a lower cap: the old one stays, a later settle retries.
      if ((error as NodeJS.ErrnoException).code !== 'EBUSY' || this.#memoryApplied === null) throw error;
    }
  }

  /** Its counters now. */
  counters(): CgroupCounters {
    const { memory, cpu, pids } = this.#dirs;
    const cpuacct = this.#dirs.cpuacct;
    if (this.layout.version === 2) {
      const usage = cpu ? keyed(readText(path.join(cpu, 'cpu.stat')), 'usage_usec') : null;
      return {
        memoryBytes: memory ? numberIn(readText(path.join(memory, 'memory.current'))) : null,
        memoryLimitBytes: memory ? numberIn(readText(path.join(memory, 'memory.max'))) : null,
        cpuNs: usage === null ? null : usage * 1000,
        pids: pids ? numberIn(readText(path.join(pids, 'pids.current'))) : null,
        oomKills: this.oomKills(),
      };
    }
    return {
      memoryBytes: memory ? numberIn(readText(path.join(memory, 'memory.usage_in_bytes'))) : null,
      memoryLimitBytes: memory ? this.#memoryApplied : null,
      cpuNs: cpuacct ? numberIn(readText(path.join(cpuacct, 'cpuacct.usage'))) : null,
      pids: pids ? numberIn(readText(path.join(pids, 'pids.current'))) : null,
      oomKills: this.oomKills(),
    };
  }

  /** How many processes the kernel's OOM killer ended in this cgroup for going over its cap. */
  oomKills(): number {
    const dir = this.#dirs.memory;
    if (!dir) return 0;
    const file = this.layout.version === 2 ? 'memory.events' : 'memory.oom_control';
    return keyed(readText(path.join(dir, file)), 'oom_kill') ?? 0;
  }

  /**
   * Removes its directories once its processes are gone (a dying process, or KVM's worker thread of one, can keep a
   * cgroup busy for a moment): retried for up to `waitMs`. Throws naming what stayed.
   */
  async remove(waitMs = 5000): Promise<void> {
    this.#removed = true;
    const until = Date.now() + waitMs;
    for (;;) {
      const left = this.#rmdirs();
      if (left.length === 0) return;
      if (Date.now() >= until) throw new Error(`the cgroup ${left.join(', ')} could not be removed (still busy)`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Removes what it can; returns the directories still there. */
  #rmdirs(): string[] {
    return this.dirs.filter((dir) => {
      try {
        rmdirSync(dir);
        return false;
      } catch (error) {
        return (error as NodeJS.ErrnoException).code !== 'ENOENT';
      }
    });
  }
}
