// Benchmark `clients` (issue 22, "Bursts": "1,000 episodes in a store; 200 concurrent API clients"): a real engine on
// a throwaway data dir seeded through its own store with --episodes episodes (ui-seed.ts: records of stopped VMs,
// as an RL run's store holds after a day), plus --running echo guests that run. Then --clients clients, each its own
// keep-alive connection to the engine's Unix socket, for --seconds: each request is a list of every episode
// (GET /api/v1/episodes), and every 10th one instead types into a running VM's console or reads its last lines.
// Reports the list's latency (p50, p99; the issue's goal: p99 under 100 ms on this machine), every request kind's,
// requests per second, failures, and the engine's fds and RSS before the clients, while they run, and after they
// have closed (a leak shows as the after figure above the before one).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ApiClient } from '../api/api-client.js';
import { API_PREFIX } from '../api/schema.js';
import { pidAlive } from '../engine/engine-process.js';
import { packageRoot } from '../package-root.js';
import { Smol } from '../../sdk/typescript/smol.js';
import { processUsage } from './burst.js';
import { quantile } from './stats.js';
import { seedUiHome } from './ui-seed.js';
import { benchHost, type BenchHost } from './vm-create.js';

export interface ClientsBenchOptions {
  runs: number;
  episodes: number;
  clients: number;
  running: number;
  seconds: number;
  progress: (line: string) => void;
}

interface KindFigures {
  requests: number;
  failed: number;
  p50_ms: number;
  p99_ms: number;
}

export interface ClientsRun {
  requests_per_s: number;
  list: KindFigures;
  type: KindFigures;
  logs: KindFigures;
  /** The first few failures, as the engine or the socket said them. */
  failures: string[];
  engine: { before: Usage; during: Usage; after: Usage };
}

type Usage = { fds: number; rss_mib: number };

export interface ClientsBenchResult {
  name: 'clients';
  runs: number;
  episodes: number;
  clients: number;
  running: number;
  seconds: number;
  host: BenchHost;
  perRun: ClientsRun[];
  /** Medians over the runs. */
  list_p50_ms: number;
  list_p99_ms: number;
  goal: { list_p99_ms: number; met: boolean };
}

const round = (ms: number) => Math.round(ms * 10) / 10;

function figures(samples: number[], failed: number): KindFigures {
  return {
    requests: samples.length + failed,
    failed,
    p50_ms: samples.length ? round(quantile(samples, 0.5)) : 0,
    p99_ms: samples.length ? round(quantile(samples, 0.99)) : 0,
  };
}

async function oneRun(options: ClientsBenchOptions, socketPath: string, vms: string[], enginePid: number) {
  const before = processUsage(enginePid);
  const samples = { list: [] as number[], type: [] as number[], logs: [] as number[] };
  const failed = { list: 0, type: 0, logs: 0 };
  const failures: string[] = [];
  const clients = Array.from({ length: options.clients }, () => new ApiClient({ socketPath }));
  const deadline = performance.now() + options.seconds * 1000;
  let during: Usage | null = null;
  const sampler = setTimeout(() => (during = processUsage(enginePid)), (options.seconds * 1000) / 2);
  const loop = async (client: ApiClient, index: number) => {
    for (let n = 0; performance.now() < deadline; n++) {
      const vm = vms[(index + n) % vms.length]!;
      const kind: keyof typeof samples = n % 10 !== 9 || !vms.length ? 'list' : n % 20 === 9 ? 'type' : 'logs';
      const started = performance.now();
      try {
        if (kind === 'list') {
          const list = await client.request<unknown[]>('GET', `${API_PREFIX}/episodes`);
          if (list.length < options.episodes) throw new Error(`the list had ${list.length} episodes`);
        } else if (kind === 'type') {
          await client.request('POST', `${API_PREFIX}/vms/${vm}/console`, { data: `c${index}.${n};` });
        } else {
          await client.request('GET', `${API_PREFIX}/vms/${vm}/logs?tail=5`);
        }
        samples[kind].push(performance.now() - started);
      } catch (error) {
        failed[kind]++;
        if (failures.length < 5) failures.push(`${kind}: ${(error as Error).message}`);
      }
    }
  };
  const started = performance.now();
  await Promise.all(clients.map((client, i) => loop(client, i)));
  const elapsed = (performance.now() - started) / 1000;
  clearTimeout(sampler);
  for (const client of clients) client.close();
  await new Promise((resolve) => setTimeout(resolve, 1000)); // the engine sees the connections close
  const total = Object.values(samples).reduce((n, s) => n + s.length, 0);
  return {
    requests_per_s: Math.round(total / elapsed),
    list: figures(samples.list, failed.list),
    type: figures(samples.type, failed.type),
    logs: figures(samples.logs, failed.logs),
    failures,
    engine: { before, during: during ?? processUsage(enginePid), after: processUsage(enginePid) },
  } satisfies ClientsRun;
}

