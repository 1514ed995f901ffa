// Benchmark `ui`: the built renderer in Chromium (Playwright) against a real engine on a throwaway data dir, the way
// `smol serve` runs it (the engine, then a TCP listener whose URL carries the token). Seeded by ui-seed.ts through
// the engine's own store: 1,000 episodes, one of them with a 5,000-snapshot fork tree. Measures:
//   - the episodes list: first contentful paint, and navigation → the 1,000-episode list drawn;
//   - the fork tree: opening it (click → nodes drawn), and frames per second while a mouse drag pans it;
//   - at scale (issue 23; ui-scale.ts): a real episode with 89 snapshots and 23 running VMs checkpointing themselves:
//     opening it, and frames per second while panning its tree as the automatic checkpoints arrive;
//   - the console: a real VM (native/guests/flood.c) printing numbered lines, each checked in the page's xterm buffer
//     as it is parsed (a missing or garbled line counts as a drop), in bytes per second; and each stage of that path
//     alone (the VMM's virtio-console and COM1 and the engine's console WebSocket, from console.ts; the page's xterm)
//     to say where the limit is.
// README, "Benchmarks"; docs/ui.md, "Performance".
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pidAlive } from '../engine/engine-process.js';
import { packageRoot } from '../package-root.js';
import { Smol } from '../../sdk/typescript/smol.js';
import { tinyGuestDir } from '../smol-dirs.js';
import { engineStage, LINE_BYTES, uartLinesFor, vmmStage, writeFloodSmolfile } from './console.js';
import { median, p90 } from './stats.js';
import { seedUiHome } from './ui-seed.js';
import { benchHost, type BenchHost } from './vm-create.js';
import {
  browserStage,
  colourTreeInPage,
  consoleInPage,
  listInPage,
  panTreeInPage,
  treeInPage,
  type Page,
} from './ui-page.js';
import { AUTO_EVERY_S, SCALE_SNAPSHOTS, SCALE_VMS, makeScaleEpisode, scaleInPage } from './ui-scale.js';

export interface UiBenchOptions {
  runs: number;
  episodes: number;
  snapshots: number;
  /** Lines the flood guest prints per console run (64 bytes each). */
  consoleLines: number;
  chromium: string;
  progress: (line: string) => void;
}

export interface UiMetric {
  metric: string;
  unit: string;
  p50: number;
  p90: number;
  samples: number[];
}

export interface UiBenchResult {
  name: 'ui';
  runs: number;
  warmup: number;
  inputs: {
    episodes: number;
    snapshots: number;
    consoleLines: number;
    lineBytes: number;
    chromium: string;
    viewport: string;
    /** The scale stage's episode (ui-scale.ts). */
    scale: { snapshots: number; vms: number; autoCheckpointEverySeconds: number };
  };
  results: UiMetric[];
  host: BenchHost & { loadAverage: { start: number[]; end: number[] } };
  notes: string[];
}

const WARMUP_RUNS = 1;
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

function metric(name: string, unit: string, samples: number[]): UiMetric {
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return { metric: name, unit, p50: round(median(samples)), p90: round(p90(samples)), samples: samples.map(round) };
}

/** The built renderer is there, and Playwright's Chromium driver (a dev dependency). */
export async function uiBenchChromium(): Promise<typeof import('playwright-core').chromium> {
  if (!existsSync(path.join(packageRoot, 'dist', 'renderer', 'index.html'))) {
    throw new Error('the UI is not built: run npm run build:renderer');
  }
  try {
    return (await import('playwright-core')).chromium;
  } catch {
    throw new Error('smol bench ui needs playwright-core (a dev dependency): run npm install in the checkout');
  }
}

