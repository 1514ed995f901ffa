// One native instance of a VM while it lives (docs/engine.md, "Live instances"): made at every boot, restore and
// fork child, ended when it exits, is killed or is replaced. It holds everything the engine keeps about it, so that
// nothing about an instance lives in a map of its own: its vmhost and its name there, what its devices use on the
// host (the disk layer it writes, its vsock socket, its network and what was read of it), the console hub its
// output goes to, the guest agent's client and a console shell while it bakes.
import { rmSync } from 'node:fs';
import type { AgentClient } from '../agent-client/agent-client.js';
import type { DeviceResources } from '../vmm/vm.js';
import type { ConsoleHub } from './console-hub.js';
import type { ConsoleShell } from './console-shell.js';
import { isFrozenLayerSync } from './disk-layers.js';
import type { VmHost } from './vmhost.js';

/** The devices that are disks: the root disk and the volumes (docs/disks.md, "Volumes"), by resource name. */
export const DISK_DEVICES = ['virtio-blk', 'virtio-blk-1', 'virtio-blk-2', 'virtio-blk-3', 'virtio-blk-4'] as const;
export type DiskDevice = (typeof DISK_DEVICES)[number];

/** The guest agent of an instance with a vsock device, as the engine follows it. */
export interface InstanceAgent {
  client: AgentClient;
  /** Settles once the first HELLO (and a remint it owes) arrived or was given up. */
  settled: Promise<unknown>;
  remint: () => Promise<void>;
  check: () => Promise<void>;
}

/** What the engine has read of an instance's network (vm-networks.ts). */
export interface InstanceNetwork {
  /** Set once the instance runs in its vmhost: from then on it is read every second. */
  running: boolean;
  /** The `ports` forwards as bound, once read. */
  forwards: { host: number; guest: number }[] | null;
  /** The stack's last refusal seq taken. */
  seq: number;
  /** The stack's refusal counters as last read, per rule. */
  counted: Record<string, number>;
  /** The read in flight: reads of one instance never overlap. */
  reading: Promise<unknown>;
}

export class LiveInstance {
  agent: InstanceAgent | undefined;
  /** Its network as read so far, when it has one (a `virtio-net` resource). */
  readonly network: InstanceNetwork | undefined;
  /** The images its read-only volumes use as they are (SMOL_HOME/images): its snapshots keep them. */
  volumeImages: string[] = [];
  /** While a fresh boot runs the Smolfile's init commands on its console. */
  shell: ConsoleShell | undefined;
  /** Its guest RAM and vCPUs: what it adds to its vmhost's cgroup limits (vmhost-limits.ts). */
  size = { memoryMiB: 0, cpus: 0 };
  #ended = false;

  constructor(
    /** The vmhost's name for it: `vm-…#n`, new for every boot, restore and fork child. */
    readonly name: string,
    /** The VM record it is the instance of. */
    readonly vm: string,
    readonly host: VmHost,
    /** Its VM's console hub, where its output goes; the hub outlives it (a VM's console spans its instances). */
    readonly hub: ConsoleHub,
    /**
     * What its devices use on the host, by device name (vm.ts, DeviceResources). It owns the disk layers it writes
     * (`virtio-blk`, and `virtio-blk-N` for writable volumes): removed when it ends, unless a checkpoint froze one
     * into a snapshot first (then the snapshot owns it).
     */
    readonly resources: DeviceResources,
  ) {
    this.network = resources['virtio-net']
      ? { running: false, forwards: null, seq: 0, counted: {}, reading: Promise.resolve() }
      : undefined;
  }

  /** The VM id in an instance name (`vm-…#3` → `vm-…`). */
  static vmOf(name: string): string {
    return name.slice(0, name.lastIndexOf('#'));
  }

  /** The layer its disk writes, when it has a writable disk. */
  get diskTop(): string | undefined {
    return this.resources['virtio-blk']?.path;
  }

  /** Its disk writes `file` from now on; the layer it wrote before belongs to a snapshot now (or to nobody). */
  writes(file: string, device: DiskDevice = 'virtio-blk'): void {
    this.resources[device] = { path: file };
  }

  /** Every writable disk it has (the root disk first, then its writable volumes) and the layer each writes. */
  get diskTops(): Array<[DiskDevice, string]> {
    return DISK_DEVICES.flatMap((device): Array<[DiskDevice, string]> => {
      const top = this.resources[device]?.path;
      return top ? [[device, top]] : [];
    });
  }

  get ended(): boolean {
    return this.#ended;
  }

  /**
   * Lets go of it: the agent connection, and its disk layer unless that is frozen. Its VMM may still have the layer
   * open: unlinking is safe. A frozen one is a snapshot's (a checkpoint froze it just as the VM ended, before the
   * engine heard of the new layer): it stays. Idempotent.
   */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    for (const [, top] of this.diskTops) if (!isFrozenLayerSync(top)) rmSync(top, { force: true });
    this.agent?.client.close();
    this.agent = undefined;
    this.shell = undefined;
  }
}