export async function benchClients(options: ClientsBenchOptions): Promise<ClientsBenchResult> {
  const host = benchHost();
  const echo = path.join(packageRoot, 'native', 'out', 'guests', 'echo.elf');
  // A short path: the engine's Unix socket lives in it.
  const home = mkdtempSync(path.join(os.tmpdir(), 'smol-bench-clients-'));
  const smolfile = path.join(home, 'echo.smolfile');
  writeFileSync(smolfile, `kernel = "${echo}"\nmemory = 16\n`);
  let smol: Smol | null = null;
  let pid = 0;
  try {
    const seeded = await seedUiHome({
      home,
      episodes: options.episodes - options.running,
      snapshots: 10,
      echoGuest: echo,
      smolfile,
      progress: options.progress,
    });
    smol = await Smol.connect({ home });
    ({ pid } = await smol.api.call('health'));
    const vms: string[] = [];
    for (let i = 0; i < options.running; i++) {
      const { vm } = await smol.up(smolfile, { name: `running-${i}` });
      vms.push(vm.id);
    }
    const listed = (await smol.episodes()).length;
    if (listed !== seeded.episodes + options.running)
      throw new Error(`the engine lists ${listed} episodes, not the ${seeded.episodes + options.running} made`);
    options.progress(`${listed} episodes (${options.running} running); ${options.clients} clients`);
    const perRun: ClientsRun[] = [];
    for (let run = 0; run < options.runs; run++) {
      const r = await oneRun(options, path.join(home, 'engine.sock'), vms, pid);
      perRun.push(r);
      options.progress(`run ${run + 1}/${options.runs}: ${formatRun(r)}`);
    }
    const mid = (values: number[]) => round(quantile(values, 0.5));
    const listP99 = mid(perRun.map((r) => r.list.p99_ms));
    return {
      name: 'clients',
      runs: options.runs,
      episodes: listed,
      clients: options.clients,
      running: options.running,
      seconds: options.seconds,
      host,
      perRun,
      list_p50_ms: mid(perRun.map((r) => r.list.p50_ms)),
      list_p99_ms: listP99,
      goal: { list_p99_ms: 100, met: listP99 < 100 },
    };
  } finally {
    if (smol) {
      await smol.api.call('shutdown').catch(() => undefined);
      smol.api.close();
      for (let i = 0; i < 300 && pid && pidAlive(pid); i++) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    rmSync(home, { recursive: true, force: true });
  }
}

function formatRun(r: ClientsRun): string {
  const kind = (name: string, k: KindFigures) =>
    `${name} ${k.requests} (p50 ${k.p50_ms} ms, p99 ${k.p99_ms} ms${k.failed ? `, ${k.failed} failed` : ''})`;
  const usage = (u: Usage) => `${u.fds} fds ${u.rss_mib} MiB`;
  return (
    `${r.requests_per_s} requests/s: ${kind('list', r.list)}, ${kind('type', r.type)}, ${kind('logs', r.logs)}; ` +
    `engine before ${usage(r.engine.before)}, during ${usage(r.engine.during)}, after ${usage(r.engine.after)}` +
    (r.failures.length ? `; failures: ${r.failures.join(' | ')}` : '')
  );
}

export function formatClientsBenchResult(result: ClientsBenchResult): string {
  const lines = result.perRun.map((r, i) => `run ${i + 1}: ${formatRun(r)}`);
  const verdict = result.goal.met ? 'met' : 'missed';
  return (
    `clients: ${result.clients} clients for ${result.seconds} s against ${result.episodes} episodes ` +
    `(${result.running} running echo guests; ${result.host.kvm.implementation}, load ${(result.host.loadAverageAtStart ?? []).join(' ')})\n` +
    `${lines.join('\n')}\n` +
    `list p50 ${result.list_p50_ms} ms, p99 ${result.list_p99_ms} ms (median of ${result.runs} runs); ` +
    `goal p99 under ${result.goal.list_p99_ms} ms: ${verdict}\n`
  );
}
