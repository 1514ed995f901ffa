// `smol bench ui --engines N` (issue 25: "the app's list with 4 engines and 1,000 episodes each opens in under
// 1 s"): N real engines on throwaway data dirs, each seeded by ui-seed.ts with the same number of episodes, the
// first serving the page and the others added to it as remote engines over loopback TCP with their tokens (what
// `smol engine add` does). The built renderer in Chromium then opens the list: navigation → every engine's episodes
// counted and rows drawn. The same list of the first engine alone is measured first, in the same run, with the
// same browser, as the baseline (docs/remote.md, "Many engines in the app").
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pidAlive } from '../engine/engine-process.js';
import { packageRoot } from '../package-root.js';
import { Smol } from '../../sdk/typescript/smol.js';
import { tinyGuestDir } from '../smol-dirs.js';
import { median, p90 } from './stats.js';
import { seedUiHome } from './ui-seed.js';
import { listInPage, type Page } from './ui-page.js';
import { benchHost, type BenchHost } from './vm-create.js';

export interface UiEnginesBenchOptions {
  runs: number;
  engines: number;
  /** Episodes per engine. */
  episodes: number;
  chromium: string;
  progress: (line: string) => void;
}

export interface UiEnginesBenchResult {
  name: 'ui-engines';
  runs: number;
  warmup: number;
  inputs: { engines: number; episodesPerEngine: number; chromium: string; viewport: string };
  results: Array<{ metric: string; unit: string; p50: number; p90: number; samples: number[] }>;
  host: BenchHost & { loadAverage: { start: number[]; end: number[] } };
  notes: string[];
}

const WARMUP_RUNS = 1;
/** Snapshots of each seeded data dir's tree episode: the list is what is measured, not a tree. */
const TREE_SNAPSHOTS = 10;

interface RunningEngine {
  home: string;
  smol: Smol;
  pid: number;
}