export async function benchUi(options: UiBenchOptions): Promise<UiBenchResult> {
  const { progress } = options;
  const flood = path.join(tinyGuestDir, 'flood.elf');
  const echo = path.join(tinyGuestDir, 'echo.elf');
  for (const guest of [flood, echo]) {
    if (!existsSync(guest)) throw new Error(`${guest} is not built: run make -C native guests`);
  }
  const chromium = await uiBenchChromium();
  const host = { ...benchHost(), loadAverage: { start: os.loadavg(), end: [] as number[] } };
  // A short path: the engine's Unix socket lives in it.
  const home = mkdtempSync(path.join(os.tmpdir(), 'smol-bench-ui-'));
  const echoSmolfile = path.join(packageRoot, 'smolfiles', 'echo.smolfile');
  const floodSmolfile = writeFloodSmolfile(home, options.consoleLines);
  const seeded = await seedUiHome({
    home,
    episodes: options.episodes,
    snapshots: options.snapshots,
    echoGuest: echo,
    smolfile: echoSmolfile,
    progress,
  });
  progress('starting the engine on the seeded data dir, and its TCP listener (what smol serve does)');
  const smol = await Smol.connect({ home });
  const { pid } = await smol.api.call('health');
  const browser = await chromium.launch({ executablePath: options.chromium, args: CHROMIUM_ARGS });
  try {
    const listener = await smol.api.call('listen', { body: { host: '127.0.0.1', port: 0 } });
    const loaded = await smol.episodes();
    if (loaded.length !== seeded.episodes) {
      throw new Error(`the engine loaded ${loaded.length} episodes of the ${seeded.episodes} seeded`);
    }
    const viewport = { width: 1440, height: 900 };
    const samples = new Map<string, { unit: string; values: number[] }>();
    const add = (name: string, unit: string, value: number) => {
      const entry = samples.get(name) ?? { unit, values: [] };
      entry.values.push(value);
      samples.set(name, entry);
    };
    const notes: string[] = [];
    for (let run = 0; run < WARMUP_RUNS + options.runs; run++) {
      const counted = run >= WARMUP_RUNS;
      const label = counted ? `run ${run + 1 - WARMUP_RUNS}/${options.runs}` : 'warm-up';
      const context = await browser.newContext({ viewport, colorScheme: 'dark' });
      const page: Page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      try {
        const list = await listInPage(page, listener.url, seeded.episodes);
        const tree = await treeInPage(page, seeded.treeEpisode.name);
        await colourTreeInPage(page);
        const coloured = await panTreeInPage(page);
        progress(
          `${label}: list ${list.listMs.toFixed(0)} ms (${list.rows} rows in the DOM), tree open ${tree.openMs.toFixed(0)} ms, ` +
            `pan ${tree.fps.toFixed(1)} fps (${tree.maxNodes} nodes in the DOM of ${tree.shown} laid out), ` +
            `coloured by reward ${coloured.fps.toFixed(1)} fps`,
        );
        const { episode, vm } = await smol.up(floodSmolfile);
        let consoleRun, inPage;
        try {
          consoleRun = await consoleInPage(page, episode.name, vm.id, options.consoleLines, LINE_BYTES);
          // The same console's terminal, now idle, written to straight from the page.
          inPage = await browserStage(page, vm.id, 10 << 20, LINE_BYTES);
        } finally {
          await smol.api
            .call('deleteEpisode', { params: { episode: episode.id }, query: { force: 'true' } })
            .catch(() => undefined);
        }
        progress(
          `${label}: console ${(consoleRun.bytesPerSecond / 2 ** 20).toFixed(2)} MiB/s end to end, ` +
            `${consoleRun.missing} lines missing; the page alone ${(inPage.bytesPerSecond / 2 ** 20).toFixed(1)} MiB/s ` +
            `(${inPage.missing} missing, longest frame ${inPage.longestFrameMs.toFixed(0)} ms)`,
        );
        if (errors.length) throw new Error(`the page threw: ${errors.join('; ')}`);
        if (!counted) continue;
        add('first contentful paint', 'ms', list.fcpMs);
        add(`navigation → ${seeded.episodes}-episode list drawn`, 'ms', list.listMs);
        add(`open the ${seeded.snapshots}-snapshot tree: click → nodes drawn`, 'ms', tree.openMs);
        add('fork tree pan (mouse drag), frames per second', 'fps', tree.fps);
        add('fork tree pan, longest frame', 'ms', tree.longestFrameMs);
        add('fork tree pan, most nodes in the DOM at once', 'nodes', tree.maxNodes);
        add('fork tree coloured by reward, best branch shown: pan, frames per second', 'fps', coloured.fps);
        add('fork tree coloured by reward: pan, longest frame', 'ms', coloured.longestFrameMs);
        add(
          'console end to end (flood VM → virtio-console → engine → page xterm), no line missing',
          'MiB/s',
          consoleRun.bytesPerSecond / 2 ** 20,
        );
        add('console end to end, lines missing or garbled', 'lines', consoleRun.missing);
        add('console end to end, longest frame', 'ms', consoleRun.longestFrameMs);
        add(
          'stage: page alone (10 MiB into the console session as 64 KiB messages, 10 MiB/s offered)',
          'MiB/s',
          inPage.bytesPerSecond / 2 ** 20,
        );
        add('stage: page alone, lines missing or garbled', 'lines', inPage.missing);
        add('stage: page alone, longest frame', 'ms', inPage.longestFrameMs);
        if (run === WARMUP_RUNS)
          notes.push(`tree: ${tree.shown} nodes laid out (chains collapsed) of ${seeded.snapshots}`);
      } finally {
        await context.close();
      }
      if (!counted) continue;
      const stageLines = Math.max(200, Math.floor(options.consoleLines / 2));
      const mib = (bytesPerSecond: number) => bytesPerSecond / 2 ** 20;
      add(
        'stage: VMM virtio-console alone (flood guest → this process)',
        'MiB/s',
        mib(await vmmStage(stageLines, 'virtio')),
      );
      const uartLines = uartLinesFor(stageLines);
      add(
        'stage: VMM UART alone, for comparison (flood guest → this process)',
        'MiB/s',
        mib(await vmmStage(uartLines, 'uart')),
      );
      add(
        'stage: engine console WebSocket (flood VM → virtio-console → engine → this process)',
        'MiB/s',
        mib(await engineStage(smol, floodSmolfile, stageLines)),
      );
    }
    // At scale: a real episode of 89 snapshots and 23 VMs, its own browser context per run (the list stage's page
    // counts only the seeded episodes).
    const scaleDir = path.join(home, 'scale');
    mkdirSync(scaleDir);
    const scale = await makeScaleEpisode(smol, scaleDir, echo, progress);
    for (let run = 0; run < WARMUP_RUNS + options.runs; run++) {
      const counted = run >= WARMUP_RUNS;
      const label = counted ? `run ${run + 1 - WARMUP_RUNS}/${options.runs}` : 'warm-up';
      const context = await browser.newContext({ viewport, colorScheme: 'dark' });
      const page: Page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      try {
        const at = await scaleInPage(smol, page, listener.url, scale);
        progress(
          `${label}: scale: open ${at.openMs.toFixed(0)} ms, pan ${at.fps.toFixed(1)} fps over ${at.seconds.toFixed(1)} s ` +
            `with ${at.arrived} automatic checkpoints arriving (longest frame ${at.longestFrameMs.toFixed(0)} ms); ` +
            `${at.quiet.fps.toFixed(1)} fps with none arriving`,
        );
        if (errors.length) throw new Error(`the page threw: ${errors.join('; ')}`);
        if (!counted) continue;
        const what = `${SCALE_SNAPSHOTS}-snapshot, ${SCALE_VMS}-VM episode`;
        add(`open the ${what}: click → tree drawn`, 'ms', at.openMs);
        add(`${what}: tree pan while automatic checkpoints arrive, frames per second`, 'fps', at.fps);
        add(`${what}: tree pan, longest frame`, 'ms', at.longestFrameMs);
        add(`${what}: tree pan with its VMs paused (none arriving), frames per second`, 'fps', at.quiet.fps);
        add(`${what}: automatic checkpoints that arrived during the pan`, 'snapshots', at.arrived);
      } finally {
        await context.close();
      }
    }
    host.loadAverage.end = os.loadavg();
    notes.push(
      `scale: ${SCALE_VMS} echo VMs, each checkpointing itself every ${AUTO_EVERY_S} s while the tree is panned; ` +
        '50 fps is the goal (issue 23)',
      'a VM’s console rate is bounded by how fast its vCPU runs (under PVM, software KVM, a tiny guest runs about a ' +
        'thousand times slower than on hardware): compare the VMM stage with the others',
      'frames per second are Chromium’s requestAnimationFrame callbacks during the drag (headless, no GPU)',
    );
    return {
      name: 'ui',
      runs: options.runs,
      warmup: WARMUP_RUNS,
      inputs: {
        episodes: seeded.episodes,
        snapshots: seeded.snapshots,
        consoleLines: options.consoleLines,
        lineBytes: LINE_BYTES,
        chromium: options.chromium,
        viewport: `${viewport.width}x${viewport.height}`,
        scale: { snapshots: scale.snapshots, vms: scale.vmIds.length, autoCheckpointEverySeconds: AUTO_EVERY_S },
      },
      results: [...samples].map(([name, { unit, values }]) => metric(name, unit, values)),
      host,
      notes,
    };
  } finally {
    await browser.close();
    await smol.api.call('shutdown').catch(() => undefined);
    smol.api.close();
    for (let i = 0; i < 300 && pidAlive(pid); i++) await new Promise((resolve) => setTimeout(resolve, 100));
    rmSync(home, { recursive: true, force: true });
  }
}

