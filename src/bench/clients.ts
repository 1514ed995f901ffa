// Benchmark `clients` (issue 22, "Bursts": "1,000 episodes in a store; 200 concurrent API clients"): a real engine on
// a throwaway data dir seeded through its own store with --episodes episodes (ui-seed.ts: records of stopped VMs,
// as an RL run's store holds after a day), plus --running echo guests that run. Then --clients clients, each its own
// keep-alive connection to the engine's Unix socket, for --seconds: each request is a list of every episode
// (GET /api/v1/episodes), and every 10th one instead types into a running VM's console or reads its last lines.
// Each run has two phases of --seconds each: plain lists (every list a full body), then conditional lists, as a
// poller that keeps what it got asks (If-None-Match with the last ETag: 304 and no body while nothing changed).
// Meanwhile the list changes every second (a label set on a running VM), so pollers do refetch. Reports the list's
// latency in each phase (p50, p99; the issue's goal: p99 under 100 ms on this machine), every request kind's,
// requests per second, failures, and the engine's fds and RSS before the clients, while they run, and after they
// have closed (a leak shows as the after figure above the before one).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ApiClient, type IfChanged } from '../api/api-client.js';
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
  /** plain: every list a full body; conditional: If-None-Match with the last ETag the client got. */
  lists: ListMode;
  requests_per_s: number;
  list: KindFigures;
  /** Of the conditional lists: how many were answered 304 (no body). */
  not_modified: number;
  type: KindFigures;
  logs: KindFigures;
  /**
   * CPU seconds the engine's process used during the phase, and the bench's own (its clients read and parse every
   * list on the same cores): which side a list's time goes to.
   */
  cpu_s: { engine: number; clients: number };
  /** The first few failures, as the engine or the socket said them. */
  failures: string[];
  engine: { before: Usage; during: Usage; after: Usage };
}

type Usage = { fds: number; rss_mib: number };
type ListMode = 'plain' | 'conditional';

export interface ClientsBenchResult {
  name: 'clients';
  runs: number;
  episodes: number;
  clients: number;
  running: number;
  seconds: number;
  host: BenchHost;
  perRun: ClientsRun[];
  /** Medians over the runs' plain phases. */
  list_p50_ms: number;
  list_p99_ms: number;
  /** Medians over the runs' conditional phases. */
  conditional_p50_ms: number;
  conditional_p99_ms: number;
  goal: { list_p99_ms: number; met: boolean; conditional_met: boolean };
}

const round = (ms: number) => Math.round(ms * 10) / 10;

