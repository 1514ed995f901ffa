// Benchmark `soak` (issue 22, docs/survival.md "Soak"): through a real engine in a throwaway data dir, the dirty guest
// checkpointing itself every second (`[snapshots] auto_checkpoint = "1s"`, keep 10) while it rewrites 4 MiB of its
// memory every second, for --minutes. Every few seconds a sample: the data dir's allocated bytes, the episode's
// snapshots (deleted ones a living snapshot still needs counted too), the longest memory-layer chain, the engine's and
// the vmhost's RSS and fds. Every --restore-every'th automatic checkpoint is forked and the child must run (one more
// round of writes, then its memory verified) before it is removed. At the end each series' min, max and slope, and
// which grew without bound (growthVerdict): the command then exits non-zero.
import { lstatSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Snapshot } from '../api/schema.js';
import { packageRoot } from '../package-root.js';
import { processUsage, vmhostPid } from './burst.js';
import { withThrowawayEngine } from './throwaway-engine.js';
import { benchHost, type BenchHost } from './vm-create.js';

export interface SoakBenchOptions {
  minutes: number;
  /** Seconds between samples. */
  sampleSeconds: number;
  /** Fork every this many automatic checkpoints and check the child runs. */
  restoreEvery: number;
  progress: (line: string) => void;
}

export const SOAK_SERIES = [
  'disk_mib',
  'snapshots',
  'chain_depth',
  'engine_rss_mib',
  'engine_fds',
  'vmhost_rss_mib',
  'vmhost_fds',
] as const;
export type SoakSeries = (typeof SOAK_SERIES)[number];

export type SoakSample = { t_s: number; vmhost_fd_kinds?: Record<string, number> } & Record<SoakSeries, number>;

/** A process's open fds by what they are (anon_inode:kvm-vm, memfd:..., socket, pipe, a file), to tell a leak's kind. */
export function fdKinds(pid: number): Record<string, number> {
  const kinds: Record<string, number> = {};
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    const kind = /^(socket|pipe|anon_inode:[^\]]*|memfd:[^ (]*)/.exec(target)?.[1]?.replace(/\[$/, '') ?? 'file';
    kinds[kind] = (kinds[kind] ?? 0) + 1;
  }
  return kinds;
}

export interface SeriesSummary {
  series: SoakSeries;
  min: number;
  max: number;
  /** Least-squares slope over the samples after the warm-up, per minute. */
  slope_per_min: number;
  /** What that slope adds over the measured window, against what is allowed. */
  growth: number;
  allowed: number;
  unbounded: boolean;
}

export interface SoakRestore {
  snapshot: string;
  ok: boolean;
  ms: number;
  error?: string;
}

export interface SoakBenchResult {
  name: 'soak';
  guest: string;
  host: BenchHost;
  loadAverageAtEnd: number[];
  minutes: number;
  checkpoints: number;
  writeRounds: number;
  restores: SoakRestore[];
  samples: SoakSample[];
  summary: SeriesSummary[];
  /** Whether it survived: nothing grew without bound, every restore ran and the checkpoints kept coming. */
  ok: boolean;
  failures: string[];
}

/**
 * Growth each series may show over the measured window (the run after the warm-up) before it counts as growing
 * without bound: the slope times the window's length, against an absolute floor or a share of the series' mean,
 * whichever is larger. A bounded store has a steady state (keep 10 automatic checkpoints, their layers, the base), so
 * its line is flat; a leak of one fd or one snapshot a minute over 30 minutes is well past these.
 */
export const GROWTH_ALLOWED: Record<SoakSeries, { floor: number; share: number }> = {
  disk_mib: { floor: 32, share: 0.25 },
  snapshots: { floor: 3, share: 0 },
  chain_depth: { floor: 3, share: 0 },
  engine_rss_mib: { floor: 24, share: 0.2 },
  engine_fds: { floor: 8, share: 0 },
  vmhost_rss_mib: { floor: 24, share: 0.2 },
  vmhost_fds: { floor: 8, share: 0 },
};

/** The warm-up left out of the verdict: the first fifth of the run, at least 30 s (the first `keep` checkpoints). */
export function warmupSeconds(totalSeconds: number): number {
  return Math.max(30, totalSeconds / 5);
}

