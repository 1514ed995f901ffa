// Per-VM CPU and memory metrics (docs/engine.md, "Metrics"): every interval the engine asks each vmhost for the CPU
// time of its running VMs' vCPU threads and their memory statistics, turns CPU time into a percentage of one CPU
// since the previous sample of the same native instance, keeps a short history per VM for sparklines, and emits
// one `metrics` event per VM.
import type { MemoryStats, MetricSample } from '../api/schema.js';

export const METRICS_INTERVAL_MS = 2000;
/** Samples kept per VM: five minutes at the default interval. */
export const METRICS_HISTORY = 150;

export interface RawSample {
  vm: string;
  /** The native instance: a restore or reset makes a new one, whose CPU clock starts again from zero. */
  instance: string;
  cpuNs: number;
  memory: MemoryStats;
}

export class MetricsHistory {
  readonly #samples = new Map<string, MetricSample[]>();
  readonly #last = new Map<string, { instance: string; cpuNs: number; atMs: number }>();

  /** Adds one round of samples taken at `atMs`; returns the new points (a VM's first sample gives none). */
  add(raw: RawSample[], atMs: number): Array<{ vm: string; sample: MetricSample }> {
    const points: Array<{ vm: string; sample: MetricSample }> = [];
    for (const { vm, instance, cpuNs, memory } of raw) {
      const last = this.#last.get(vm);
      this.#last.set(vm, { instance, cpuNs, atMs });
      if (!last || last.instance !== instance || atMs <= last.atMs || cpuNs < last.cpuNs) continue;
      const cpuPercent = ((cpuNs - last.cpuNs) / 1e6 / (atMs - last.atMs)) * 100;
      const sample: MetricSample = { at: new Date(atMs).toISOString(), cpuPercent, memory };
      const history = this.#samples.get(vm) ?? [];
      history.push(sample);
      if (history.length > METRICS_HISTORY) history.splice(0, history.length - METRICS_HISTORY);
      this.#samples.set(vm, history);
      points.push({ vm, sample });
    }
    return points;
  }

  samples(vm: string): MetricSample[] {
    return [...(this.#samples.get(vm) ?? [])];
  }

  remove(vm: string): void {
    this.#last.delete(vm);
    this.#samples.delete(vm);
  }
}