/** User plus system CPU seconds of process `pid` so far (/proc/PID/stat, in clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function figures(samples: number[], failed: number): KindFigures {
  return {
    requests: samples.length + failed,
    failed,
    p50_ms: samples.length ? round(quantile(samples, 0.5)) : 0,
    p99_ms: samples.length ? round(quantile(samples, 0.99)) : 0,
  };
}

async function oneRun(
  options: ClientsBenchOptions,
  lists: ListMode,
  socketPath: string,
  vms: string[],
  enginePid: number,
) {
  const before = processUsage(enginePid);
  let notModified = 0;
  const samples = { list: [] as number[], type: [] as number[], logs: [] as number[] };
  const failed = { list: 0, type: 0, logs: 0 };
  const failures: string[] = [];
  const clients = Array.from({ length: options.clients }, () => new ApiClient({ socketPath }));
  const deadline = performance.now() + options.seconds * 1000;
  let during: Usage | null = null;
  const sampler = setTimeout(() => (during = processUsage(enginePid)), (options.seconds * 1000) / 2);
  // A change the list shows, every second: the conditional pollers' ETags go stale and they fetch the list again.
  const changer = new ApiClient({ socketPath });
  let tick = 0;
  const changes = vms.length
    ? setInterval(() => {
        const vm = vms[tick % vms.length]!;
        void changer
          .request('PATCH', `${API_PREFIX}/vms/${vm}`, { labels: { tick: ++tick } })
          .catch((error: Error) => failures.length < 5 && failures.push(`label: ${error.message}`));
      }, 1000)
    : null;
  const loop = async (client: ApiClient, index: number) => {
    let etag: string | null = null;
    let kept = 0;
    for (let n = 0; performance.now() < deadline; n++) {
      const vm = vms[(index + n) % vms.length]!;
      const kind: keyof typeof samples = n % 10 !== 9 || !vms.length ? 'list' : n % 20 === 9 ? 'type' : 'logs';
      const started = performance.now();
      try {
        if (kind === 'list' && lists === 'conditional') {
          const answer: IfChanged<{ episodes: unknown[] }> = await client.getIfChanged(`${API_PREFIX}/episodes`, etag);
          if (answer.changed) [etag, kept] = [answer.etag, answer.value.episodes.length];
          else notModified++;
          if (kept < options.episodes) throw new Error(`the list had ${kept} episodes`);
        } else if (kind === 'list') {
          const { episodes } = await client.request<{ episodes: unknown[] }>('GET', `${API_PREFIX}/episodes`);
          if (episodes.length < options.episodes) throw new Error(`the list had ${episodes.length} episodes`);
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
  const cpuBefore = { engine: cpuSeconds(enginePid), clients: cpuSeconds(process.pid) };
  await Promise.all(clients.map((client, i) => loop(client, i)));
  const elapsed = (performance.now() - started) / 1000;
  const cpu = {
    engine: Math.round((cpuSeconds(enginePid) - cpuBefore.engine) * 10) / 10,
    clients: Math.round((cpuSeconds(process.pid) - cpuBefore.clients) * 10) / 10,
  };
  clearTimeout(sampler);
  if (changes) clearInterval(changes);
  changer.close();
  for (const client of clients) client.close();
  await new Promise((resolve) => setTimeout(resolve, 1000)); // the engine sees the connections close
  const total = Object.values(samples).reduce((n, s) => n + s.length, 0);
  return {
    lists,
    requests_per_s: Math.round(total / elapsed),
    list: figures(samples.list, failed.list),
    not_modified: notModified,
    cpu_s: cpu,
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
      for (const lists of ['plain', 'conditional'] as const) {
        const r = await oneRun(options, lists, path.join(home, 'engine.sock'), vms, pid);
        perRun.push(r);
        options.progress(`run ${run + 1}/${options.runs}, ${formatRun(r)}`);
      }
    }
    const mid = (values: number[]) => round(quantile(values, 0.5));
    const of = (lists: ListMode) => perRun.filter((r) => r.lists === lists);
    const listP99 = mid(of('plain').map((r) => r.list.p99_ms));
    const conditionalP99 = mid(of('conditional').map((r) => r.list.p99_ms));
    return {
      name: 'clients',
      runs: options.runs,
      episodes: listed,
      clients: options.clients,
      running: options.running,
      seconds: options.seconds,
      host,
      perRun,
      list_p50_ms: mid(of('plain').map((r) => r.list.p50_ms)),
      list_p99_ms: listP99,
      conditional_p50_ms: mid(of('conditional').map((r) => r.list.p50_ms)),
      conditional_p99_ms: conditionalP99,
      goal: { list_p99_ms: 100, met: listP99 < 100, conditional_met: conditionalP99 < 100 },
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
  const list = r.lists === 'plain' ? kind('list', r.list) : `${kind('list', r.list)} ${r.not_modified} of them 304`;
  return (
    `${r.lists} lists: ${r.requests_per_s} requests/s: ${list}, ${kind('type', r.type)}, ${kind('logs', r.logs)}; ` +
    `CPU: engine ${r.cpu_s.engine} s, clients ${r.cpu_s.clients} s; ` +
    `engine before ${usage(r.engine.before)}, during ${usage(r.engine.during)}, after ${usage(r.engine.after)}` +
    (r.failures.length ? `; failures: ${r.failures.join(' | ')}` : '')
  );
}

export function formatClientsBenchResult(result: ClientsBenchResult): string {
  const lines = result.perRun.map((r, i) => `run ${Math.floor(i / 2) + 1}, ${formatRun(r)}`);
  const verdict = (met: boolean) => (met ? 'met' : 'missed');
  return (
    `clients: ${result.clients} clients for ${result.seconds} s against ${result.episodes} episodes ` +
    `(${result.running} running echo guests; ${result.host.kvm.implementation}, load ${(result.host.loadAverageAtStart ?? []).join(' ')})\n` +
    `${lines.join('\n')}\n` +
    `plain list p50 ${result.list_p50_ms} ms, p99 ${result.list_p99_ms} ms; conditional list p50 ` +
    `${result.conditional_p50_ms} ms, p99 ${result.conditional_p99_ms} ms (medians of ${result.runs} runs); ` +
    `goal p99 under ${result.goal.list_p99_ms} ms: plain ${verdict(result.goal.met)}, ` +
    `conditional ${verdict(result.goal.conditional_met)}\n`
  );
}
