// Per-VM CPU and memory metrics (docs/engine.md, "Metrics"): every interval the engine asks each vmhost for the CPU
// time of its running VMs' vCPU threads and their memory statistics, turns CPU time into a percentage of one CPU
// since the previous sample of the same native instance, keeps a short history per VM for sparklines, and emits
// one `metrics` event per VM.
import type { MemoryStats, MetricSample } from '../api/schema.js';
import type { CgroupCounters } from './vmhost-cgroup.js';

export const METRICS_INTERVAL_MS = 2000;
/** Samples kept per VM: five minutes at the default interval. */
export const METRICS_HISTORY = 150;

export interface RawSample {
  vm: string;
  /** The native instance: a restore or reset makes a new one, whose CPU clock starts again from zero. */
  instance: string;
  cpuNs: number;
  memory: MemoryStats;
  /** Its vmhost's cgroup (named, as several VMs share one) and what it counted. */
  cgroup?: { name: string; counters: CgroupCounters };
}

export class MetricsHistory {
  readonly #samples = new Map<string, MetricSample[]>();
  readonly #last = new Map<string, { instance: string; cpuNs: number; atMs: number }>();
  /** Each cgroup's CPU counter at the previous round, by cgroup name. */
  readonly #lastCgroup = new Map<string, { cpuNs: number; atMs: number }>();

  /** Adds one round of samples taken at `atMs`; returns the new points (a VM's first sample gives none). */
  add(raw: RawSample[], atMs: number): Array<{ vm: string; sample: MetricSample }> {
    const points: Array<{ vm: string; sample: MetricSample }> = [];
    const cgroupPercent = this.#cgroupPercents(raw, atMs);
    for (const { vm, instance, cpuNs, memory, cgroup } of raw) {
      const last = this.#last.get(vm);
      this.#last.set(vm, { instance, cpuNs, atMs });
      if (!last || last.instance !== instance || atMs <= last.atMs || cpuNs < last.cpuNs) continue;
      const cpuPercent = ((cpuNs - last.cpuNs) / 1e6 / (atMs - last.atMs)) * 100;
      const sample: MetricSample = { at: new Date(atMs).toISOString(), cpuPercent, memory };
      const counters = cgroup?.counters;
      const percent = cgroup && cgroupPercent.get(cgroup.name);
      if (counters && counters.memoryBytes !== null && percent !== undefined)
        sample.cgroup = {
          cpuPercent: percent,
          memoryBytes: counters.memoryBytes,
          memoryLimitBytes: counters.memoryLimitBytes,
          oomKills: counters.oomKills,
        };
      const history = this.#samples.get(vm) ?? [];
      history.push(sample);
      if (history.length > METRICS_HISTORY) history.splice(0, history.length - METRICS_HISTORY);
      this.#samples.set(vm, history);
      points.push({ vm, sample });
    }
    return points;
  }

  /** Each cgroup's CPU use since its previous round, in % of one CPU (a cgroup's first round gives none). */
  #cgroupPercents(raw: RawSample[], atMs: number): Map<string, number> {
    const percents = new Map<string, number>();
    for (const { cgroup } of raw) {
      if (!cgroup || percents.has(cgroup.name) || cgroup.counters.cpuNs === null) continue;
      const last = this.#lastCgroup.get(cgroup.name);
      this.#lastCgroup.set(cgroup.name, { cpuNs: cgroup.counters.cpuNs, atMs });
      if (last && atMs > last.atMs && cgroup.counters.cpuNs >= last.cpuNs)
        percents.set(cgroup.name, ((cgroup.counters.cpuNs - last.cpuNs) / 1e6 / (atMs - last.atMs)) * 100);
    }
    return percents;
  }

  /** Forgets a cgroup that is gone. */
  removeCgroup(name: string): void {
    this.#lastCgroup.delete(name);
  }

  samples(vm: string): MetricSample[] {
    return [...(this.#samples.get(vm) ?? [])];
  }

  remove(vm: string): void {
    this.#last.delete(vm);
    this.#samples.delete(vm);
  }
}