export function formatUiBenchResult(result: UiBenchResult): string {
  const { kvm, inLab, cpus, cpuModel, loadAverage } = result.host;
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
  const { scale } = result.inputs;
  const width = Math.max('metric'.length, ...result.results.map((r) => r.metric.length));
  const lines = [
    `ui: ${result.runs} runs after ${result.warmup} warm-up; ${result.inputs.episodes} episodes, a ` +
      `${result.inputs.snapshots}-snapshot tree, ${result.inputs.consoleLines} console lines of ` +
      `${result.inputs.lineBytes} bytes; at scale ${scale.snapshots} snapshots and ${scale.vms} VMs checkpointing ` +
      `every ${scale.autoCheckpointEverySeconds} s`,
    `host: ${cpus} × ${cpuModel}, KVM ${kvm.implementation}${inLab ? ', in the lab' : ''}; load average ` +
      `(1, 5, 15 min) ${load(loadAverage.start)} at the start, ${load(loadAverage.end)} at the end`,
    `${'metric'.padEnd(width)}  ${'p50'.padStart(9)}  ${'p90'.padStart(9)}  unit`,
    ...result.results.map((r) => {
      const digits = r.unit === 'MiB/s' ? 2 : 1;
      return `${r.metric.padEnd(width)}  ${r.p50.toFixed(digits).padStart(9)}  ${r.p90.toFixed(digits).padStart(9)}  ${r.unit}`;
    }),
    'samples:',
    ...result.results.map((r) => `  ${r.metric}: ${r.samples.join(', ')}`),
    ...result.notes.map((note) => `note: ${note}`),
  ];
  return lines.join('\n') + '\n';
}
