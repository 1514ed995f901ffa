// Benchmarks `snapshot`, `restore`, `fork` and `fanout` with tiny guests (docs/snapshots.md): how long the vCPUs
// stop for a checkpoint, how soon a restored or forked VM runs guest code, and what 64 idle forks cost the host.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Vm, type VmTrace } from '../vmm/vm.js';
import { median } from './stats.js';
import { traceBreakdown, type TraceBreakdown } from './trace.js';
import { benchHost, summarize, withTimeout, type BenchMetric, type BenchResult } from './vm-create.js';

export const PAGE_BYTES = 4096;
/** The dirty guest writes this many MiB (one word per page) each time it reads a `d`. */
export const DIRTY_MIB = 10;
const RUN_TIMEOUT_MS = 60_000;
const WARMUP_RUNS = 2;
/** How long the forks of `fanout` idle before host memory is read. */
const IDLE_MS = 1000;

/** One metric with the inputs it was measured with, and what else was measured alongside (bytes, counts). */
export interface SnapshotMetric extends BenchMetric {
  inputs: Record<string, string | number>;
  /** The issue's target for the median, when it has one; `met` says whether this run met it. */
  target?: { p50_ms: number; met: boolean };
  values?: Record<string, number | string>;
  /** With --trace: the operation's steps (docs/snapshots.md, "Where the time goes"). */
  trace?: TraceBreakdown;
}

export interface SnapshotBenchResult extends BenchResult {
  results: SnapshotMetric[];
  /** What the figures do not show by themselves (a limit of the tiny guests, a target missed). */
  notes: string[];
}