function slope(points: { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** Each series' min, max and slope, and whether it grew without bound (GROWTH_ALLOWED) after the warm-up. */
export function growthVerdict(samples: SoakSample[]): SeriesSummary[] {
  const total = samples.at(-1)?.t_s ?? 0;
  const measured = samples.filter((s) => s.t_s >= warmupSeconds(total));
  const window = measured.length > 1 ? measured.at(-1)!.t_s - measured[0]!.t_s : 0;
  return SOAK_SERIES.map((series) => {
    const values = samples.map((s) => s[series]);
    const perSecond = slope(measured.map((s) => ({ x: s.t_s, y: s[series] })));
    const mean = measured.length ? measured.reduce((sum, s) => sum + s[series], 0) / measured.length : 0;
    const growth = perSecond * window;
    const allowed = Math.max(GROWTH_ALLOWED[series].floor, GROWTH_ALLOWED[series].share * mean);
    const round = (x: number) => Math.round(x * 100) / 100;
    return {
      series,
      min: values.length ? Math.min(...values) : 0,
      max: values.length ? Math.max(...values) : 0,
      slope_per_min: round(perSecond * 60),
      growth: round(growth),
      allowed: round(allowed),
      unbounded: measured.length >= 3 && growth > allowed,
    };
  });
}

/** Allocated bytes under `dir` (what du counts), not following links; files that vanish while walking are skipped. */
export function allocatedBytes(dir: string): number {
  let total = 0;
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const file = path.join(dir, entry);
    try {
      const stat = lstatSync(file);
      total += stat.blocks * 512;
      if (stat.isDirectory()) total += allocatedBytes(file);
    } catch {
      // removed while we walked (a checkpoint's partial dir, a deleted snapshot)
    }
  }
  return total;
}

/** The longest chain of memory layers (each snapshot's layerParent, then its, ...) among `snapshots`. */
export function longestLayerChain(snapshots: Snapshot[]): number {
  const byId = new Map(snapshots.map((s) => [s.id, s]));
  const depth = new Map<string, number>();
  const of = (s: Snapshot): number => {
    const known = depth.get(s.id);
    if (known !== undefined) return known;
    let d = 1;
    let at = s;
    const seen = new Set([s.id]);
    while (at.layerParent !== null) {
      const parent = byId.get(at.layerParent);
      if (!parent || seen.has(parent.id)) break;
      seen.add(parent.id);
      d++;
      at = parent;
    }
    depth.set(s.id, d);
    return d;
  };
  return snapshots.reduce((max, s) => Math.max(max, of(s)), 0);
}

export async function benchSoak(options: SoakBenchOptions): Promise<SoakBenchResult> {
  const host = benchHost();
  const guest = path.join(packageRoot, 'native', 'out', 'guests', 'dirty.elf');
  return withThrowawayEngine('soak', async (smol, home) => {
    const file = path.join(home, 'soak.smolfile');
    writeFileSync(
      file,
      `kernel = "${guest}"\ncmdline = "mib=4"\nmemory = 32\n\n[snapshots]\nauto_checkpoint = "1s"\nkeep = 10\n`,
    );
    const { episode, vm } = await smol.up(file, { name: 'soak' });
    await smol.waitForOutput(vm.id, /dirty: ready/);
    const { pid: enginePid } = await smol.api.call('health');
    const hostPid = vmhostPid(home, episode.id);
    const failures: string[] = [];
    const restores: SoakRestore[] = [];
    const toRestore: string[] = [];
    let checkpoints = 0;
    const events = smol.events((event) => {
      if (event.type !== 'snapshot.created' || event.snapshot.vm !== vm.id || event.snapshot.kind !== 'auto') return;
      checkpoints++;
      if (checkpoints % options.restoreEvery === 0) toRestore.push(event.snapshot.id);
    });
    const started = performance.now();
    const elapsed = () => (performance.now() - started) / 1000;
    const end = options.minutes * 60;
    let writeRounds = 0;
    let stopping = false;
    const writer = (async () => {
      while (!stopping) {
        await smol.write(vm.id, 'd').then(
          () => writeRounds++,
          (error: Error) => failures.push(`writing to the guest at ${Math.round(elapsed())} s: ${error.message}`),
        );
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    })();
    const restore = async (snapshot: string) => {
      const at = performance.now();
      try {
        const { children } = await smol.fork(snapshot, 1, 'snapshot');
        const child = children[0]!.id;
        try {
          const answer = smol.waitForOutput(child, /verify=(ok|bad)/, 60_000);
          // A checkpoint may catch the guest mid-round: it finishes that round, writes one more, then checks it.
          await smol.write(child, 'dv');
          const result = (await answer)[1];
          if (result !== 'ok') throw new Error(`the fork's memory did not verify (verify=${result})`);
        } finally {
          await smol.removeVm(child);
        }
        restores.push({ snapshot, ok: true, ms: Math.round(performance.now() - at) });
      } catch (error) {
        const message = (error as Error).message;
        restores.push({ snapshot, ok: false, ms: Math.round(performance.now() - at), error: message });
        failures.push(`restoring ${snapshot} (a fork of it): ${message}`);
      }
    };
    const samples: SoakSample[] = [];
    try {
      let nextSample = 0;
      while (elapsed() < end) {
        const snapshot = toRestore.shift();
        if (snapshot) await restore(snapshot);
        if (elapsed() >= nextSample) {
          nextSample += options.sampleSeconds;
          const snapshots = await smol.snapshots(episode.id);
          let engine, vmhost;
          try {
            engine = processUsage(enginePid);
            vmhost = processUsage(hostPid);
          } catch {
            const vmNow = await smol.vm(vm.id).catch(() => undefined);
            failures.push(
              `the ${engine ? 'vmhost' : 'engine'} (pid ${engine ? hostPid : enginePid}) is gone at ` +
                `${Math.round(elapsed())} s, after ${checkpoints} checkpoints; the VM is ${vmNow?.state ?? 'gone'}` +
                (vmNow?.exit ? ` (${JSON.stringify(vmNow.exit)})` : ''),
            );
            break;
          }
          const sample: SoakSample = {
            t_s: Math.round(elapsed() * 10) / 10,
            disk_mib: Math.round(allocatedBytes(home) / 104_857.6) / 10,
            snapshots: snapshots.length,
            chain_depth: longestLayerChain(snapshots),
            engine_rss_mib: engine.rss_mib,
            engine_fds: engine.fds,
            vmhost_rss_mib: vmhost.rss_mib,
            vmhost_fds: vmhost.fds,
            vmhost_fd_kinds: fdKinds(hostPid),
          };
          samples.push(sample);
          options.progress(
            `${sample.t_s} s: ${checkpoints} checkpoints, ${restores.length} restores; disk ${sample.disk_mib} MiB, ` +
              `${sample.snapshots} snapshots, chain ${sample.chain_depth}; engine ${sample.engine_rss_mib} MiB ` +
              `${sample.engine_fds} fds, vmhost ${sample.vmhost_rss_mib} MiB ${sample.vmhost_fds} fds`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    } finally {
      stopping = true;
      await writer;
      events.close();
    }
    const summary = growthVerdict(samples);
    for (const s of summary.filter((s) => s.unbounded))
      failures.push(
        `${s.series} grew without bound: ${s.slope_per_min}/min after the warm-up, ${s.growth} over the run ` +
          `(allowed ${s.allowed}; from ${s.min} to ${s.max})`,
      );
    // One checkpoint a second: fewer than half of them means checkpoints stalled (or failed) on the way.
    if (checkpoints < end / 2) failures.push(`only ${checkpoints} automatic checkpoints in ${end} s (1 s apart)`);
    return {
      name: 'soak',
      guest: 'dirty.elf, 32 MiB, 4 MiB rewritten each second',
      host,
      loadAverageAtEnd: os.loadavg().map((l) => Math.round(l * 100) / 100),
      minutes: options.minutes,
      checkpoints,
      writeRounds,
      restores,
      samples,
      summary,
      ok: failures.length === 0,
      failures,
    };
  });
}

export function formatSoakBenchResult(result: SoakBenchResult): string {
  const ok = result.restores.filter((r) => r.ok).length;
  const lines = [
    `soak: ${result.minutes} min of ${result.guest} (${result.host.kvm.implementation}), load ` +
      `${(result.host.loadAverageAtStart ?? []).join(' ')} at the start, ${result.loadAverageAtEnd.join(' ')} at the end`,
    `${result.checkpoints} automatic checkpoints, ${result.writeRounds} write rounds, ${ok}/${result.restores.length} ` +
      `restores ran`,
    ...result.summary.map(
      (s) =>
        `${s.series.padEnd(15)} min ${s.min} max ${s.max} slope ${s.slope_per_min}/min ` +
        `(${s.growth} over the run, allowed ${s.allowed})${s.unbounded ? '  GROWS WITHOUT BOUND' : ''}`,
    ),
    ...result.failures.map((f) => `FAILED: ${f}`),
    result.ok ? 'survived' : 'did not survive',
  ];
  return lines.join('\n') + '\n';
}
