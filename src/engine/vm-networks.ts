// The networks of the engine's VMs as clients see them (docs/network.md, "Seen from the host"): each live instance
// with a network is read from its vmhost once it runs and then every second while it lives. A read learns the
// instance's forwarded ports and its new refusals; the engine numbers refusals per VM across its restores, stamps
// them with the time it saw them, publishes each as a `vm.network.refused` event and keeps the last 256.
import type { NetworkRefusal, PortForward, VmNetwork } from '../api/schema.js';
import type { NetworkInfo } from '../vmm/vm.js';
import type { LiveInstance } from './live-instance.js';

/** How often a live networked instance is read; SMOL_NET_POLL_MS changes it. */
export const NETWORK_POLL_MS = Number(process.env.SMOL_NET_POLL_MS) || 1000;
/** Refusals the engine keeps per VM (a VM's stack keeps 64 between reads). */
export const KEPT_REFUSALS = 256;
/** Guest ports web servers listen on: their forwards get a URL (`http://127.0.0.1:HOST/`). */
const HTTP_PORTS = new Set([80, 3000, 4173, 4200, 5000, 5173, 8000, 8008, 8080, 8081, 8888]);

/** What the engine keeps per VM, across its instances, for as long as it runs. */
interface Tally {
  refused: number;
  rules: Record<string, number>;
  events: NetworkRefusal[];
  seq: number;
}

/** What the networks need of the engine. */
export interface NetworkOwner {
  /** Every live instance that has a network. */
  instances(): Iterable<LiveInstance>;
  /** New refusals of `vm`, in order; `total` is its count so far. */
  refused(vm: string, refusals: NetworkRefusal[], total: number): void;
  /** What a listing shows of `vm` changed (forwards learned, the refusal count). */
  changed(vm: string): void;
  log(line: string): void;
}

export function portForwards(forwards: readonly { host: number; guest: number }[]): PortForward[] {
  return forwards.map(({ host, guest }) => ({
    host,
    guest,
    ...(HTTP_PORTS.has(guest) && { url: `http://127.0.0.1:${host}/` }),
  }));
}

export class VmNetworks {
  readonly #tallies = new Map<string, Tally>();
  #timer: NodeJS.Timeout | null = null;
  #polling = false;

  constructor(private readonly owner: NetworkOwner) {}

  /** Reads every second while some live instance has a network (it stops by itself when none has). */
  wake(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.#tick(), NETWORK_POLL_MS);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  /**
   * Reads `live`'s network from its vmhost now (after any read of it in flight), takes what is new and returns the
   * stack's answer; null for an instance without a network or one that ended. `announce: false` leaves telling
   * listings to the caller (it is about to emit the VM itself).
   */
  read(live: LiveInstance, { announce = true } = {}): Promise<NetworkInfo | null> {
    const net = live.network;
    if (!net || live.ended) return Promise.resolve(null);
    const run = net.reading.then(async () => {
      if (live.ended || !live.host.alive) return null;
      const info = await live.host.call('network', { vm: live.name, after: net.seq });
      if (info) this.#take(live, info, announce);
      return info;
    });
    net.reading = run.catch(() => undefined);
    return run;
  }

  /** `live`'s forwards, once read (none before, or without a live instance). */
  ports(live: LiveInstance | undefined): PortForward[] {
    return live?.network?.forwards ? portForwards(live.network.forwards) : [];
  }

  refused(vm: string): number {
    return this.#tallies.get(vm)?.refused ?? 0;
  }

  /** The API's view of `vm`'s network: `info` is its live instance's stack as just read (null when not running). */
  view(vm: string, enabled: boolean, live: LiveInstance | undefined, info: NetworkInfo | null, after = 0): VmNetwork {
    const tally = this.#tallies.get(vm);
    return {
      vm,
      enabled,
      ports: enabled ? this.ports(live) : [],
      refused: tally?.refused ?? 0,
      rules: { ...tally?.rules },
      frames: info ? { ...info.frames } : null,
      sockets: info ? info.sockets : null,
      events: (tally?.events ?? []).filter((event) => event.seq > after),
    };
  }

  /** The VM is gone: its refusals with it. */
  forget(vm: string): void {
    this.#tallies.delete(vm);
  }

  #tally(vm: string): Tally {
    let tally = this.#tallies.get(vm);
    if (!tally) {
      tally = { refused: 0, rules: {}, events: [], seq: 0 };
      this.#tallies.set(vm, tally);
    }
    return tally;
  }

  #take(live: LiveInstance, info: NetworkInfo, announce: boolean): void {
    const net = live.network!;
    const tally = this.#tally(live.vm);
    let changed = false;
    if (!net.forwards) {
      net.forwards = info.forwards.map(({ host, guest }) => ({ host, guest }));
      changed = true;
    }
    // The counters count every refusal, also those the stack's 64 events no longer hold.
    for (const [rule, count] of Object.entries(info.refused)) {
      const delta = count - (net.counted[rule] ?? 0);
      if (delta <= 0) continue;
      net.counted[rule] = count;
      tally.rules[rule] = (tally.rules[rule] ?? 0) + delta;
      tally.refused += delta;
      changed = true;
    }
    const at = new Date().toISOString();
    const fresh: NetworkRefusal[] = [];
    for (const event of info.events) {
      if (event.seq <= net.seq) continue;
      net.seq = event.seq;
      fresh.push({
        seq: ++tally.seq,
        at,
        destination: event.destination,
        port: event.port,
        protocol: event.protocol,
        rule: event.rule,
        ...(event.name !== undefined && { name: event.name }),
      });
    }
    tally.events.push(...fresh);
    if (tally.events.length > KEPT_REFUSALS) tally.events.splice(0, tally.events.length - KEPT_REFUSALS);
    if (fresh.length > 0) this.owner.refused(live.vm, fresh, tally.refused);
    if (changed && announce) this.owner.changed(live.vm);
  }

  async #tick(): Promise<void> {
    if (this.#polling) return; // a slow round (a busy host) is not stacked
    this.#polling = true;
    try {
      const live = [...this.owner.instances()].filter((instance) => instance.network?.running && !instance.ended);
      if (live.length === 0 && ![...this.owner.instances()].some((instance) => !instance.ended)) this.stop();
      await Promise.all(
        live.map((instance) =>
          this.read(instance).catch((error: unknown) => {
            if (!instance.ended && instance.host.alive)
              this.owner.log(`engine: reading the network of ${instance.name} failed: ${(error as Error).message}`);
          }),
        ),
      );
    } finally {
      this.#polling = false;
    }
  }
}