export async function benchUiEngines(
  options: UiEnginesBenchOptions,
  chromium: typeof import('playwright-core').chromium,
  chromiumArgs: string[],
): Promise<UiEnginesBenchResult> {
  const { progress, engines: count, episodes } = options;
  const host = { ...benchHost(), loadAverage: { start: os.loadavg(), end: [] as number[] } };
  const echo = path.join(tinyGuestDir, 'echo.elf');
  const smolfile = path.join(packageRoot, 'smolfiles', 'echo.smolfile');
  const running: RunningEngine[] = [];
  const homes: string[] = [];
  // The engines file (remote engines, pins) is the user's, shared by every data dir: the engines this bench starts
  // keep theirs in its scratch directory, or its remotes would stay in every later engine's list.
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'smol-bench-engines-'));
  const configBefore = process.env.SMOL_CLIENT_CONFIG;
  process.env.SMOL_CLIENT_CONFIG = path.join(scratch, 'engines.json');
  const browser = await chromium.launch({ executablePath: options.chromium, args: chromiumArgs });
  try {
    for (let i = 0; i < count; i++) {
      // A short path: the engine's Unix socket lives in it.
      const home = mkdtempSync(path.join(os.tmpdir(), `smol-bench-eng${i}-`));
      homes.push(home);
      progress(`seeding engine ${i + 1} of ${count}: ${episodes} episodes`);
      await seedUiHome({ home, episodes, snapshots: TREE_SNAPSHOTS, echoGuest: echo, smolfile, progress });
      const smol = await Smol.connect({ home });
      const { pid } = await smol.api.call('health');
      running.push({ home, smol, pid });
    }
    const local = running[0]!;
    const page = await local.smol.api.call('listen', { body: { host: '127.0.0.1', port: 0 } });
    const viewport = { width: 1440, height: 900 };
    const samples = new Map<string, number[]>();
    const add = (name: string, value: number) => samples.set(name, [...(samples.get(name) ?? []), value]);
    const measure = async (what: string, rows: number) => {
      for (let run = 0; run < WARMUP_RUNS + options.runs; run++) {
        const context = await browser.newContext({ viewport, colorScheme: 'dark' });
        const tab: Page = await context.newPage();
        const errors: string[] = [];
        tab.on('pageerror', (error) => errors.push(error.message));
        try {
          const list = await listInPage(tab, page.url, rows);
          if (errors.length) throw new Error(`the page threw: ${errors.join('; ')}`);
          progress(
            `${run < WARMUP_RUNS ? 'warm-up' : `run ${run + 1 - WARMUP_RUNS}/${options.runs}`}: ${what} ${list.listMs.toFixed(0)} ms`,
          );
          if (run >= WARMUP_RUNS) add(what, list.listMs);
        } finally {
          await context.close();
        }
      }
    };
    await measure(`navigation → the local engine's ${episodes}-episode list drawn (one engine)`, episodes);
    for (let i = 1; i < count; i++) {
      const listener = await running[i]!.smol.api.call('listen', { body: { host: '127.0.0.1', port: 0 } });
      const url = new URL(listener.url);
      const token = url.searchParams.get('token');
      if (!token) throw new Error(`engine ${i + 1}'s listener URL has no token: ${listener.url}`);
      await local.smol.api.call('addEngine', { body: { name: `bench-${i}`, url: url.origin, token } });
    }
    await measure(
      `navigation → ${count} engines' ${count * episodes} episodes counted and drawn (${count - 1} remote)`,
      count * episodes,
    );
    host.loadAverage.end = os.loadavg();
    const round = (x: number) => Math.round(x * 1000) / 1000;
    return {
      name: 'ui-engines',
      runs: options.runs,
      warmup: WARMUP_RUNS,
      inputs: { engines: count, episodesPerEngine: episodes, chromium: options.chromium, viewport: '1440x900' },
      results: [...samples].map(([metric, values]) => ({
        metric,
        unit: 'ms',
        p50: round(median(values)),
        p90: round(p90(values)),
        samples: values.map(round),
      })),
      host,
      notes: [
        'every engine runs on this machine (loopback TCP, plain HTTP); the remote ones are reached through the local ' +
          'engine, as the app reaches them (/engines/NAME/…)',
        'the goal (issue 25) is under 1 s for 4 engines × 1,000 episodes',
      ],
    };
  } finally {
    await browser.close();
    for (const { smol, pid } of running) {
      await smol.api.call('shutdown').catch(() => undefined);
      smol.api.close();
      for (let i = 0; i < 300 && pidAlive(pid); i++) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (const home of homes) rmSync(home, { recursive: true, force: true });
    if (configBefore === undefined) delete process.env.SMOL_CLIENT_CONFIG;
    else process.env.SMOL_CLIENT_CONFIG = configBefore;
    rmSync(scratch, { recursive: true, force: true });
  }
}

export function formatUiEnginesBenchResult(result: UiEnginesBenchResult): string {
  const { kvm, cpus, cpuModel, loadAverage } = result.host;
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
  const width = Math.max('metric'.length, ...result.results.map((r) => r.metric.length));
  return (
    [
      `ui --engines: ${result.runs} runs after ${result.warmup} warm-up; ${result.inputs.engines} engines × ` +
        `${result.inputs.episodesPerEngine} episodes`,
      `host: ${cpus} × ${cpuModel}, KVM ${kvm.implementation}; load average ${load(loadAverage.start)} at the ` +
        `start, ${load(loadAverage.end)} at the end`,
      `${'metric'.padEnd(width)}  ${'p50'.padStart(9)}  ${'p90'.padStart(9)}  unit`,
      ...result.results.map(
        (r) => `${r.metric.padEnd(width)}  ${r.p50.toFixed(1).padStart(9)}  ${r.p90.toFixed(1).padStart(9)}  ${r.unit}`,
      ),
      'samples:',
      ...result.results.map((r) => `  ${r.metric}: ${r.samples.join(', ')}`),
      ...result.notes.map((note) => `note: ${note}`),
    ].join('\n') + '\n'
  );
}