export interface SnapshotBenchOptions {
  runs: number;
  memoryMiB: number[];
  guestDir: string;
  /** fanout: how many forks in one call. */
  forks?: number;
  /** Read each VM's trace (Vm.trace()) and add a step breakdown to the metrics. */
  trace?: boolean;
  progress?: (line: string) => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function metric(
  name: string,
  samples: number[],
  inputs: SnapshotMetric['inputs'],
  extra: { targetMs?: number; values?: SnapshotMetric['values']; trace?: TraceBreakdown } = {},
): SnapshotMetric {
  const m: SnapshotMetric = { ...summarize(name, samples), inputs };
  if (extra.targetMs !== undefined) m.target = { p50_ms: extra.targetMs, met: m.p50_ms <= extra.targetMs };
  if (extra.values) m.values = extra.values;
  if (extra.trace) m.trace = extra.trace;
  return m;
}

/** `MemAvailable` of /proc/meminfo in bytes. */
export function memAvailableBytes(meminfo = readFileSync('/proc/meminfo', 'utf8')): number {
  const kib = /^MemAvailable:\s+(\d+) kB$/m.exec(meminfo)?.[1];
  if (kib === undefined) throw new Error('no MemAvailable in /proc/meminfo');
  return Number(kib) * 1024;
}

/** Resolves with performance.now() at the VM's next console chunk; rejects if it ends first. */
function nextOutput(vm: Vm, what: string): Promise<number> {
  const seen = new Promise<number>((resolve, reject) => {
    vm.once('console', () => resolve(performance.now()));
    void vm.exited.then((exit) => reject(new Error(`${what} ended (${exit.reason}) before printing anything`)));
  });
  return withTimeout(seen, RUN_TIMEOUT_MS, `${what}: no console output within ${RUN_TIMEOUT_MS / 1000} s`);
}

/** Resolves once the VM's console output has included `text`. */
function outputIncludes(vm: Vm, text: string): Promise<number> {
  let seen = '';
  const found = new Promise<number>((resolve) => {
    const onChunk = (chunk: Buffer) => {
      seen = (seen + chunk.toString('latin1')).slice(-4096);
      if (!seen.includes(text)) return;
      vm.off('console', onChunk);
      resolve(performance.now());
    };
    vm.on('console', onChunk);
  });
  return withTimeout(found, RUN_TIMEOUT_MS, `no ${JSON.stringify(text)} on the console within 60 s`);
}

/** Kills the VM; a kill that does not finish is an error, not a hung benchmark. */
function stop(vm: Vm): Promise<void> {
  return withTimeout(vm.kill(), RUN_TIMEOUT_MS, 'the VM did not end within 60 s of kill()');
}

/** A running tiny guest that has printed once. */
async function runningGuest(guestDir: string, guest: string, memoryMiB: number, cmdline = ''): Promise<Vm> {
  const vm = await Vm.create({ kernel: path.join(guestDir, `${guest}.elf`), memoryMiB, cpus: 1, cmdline });
  const printed = nextOutput(vm, guest);
  vm.start();
  await printed;
  return vm;
}

/** Runs `run` warm-up times, then `runs` times, collecting what it returns. */
async function repeat<T>(runs: number, run: (i: number) => Promise<T>): Promise<T[]> {
  for (let i = 0; i < WARMUP_RUNS; i++) await run(-1 - i);
  const samples: T[] = [];
  for (let i = 0; i < runs; i++) samples.push(await run(i));
  return samples;
}

class Scratch {
  readonly dir = mkdtempSync(path.join(os.tmpdir(), 'smol-bench-'));
  #n = 0;
  next(): string {
    return path.join(this.dir, `snap-${++this.#n}`);
  }
  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

const ms = (x: number) => `${x.toFixed(2)} ms`;
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(2)} MiB`;

/** The echo guest answers a byte once its vCPU runs: the time to that answer is the time to a running guest. */
async function echoed(vm: Vm, start: () => void): Promise<number> {
  const answered = outputIncludes(vm, 'x');
  start();
  vm.write('x');
  return answered;
}

async function checkpointSizes(o: SnapshotBenchOptions, scratch: Scratch): Promise<SnapshotMetric[]> {
  const results: SnapshotMetric[] = [];
  const progress = o.progress ?? (() => {});
  const cmdline = `mib=${DIRTY_MIB}`;
  for (const memoryMiB of o.memoryMiB) {
    const inputs = { guest: 'dirty', cmdline, memoryMiB };
    // Full: the first checkpoint of a fresh VM.
    const full = await repeat(o.runs, async () => {
      const vm = await runningGuest(o.guestDir, 'dirty', memoryMiB, cmdline);
      try {
        return await vm.checkpoint(scratch.next());
      } finally {
        await stop(vm);
      }
    });
    progress(`${memoryMiB} MiB full: pause p50 ${ms(median(full.map((c) => c.pauseMs)))}`);
    results.push(
      metric(
        `${memoryMiB} MiB full: pause`,
        full.map((c) => c.pauseMs),
        inputs,
      ),
      metric(
        `${memoryMiB} MiB full: write`,
        full.map((c) => c.writeMs),
        inputs,
        { values: { bytesWritten_p50: median(full.map((c) => c.bytesWritten)) } },
      ),
    );
    // Diff: one VM checkpointed again and again, the guest writing DIRTY_MIB MiB in between.
    const vm = await runningGuest(o.guestDir, 'dirty', memoryMiB, cmdline);
    let diff;
    try {
      await vm.checkpoint(scratch.next());
      let round = 0;
      diff = await repeat(o.runs, async () => {
        const dirtied = outputIncludes(vm, `dirty=${++round}\n`);
        vm.write('d');
        await dirtied;
        return vm.checkpoint(scratch.next());
      });
    } finally {
      await stop(vm);
    }
    // With --trace: the steps of each diff checkpoint, pause and write together (the write's steps say "write:").
    const diffTrace = o.trace ? traceBreakdown(diff.map((c) => c.trace)) : undefined;
    const dirtied = median(diff.map((c) => c.dirtyPages)) * PAGE_BYTES;
    const values = { dirtiedBytes_p50: dirtied, diffLayersWritten: diff.filter((c) => c.kind === 'diff').length };
    const diffInputs = { ...inputs, dirtiedMiB: DIRTY_MIB };
    progress(`${memoryMiB} MiB diff (${mib(dirtied)} dirty): pause p50 ${ms(median(diff.map((c) => c.pauseMs)))}`);
    results.push(
      metric(
        `${memoryMiB} MiB diff ${DIRTY_MIB} MiB dirty: pause`,
        diff.map((c) => c.pauseMs),
        diffInputs,
        { targetMs: 10, values },
      ),
      metric(
        `${memoryMiB} MiB diff ${DIRTY_MIB} MiB dirty: write`,
        diff.map((c) => c.writeMs),
        diffInputs,
        { targetMs: 15, trace: diffTrace },
      ),
    );
  }
  return results;
}

async function restores(o: SnapshotBenchOptions, scratch: Scratch): Promise<SnapshotMetric[]> {
  const results: SnapshotMetric[] = [];
  for (const memoryMiB of o.memoryMiB) {
    const inputs = { guest: 'echo', memoryMiB };
    const parent = await runningGuest(o.guestDir, 'echo', memoryMiB);
    const { dir } = await parent.checkpoint(scratch.next()).finally(() => stop(parent));
    const samples = await repeat(o.runs, async () => {
      const start = performance.now();
      const vm = await withTimeout(Vm.restore(dir), RUN_TIMEOUT_MS, `Vm.restore(${dir}) did not resolve in 60 s`);
      const restored = performance.now();
      try {
        const answered = (await echoed(vm, () => vm.start())) - start;
        return { restored: restored - start, answered, trace: o.trace ? vm.trace() : undefined };
      } finally {
        await stop(vm);
      }
    });
    o.progress?.(`${memoryMiB} MiB restore-to-running p50 ${ms(median(samples.map((s) => s.answered)))}`);
    results.push(
      metric(
        `${memoryMiB} MiB restore to a running guest`,
        samples.map((s) => s.answered),
        inputs,
        { targetMs: 5 },
      ),
      metric(
        `${memoryMiB} MiB restore resolved`,
        samples.map((s) => s.restored),
        inputs,
        { trace: traced(samples, (s) => s.restored) },
      ),
    );
  }
  return results;
}

async function forks(o: SnapshotBenchOptions): Promise<SnapshotMetric[]> {
  const results: SnapshotMetric[] = [];
  for (const memoryMiB of o.memoryMiB) {
    const inputs = { guest: 'echo', memoryMiB, forksOfOneParent: o.runs + WARMUP_RUNS };
    const parent = await runningGuest(o.guestDir, 'echo', memoryMiB);
    let samples;
    try {
      samples = await repeat(o.runs, async () => {
        const start = performance.now();
        const [child] = await withTimeout(parent.fork(1), RUN_TIMEOUT_MS, 'fork(1) did not resolve in 60 s');
        const running = performance.now();
        try {
          const answered = (await echoed(child!, () => {})) - start;
          return { running: running - start, answered, trace: o.trace ? child!.trace() : undefined };
        } finally {
          await stop(child!);
        }
      });
    } finally {
      await stop(parent);
    }
    o.progress?.(`${memoryMiB} MiB fork-to-running p50 ${ms(median(samples.map((s) => s.answered)))}`);
    results.push(
      metric(
        `${memoryMiB} MiB fork to a running child`,
        samples.map((s) => s.answered),
        inputs,
        { targetMs: 5 },
      ),
      metric(
        `${memoryMiB} MiB fork resolved`,
        samples.map((s) => s.running),
        inputs,
        { trace: traced(samples, (s) => s.running) },
      ),
    );
  }
  return results;
}

async function fanout(o: SnapshotBenchOptions, notes: string[]): Promise<SnapshotMetric[]> {
  const results: SnapshotMetric[] = [];
  const count = o.forks ?? 64;
  for (const memoryMiB of o.memoryMiB) {
    const inputs = { guest: 'echo', memoryMiB, forks: count, idleMs: IDLE_MS };
    const samples = await repeat(o.runs, async () => {
      const parent = await runningGuest(o.guestDir, 'echo', memoryMiB);
      const children: Vm[] = [];
      try {
        await sleep(200);
        const before = memAvailableBytes();
        const start = performance.now();
        children.push(...(await withTimeout(parent.fork(count), RUN_TIMEOUT_MS, `fork(${count}) did not resolve`)));
        const running = performance.now() - start;
        // The echo guest idles in HLT: each child answers a byte written to it, which shows its vCPU runs.
        const echoed = children.map((child) => outputIncludes(child, 'x'));
        for (const child of children) child.write('x');
        const answered = Math.max(...(await Promise.all(echoed))) - start;
        await sleep(IDLE_MS);
        const after = memAvailableBytes();
        const stats = await Promise.all(children.map((child) => child.memoryStats()));
        const traces = o.trace ? children.map((child) => child.trace()) : undefined;
        const sum = (pick: (s: (typeof stats)[number]) => number) => stats.reduce((a, s) => a + pick(s), 0);
        return {
          running,
          answered,
          hostPerFork: (before - after) / count,
          privatePerFork: sum((s) => s.privateBytes) / count,
          residentPerFork: sum((s) => s.residentBytes) / count,
          traces,
        };
      } finally {
        await Promise.all([...children, parent].map(stop));
      }
    });
    const values = {
      memAvailableDropPerFork_p50: Math.round(median(samples.map((s) => s.hostPerFork))),
      privateBytesPerFork_p50: Math.round(median(samples.map((s) => s.privatePerFork))),
      residentBytesPerFork_p50: Math.round(median(samples.map((s) => s.residentPerFork))),
    };
    o.progress?.(`${memoryMiB} MiB fork(${count}) p50 ${ms(median(samples.map((s) => s.running)))}`);
    results.push(
      metric(
        `${memoryMiB} MiB fork(${count}) resolved`,
        samples.map((s) => s.running),
        inputs,
        // Every child of every run: the steps of one child, and the wait for its elder siblings.
        { targetMs: 300, values, trace: o.trace ? traceBreakdown(samples.flatMap((s) => s.traces!)) : undefined },
      ),
      metric(
        `${memoryMiB} MiB fork(${count}) all echoed`,
        samples.map((s) => s.answered),
        inputs,
      ),
    );
    const perFork = values.memAvailableDropPerFork_p50;
    notes.push(
      `${memoryMiB} MiB: host memory per idle fork ${mib(perFork)} (MemAvailable drop / ${count}), ` +
        `private guest RAM ${mib(values.privateBytesPerFork_p50)}, resident ${mib(values.residentBytesPerFork_p50)}; ` +
        `target under 1 MiB: ${perFork < 2 ** 20 ? 'met' : 'missed'}.`,
    );
  }
  return results;
}

/** The breakdown of the samples' traces (when they were read), against the metric's own times. */
function traced<T extends { trace?: VmTrace | undefined }>(
  samples: T[],
  ms: (s: T) => number,
): TraceBreakdown | undefined {
  if (!samples.every((s) => s.trace)) return undefined;
  return traceBreakdown(
    samples.map((s) => s.trace!),
    samples.map(ms),
  );
}

export type TinySnapshotBench = 'snapshot' | 'restore' | 'fork' | 'fanout';

export async function benchSnapshot(name: TinySnapshotBench, o: SnapshotBenchOptions): Promise<SnapshotBenchResult> {
  const host = benchHost();
  const scratch = new Scratch();
  const notes: string[] = [];
  let results: SnapshotMetric[];
  try {
    if (name === 'snapshot') results = await checkpointSizes(o, scratch);
    else if (name === 'restore') results = await restores(o, scratch);
    else if (name === 'fork') results = await forks(o);
    else results = await fanout(o, notes);
  } finally {
    scratch.remove();
  }
  for (const m of results) {
    if (m.target && !m.target.met)
      notes.push(`${m.metric}: p50 ${ms(m.p50_ms)} misses the target ≤ ${ms(m.target.p50_ms)}.`);
  }
  const guest = name === 'snapshot' ? 'dirty' : 'echo';
  return {
    name,
    runs: o.runs,
    warmup: WARMUP_RUNS,
    guest: `${path.join(o.guestDir, `${guest}.elf`)} (1 vCPU, ${o.memoryMiB.join(' and ')} MiB)`,
    results,
    notes,
    host,
  };
}
