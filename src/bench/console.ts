// Benchmark `console`: how fast a VM's console output crosses each stage without a browser, so it runs anywhere
// (here, or inside the KVM lab, where the guest's vCPU is much faster than under PVM). The flood guest
// (native/guests/flood.c) prints numbered 64-byte lines:
//   - the VMM alone: through the virtio-console, and through COM1 for comparison, read by this process;
//   - the engine: a flood episode's console WebSocket (virtio-console → vmhost → engine → WebSocket), read by this
//     process, every line checked.
// `smol bench ui` uses the same stages next to the page's. README, "Benchmarks"; docs/ui.md, "Performance".
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Smol } from '../../sdk/typescript/smol.js';
import { tinyGuestDir } from '../smol-dirs.js';
import { Vm } from '../vmm/vm.js';
import { median, p90 } from './stats.js';
import { withThrowawayEngine } from './throwaway-engine.js';
import { benchHost, withTimeout, type BenchHost } from './vm-create.js';

export const LINE_BYTES = 64;
const FLOOD = path.join(tinyGuestDir, 'flood.elf');

/** The flood guest's line `n` (native/guests/flood.c): ten digits, a space, letters that depend on n, CR LF. */
export function floodLine(n: number, width = LINE_BYTES): string {
  let letters = '';
  for (let i = 11; i < width - 2; i++) letters += String.fromCharCode(97 + ((n + i) % 26));
  return `${String(n).padStart(10, '0')} ${letters}\r\n`;
}

/** How many of `lines` flood lines `text` holds whole and in order from its first line on. */
export function floodLinesInOrder(text: string, lines: number): number {
  let at = text.indexOf(floodLine(1));
  if (at < 0) return 0;
  let n = 1;
  for (; n <= lines && text.startsWith(floodLine(n), at); n++) at += LINE_BYTES;
  return n - 1;
}

/** A Smolfile for the flood guest in `dir`: `console=hvc0`, so the engine gives its VM a virtio-console. */
export function writeFloodSmolfile(dir: string, lines: number): string {
  const file = path.join(dir, 'flood.smolfile');
  writeFileSync(
    file,
    `# The flood guest for smol bench ui and console\nkernel = "${FLOOD}"\ncmdline = "lines=${lines} console=hvc0"\n` +
      `cpus = 1\nmemory = 16\n`,
  );
  return file;
}

/**
 * Bytes per second from the VMM alone: the flood guest on a Vm, its console read in this process, through the
 * virtio-console (as the engine's flood episode) or through COM1. Timed from the key that starts the flood to the
 * guest's "done" after its last line; a missing or garbled line fails the run.
 */
export async function vmmStage(lines: number, through: 'virtio' | 'uart'): Promise<number> {
  const virtio = through === 'virtio';
  const vm = await Vm.create({
    kernel: FLOOD,
    cmdline: `lines=${lines}${virtio ? ' console=hvc0' : ''}`,
    memoryMiB: 16,
    virtioConsole: virtio,
  });
  try {
    const chunks: Buffer[] = [];
    const collect = collector(chunks);
    let greeting = '';
    let start = 0;
    const done = new Promise<number>((resolve) => {
      vm.on('console', (chunk: Buffer) => {
        if (start === 0) {
          greeting += chunk.toString('latin1');
          if (greeting.includes('type a key')) {
            start = performance.now();
            vm.write('x');
          }
          return;
        }
        if (collect(chunk)) resolve(performance.now());
      });
    });
    vm.start();
    const end = await withTimeout(done, 600_000, 'the flood guest did not finish within 10 minutes');
    checkLines(Buffer.concat(chunks).toString('latin1'), lines, `the VMM stage (${through})`);
    return (lines * LINE_BYTES) / ((end - start) / 1000);
  } finally {
    await vm.kill();
    await vm.exited;
  }
}

/**
 * Bytes per second through the engine: a flood episode's console WebSocket read by this process, timed from the key
 * that starts the flood to the guest's "done" after its last line; a missing or garbled line fails the run.
 */
export async function engineStage(smol: Smol, smolfile: string, lines: number): Promise<number> {
  const { episode, vm } = await smol.up(smolfile);
  try {
    await smol.waitForOutput(vm.id, /type a key/, 60_000);
    const chunks: Buffer[] = [];
    const collect = collector(chunks);
    let start = 0;
    const done = new Promise<number>((resolve, reject) => {
      const stream = smol.console(vm.id, {
        onData: (data) => {
          if (start === 0 || !collect(data)) return;
          stream.close();
          resolve(performance.now());
        },
        onClose: (why) => reject(new Error(`the console closed: ${why}`)),
      });
      setTimeout(() => {
        start = performance.now();
        stream.write('x');
      }, 300);
    });
    const end = await withTimeout(done, 600_000, 'the flood did not come through the engine within 10 minutes');
    checkLines(Buffer.concat(chunks).toString('latin1'), lines, 'the engine stage');
    return (lines * LINE_BYTES) / ((end - start) / 1000);
  } finally {
    await smol.api
      .call('deleteEpisode', { params: { episode: episode.id }, query: { force: 'true' } })
      .catch(() => undefined);
  }
}

