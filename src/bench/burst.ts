// Benchmark `burst` (issue 22, docs/engine.md "Bursts"): through a real engine in a throwaway data dir, one fork of
// --count children (default 256) of a running echo guest (16 MiB; idle in HLT until a key comes), timed from the request to
// its answer (all children running), and each child from the request to its own `running` event; then the children
// are removed before the next run. Each run also reports the engine's and the vmhost's fds and RSS after the removal.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { packageRoot } from '../package-root.js';
import { quantile } from './stats.js';
import { withThrowawayEngine } from './throwaway-engine.js';
import { benchHost, summarize, type BenchMetric, type BenchResult } from './vm-create.js';

export interface BurstBenchOptions {
  runs: number;
  count: number;
  progress: (line: string) => void;
}

export interface BurstRun {
  total_ms: number;
  child_p50_ms: number;
  child_p99_ms: number;
  engine: { fds: number; rss_mib: number };
  vmhost: { fds: number; rss_mib: number };
}

export interface BurstBenchResult extends BenchResult {
  count: number;
  perRun: BurstRun[];
}

/** A process's open fds and RSS (MiB, one decimal), from /proc. */
export function processUsage(pid: number) {
  const rss = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? '0';
  return { fds: readdirSync(`/proc/${pid}/fd`).length, rss_mib: Math.round(Number(rss) / 102.4) / 10 };
}

/**
 * The vmhost of `home`'s episode `episode`, found through its environment (SMOL_VMHOST): the process whose parent
 * matches too, when it runs under its jail launcher (which has the same command line and environment).
 */
export function vmhostPid(home: string, episode: string): number {
  const matches = new Map<number, number>(); // pid -> parent pid
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const env = readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0');
      const main = readFileSync(`/proc/${entry}/cmdline`, 'latin1').includes('vmhost-main');
      if (main && env.includes(`SMOL_HOME=${home}`) && env.includes(`SMOL_VMHOST=${episode}`)) {
        const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
        matches.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      }
    } catch {
      // gone, or not ours
    }
  }
  const pids = [...matches.keys()];
  const pid = pids.find((p) => matches.has(matches.get(p)!)) ?? (pids.length === 1 ? pids[0] : undefined);
  if (pid === undefined) throw new Error(`no vmhost for episode ${episode} of ${home}`);
  return pid;
}

export async function benchBurst(options: BurstBenchOptions): Promise<BurstBenchResult> {
  const host = benchHost();
  const guest = path.join(packageRoot, 'native', 'out', 'guests', 'echo.elf');
  return withThrowawayEngine('burst', async (smol, home) => {
    const file = path.join(home, 'echo.smolfile');
    writeFileSync(file, `kernel = "${guest}"\nmemory = 16\n`);
    const { episode, vm } = await smol.up(file, { name: 'burst' });
    await smol.write(vm.id, 'ready');
    await smol.waitForOutput(vm.id, /ready/);
    const { pid: enginePid } = await smol.api.call('health');
    const hostPid = vmhostPid(home, episode.id);
    const runningAt = new Map<string, number>();
    const events = smol.events((event) => {
      if (event.type === 'vm.updated' && event.vm.state === 'running' && !runningAt.has(event.vm.id))
        runningAt.set(event.vm.id, performance.now());
    });
    const perRun: BurstRun[] = [];
    const totals: number[] = [];
    const children: number[] = [];
    try {
      for (let run = 0; run < options.runs; run++) {
        const start = performance.now();
        const result = await smol.fork(vm.id, options.count, 'vm');
        const total = performance.now() - start;
        await new Promise((resolve) => setTimeout(resolve, 200)); // the last events arrive after the answer
        const times = result.children.map((child) => {
          const at = runningAt.get(child.id);
          if (at === undefined) throw new Error(`no running event for ${child.id}`);
          return at - start;
        });
        for (let i = 0; i < result.children.length; i += 16)
          await Promise.all(result.children.slice(i, i + 16).map((child) => smol.removeVm(child.id)));
        const r: BurstRun = {
          total_ms: Math.round(total),
          child_p50_ms: Math.round(quantile(times, 0.5)),
          child_p99_ms: Math.round(quantile(times, 0.99)),
          engine: processUsage(enginePid),
          vmhost: processUsage(hostPid),
        };
        perRun.push(r);
        totals.push(total);
        children.push(...times);
        options.progress(
          `burst ${run + 1}/${options.runs}: ${options.count} children in ${r.total_ms} ms, each running after ` +
            `p50 ${r.child_p50_ms} ms, p99 ${r.child_p99_ms} ms; after removing them: engine ${r.engine.fds} fds ` +
            `${r.engine.rss_mib} MiB, vmhost ${r.vmhost.fds} fds ${r.vmhost.rss_mib} MiB`,
        );
      }
    } finally {
      events.close();
    }
    const results: BenchMetric[] = [
      summarize(`fork ×${options.count}: request to all running`, totals),
      { ...summarize(`fork ×${options.count}: request to each child's running event`, children) },
    ];
    return {
      name: 'burst',
      runs: options.runs,
      warmup: 0,
      guest: 'echo.elf, 16 MiB',
      results,
      host,
      count: options.count,
      perRun,
    };
  });
}

export function formatBurstBenchResult(result: BurstBenchResult): string {
  const lines = result.perRun.map(
    (r, i) =>
      `run ${i + 1}: total ${r.total_ms} ms, per child p50 ${r.child_p50_ms} ms p99 ${r.child_p99_ms} ms; ` +
      `engine ${r.engine.fds} fds ${r.engine.rss_mib} MiB, vmhost ${r.vmhost.fds} fds ${r.vmhost.rss_mib} MiB`,
  );
  return `burst: fork ×${result.count} of ${result.guest} (${result.host.kvm.implementation})\n${lines.join('\n')}\n`;
}
