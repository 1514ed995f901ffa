// CPU and memory samples per VM, for the sparklines: kept apart from the app store (a tick every 2 s per VM must
// not re-render React), capped like the engine's own history, and read by canvases that redraw themselves.
import type { MetricSample } from '../../../src/api/schema.js';
import { call, type Transport } from '../transport/transport.js';

/** As many as the engine keeps (five minutes at its 2 s interval). */
export const KEPT = 150;

export class MetricsStore {
  readonly #samples = new Map<string, MetricSample[]>();
  readonly #listeners = new Map<string, Set<() => void>>();
  readonly #fetched = new Set<string>();

  constructor(readonly transport: Transport | null = null) {}

  samples(vm: string): readonly MetricSample[] {
    return this.#samples.get(vm) ?? [];
  }

  /** One live sample (a `metrics` event). */
  add(vm: string, sample: MetricSample): void {
    const list = this.#samples.get(vm) ?? [];
    if (list.length && list.at(-1)!.at >= sample.at) return; // already have it (from the history)
    list.push(sample);
    if (list.length > KEPT) list.splice(0, list.length - KEPT);
    this.#samples.set(vm, list);
    this.#notify(vm);
  }

  /** Fills a VM's past samples from the engine the first time something shows them. */
  want(vm: string): void {
    if (!this.transport || this.#fetched.has(vm)) return;
    this.#fetched.add(vm);
    call(this.transport, 'metrics', { params: { vm } }).then(
      (history) => {
        const live = this.#samples.get(vm) ?? [];
        const older = history.samples.filter((s) => !live.length || s.at < live[0]!.at);
        this.#samples.set(vm, [...older, ...live].slice(-KEPT));
        this.#notify(vm);
      },
      () => this.#fetched.delete(vm), // asked again next time (a VM that is gone will not be shown)
    );
  }

  forget(vm: string): void {
    this.#samples.delete(vm);
    this.#fetched.delete(vm);
    this.#notify(vm);
  }

  subscribe(vm: string, listener: () => void): () => void {
    const set = this.#listeners.get(vm) ?? new Set();
    set.add(listener);
    this.#listeners.set(vm, set);
    return () => set.delete(listener);
  }

  #notify(vm: string): void {
    for (const listener of this.#listeners.get(vm) ?? []) listener();
  }
}

export interface SummedPoint {
  at: number;
  cpu: number;
  memory: number;
  /** The vmhost's memory cap, when the figures are its cgroup's. */
  limit: number | null;
}

/**
 * The episode's VMs summed per moment (samples within a second of each other are one moment), oldest first. With
 * `fromCgroup`, a moment whose samples carry their vmhost's cgroup counters takes those instead (all of an episode's
 * VMs share one vmhost, so the counters are the whole episode's: its VMs, their VMM and what the kernel charged).
 */
export function summed(series: readonly (readonly MetricSample[])[], { fromCgroup = false } = {}): SummedPoint[] {
  const byMoment = new Map<number, SummedPoint & { counted: boolean }>();
  for (const samples of series) {
    for (const sample of samples) {
      const at = Math.round(Date.parse(sample.at) / 1000);
      const point = byMoment.get(at) ?? { at, cpu: 0, memory: 0, limit: null, counted: false };
      const cgroup = fromCgroup ? sample.cgroup : undefined;
      if (cgroup) {
        Object.assign(point, { cpu: cgroup.cpuPercent, memory: cgroup.memoryBytes, limit: cgroup.memoryLimitBytes });
        point.counted = true;
      } else if (!point.counted) {
        point.cpu += sample.cpuPercent;
        point.memory += sample.memory.residentBytes;
      }
      byMoment.set(at, point);
    }
  }
  return [...byMoment.values()].sort((a, b) => a.at - b.at).map(({ counted: _, ...point }) => point);
}