const DONE = Buffer.from('flood: done ');

/**
 * Keeps each chunk in `chunks` and says whether the guest has said it is done (after its last line), whatever
 * chunks the words came in (the UART's arrive a byte or a few at a time).
 */
function collector(chunks: Buffer[]): (chunk: Buffer) => boolean {
  let tail = Buffer.alloc(0);
  return (chunk) => {
    chunks.push(chunk);
    tail = Buffer.concat([tail, chunk]);
    const found = tail.includes(DONE);
    tail = tail.subarray(-DONE.length);
    return found;
  };
}

function checkLines(text: string, lines: number, stage: string): void {
  const whole = floodLinesInOrder(text, lines);
  if (whole !== lines) {
    throw new Error(`${stage}: ${lines - whole} of ${lines} flood lines missing or garbled (from line ${whole + 1})`);
  }
}

export interface ConsoleBenchMetric {
  metric: string;
  unit: 'MiB/s';
  p50: number;
  p90: number;
  samples: number[];
}

export interface ConsoleBenchResult {
  name: 'console';
  runs: number;
  inputs: { lines: number; uartLines: number; lineBytes: number };
  results: ConsoleBenchMetric[];
  host: BenchHost;
}

/** For COM1 a 25th of the lines, 200 to 1,000: a VM exit per byte makes it hundreds to thousands of times slower. */
export const uartLinesFor = (lines: number) => Math.min(1000, Math.max(200, Math.floor(lines / 25)));

export async function benchConsole(options: {
  runs: number;
  lines: number;
  progress: (line: string) => void;
}): Promise<ConsoleBenchResult> {
  const { runs, lines, progress } = options;
  const uartLines = uartLinesFor(lines);
  const samples = { virtio: [] as number[], uart: [] as number[], engine: [] as number[] };
  const mib = (bytesPerSecond: number) => bytesPerSecond / 2 ** 20;
  await withThrowawayEngine('console', async (smol, home) => {
    const smolfile = writeFloodSmolfile(home, lines);
    for (let run = 0; run <= runs; run++) {
      const label = run === 0 ? 'warm-up' : `run ${run}/${runs}`;
      progress(`${label}: the VMM through the virtio-console, ${lines} lines`);
      const virtio = mib(await vmmStage(lines, 'virtio'));
      progress(`${label}: the VMM through COM1, ${uartLines} lines`);
      const uart = mib(await vmmStage(uartLines, 'uart'));
      progress(`${label}: the engine's console WebSocket, ${lines} lines`);
      const engine = mib(await engineStage(smol, smolfile, lines));
      progress(
        `${label}: VMM virtio-console ${virtio.toFixed(2)} MiB/s, COM1 ${(uart * 1024).toFixed(1)} KiB/s, ` +
          `engine WebSocket ${engine.toFixed(2)} MiB/s`,
      );
      if (run === 0) continue;
      samples.virtio.push(virtio);
      samples.uart.push(uart);
      samples.engine.push(engine);
    }
  });
  const round = (x: number) => Math.round(x * 1000) / 1000;
  const metric = (name: string, values: number[]): ConsoleBenchMetric => ({
    metric: name,
    unit: 'MiB/s',
    p50: round(median(values)),
    p90: round(p90(values)),
    samples: values.map(round),
  });
  return {
    name: 'console',
    runs,
    inputs: { lines, uartLines, lineBytes: LINE_BYTES },
    results: [
      metric('VMM: flood guest → virtio-console → this process', samples.virtio),
      metric('VMM: flood guest → COM1 → this process (for comparison)', samples.uart),
      metric('engine: flood episode → virtio-console → engine → console WebSocket', samples.engine),
    ],
    host: benchHost(),
  };
}

export function formatConsoleBenchResult(result: ConsoleBenchResult): string {
  const { kvm, inLab } = result.host;
  const width = Math.max(...result.results.map((r) => r.metric.length));
  return (
    [
      `console: ${result.runs} runs after 1 warm-up; ${result.inputs.lines} lines of ${result.inputs.lineBytes} bytes ` +
        `(${result.inputs.uartLines} through COM1) (KVM ${kvm.implementation}${inLab ? ', in the lab' : ''})`,
      `${'metric'.padEnd(width)}  ${'p50'.padStart(9)}  ${'p90'.padStart(9)}  unit`,
      ...result.results.map(
        (r) => `${r.metric.padEnd(width)}  ${r.p50.toFixed(3).padStart(9)}  ${r.p90.toFixed(3).padStart(9)}  ${r.unit}`,
      ),
      'note: a VM’s console rate is bounded by how fast its vCPU runs: under PVM (software KVM) a tiny guest runs ' +
        'about a thousand times slower than on hardware; compare the stages',
    ].join('\n') + '\n'
  );
}
