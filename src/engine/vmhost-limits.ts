// The engine's side of the vmhost limits (docs/security.md, "Limits"): finds once what the host's cgroups allow,
// gives each vmhost its cgroup (or the reason it has none), and turns the VMs a vmhost holds into its limits.
import { engineCgroups, removeParents, type CgroupSupport } from './cgroups.js';
import { VmHostCgroup, type VmHostLimits } from './vmhost-cgroup.js';

const MiB = 2 ** 20;
/**
 * The VMM's overhead, measured (docs/security.md): a vmhost with no VM (Node, the native module, its heap) is
 * charged about 40 MiB once it joins its cgroup; each VM adds its VMM state, device buffers, console rings and the
 * page tables of its guest memory. The cap leaves room for both beyond the guests' RAM.
 */
export const VMHOST_BASE_MIB = 96;
export const PER_VM_MIB = 16;
/** Node's threads (main, libuv pool, V8 workers, inspector) and room for the kernel's KVM workers. */
export const VMHOST_BASE_PIDS = 64;
/** A VM's threads beyond its vCPUs (the event thread, a console reader) with room to spare. */
export const PER_VM_PIDS = 4;

/** What one VM asks of its vmhost's cgroup. */
export interface GuestSize {
  memoryMiB: number;
  cpus: number;
}

export class VmHostLimiter {
  #support: CgroupSupport | null = null;
  readonly #engine = process.pid;

  constructor(private readonly env: NodeJS.ProcessEnv = process.env) {}

  /** What the host allows (found at the first vmhost). */
  get support(): CgroupSupport {
    this.#support ??= engineCgroups(this.env);
    return this.#support;
  }

  /** A cgroup for the vmhost of `label`, or none and why. */
  cgroupFor(label: string): { cgroup: VmHostCgroup | null; note: string | null } {
    const { layout, reason } = this.support;
    if (!layout) return { cgroup: null, note: `no limits: ${reason}` };
    try {
      return { cgroup: VmHostCgroup.create(layout, `${this.#engine}-${label}`), note: null };
    } catch (error) {
      return { cgroup: null, note: `no limits: ${(error as Error).message}` };
    }
  }

  /** The limits of a vmhost holding VMs of these sizes. */
  limitsFor(guests: readonly GuestSize[]): VmHostLimits {
    const ram = guests.reduce((sum, guest) => sum + guest.memoryMiB, 0);
    const cpus = guests.reduce((sum, guest) => sum + guest.cpus, 0);
    // A test-only cap (SMOL_TEST_HOOKS=1): the out-of-memory test gives its guest more RAM than this allows.
    const testCap = this.env.SMOL_TEST_HOOKS === '1' ? Number(this.env.SMOL_TEST_CGROUP_MEMORY_MIB) : NaN;
    const memoryMiB = testCap > 0 ? testCap : VMHOST_BASE_MIB + ram + PER_VM_MIB * guests.length;
    return {
      memoryBytes: memoryMiB * MiB,
      cpus: Math.max(1, cpus),
      pids: VMHOST_BASE_PIDS + guests.reduce((sum, guest) => sum + guest.cpus + PER_VM_PIDS, 0),
    };
  }

  /** Removes smol's parent cgroups if the engine made them and no vmhost of any engine is left in them. */
  release(): void {
    if (this.#support?.layout) removeParents(this.#support.layout);
  }
}
