// Benchmark `vm-create`: how long from asking for a VM to its first serial byte, and a create+kill cycle.
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { loadNative } from '../vmm/native.js';
import { Vm, type VmTrace } from '../vmm/vm.js';
import { median, p90 } from './stats.js';
import { traceBreakdown, type TraceBreakdown } from './trace.js';

export interface BenchMetric {
  metric: string;
  p50_ms: number;
  p90_ms: number;
  samples_ms: number[];
  /** With --trace: the operation's steps (docs/snapshots.md, "Where the time goes"). */
  trace?: TraceBreakdown;
}

export interface BenchHost {
  kvm: { implementation: string; apiVersion: number | null };
  inLab: boolean;
  cpus: number;
  cpuModel: string;
  kernel: string;
  node: string;
  /** When the benchmark began (ISO 8601) and the host's load average then (1, 5, 15 min); older JSON has neither. */
  measuredAt?: string;
  loadAverageAtStart?: number[];
}

export interface BenchResult {
  name: string;
  runs: number;
  /** Runs done first and not counted (they pay for loading the module and warming caches). */
  warmup: number;
  guest: string;
  results: BenchMetric[];
  host: BenchHost;
}

const RUN_TIMEOUT_MS = 30_000;
const WARMUP_RUNS = 1;

export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function stopVm(vm: Vm): Promise<void> {
  const stopped = vm.kill().then(() => vm.exited);
  await withTimeout(stopped, RUN_TIMEOUT_MS, 'the VM did not report its exit within 30 s of kill()');
}

/** Create → start → first console byte, in ms; with `traces`, the VM's trace is added to it. */
async function timeToFirstByte(guest: string, traces?: VmTrace[]): Promise<number> {
  const start = performance.now();
  const vm = await Vm.create({ kernel: guest });
  try {
    const firstByte = new Promise<number>((resolve, reject) => {
      vm.once('console', () => resolve(performance.now()));
      void vm.exited.then((exit) => reject(new Error(`${guest} ended (${exit.reason}) before printing anything`)));
    });
    vm.start();
    const at = await withTimeout(firstByte, RUN_TIMEOUT_MS, `no serial output from ${guest} within 30 s`);
    traces?.push(vm.trace());
    return at - start;
  } finally {
    await stopVm(vm);
  }
}

/** Create → kill → exit reported, in ms; the VM never runs. */
async function createKillCycle(guest: string): Promise<number> {
  const start = performance.now();
  const vm = await Vm.create({ kernel: guest });
  await stopVm(vm);
  return performance.now() - start;
}

export function summarize(metric: string, samples: number[]): BenchMetric {
  const round = (ms: number) => Math.round(ms * 1000) / 1000;
  return { metric, p50_ms: round(median(samples)), p90_ms: round(p90(samples)), samples_ms: samples.map(round) };
}

/** The machine a benchmark ran on; throws when /dev/kvm is not usable. */
export function benchHost(): BenchHost {
  const probe = loadNative().kvmProbe();
  if (!probe.usable) throw new Error(`cannot benchmark VMs here: ${probe.error ?? '/dev/kvm is not usable'}`);
  return {
    kvm: { implementation: probe.implementation, apiVersion: probe.apiVersion ?? null },
    inLab: process.env.SMOL_IN_LAB === '1',
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    kernel: os.release(),
    node: process.version,
    measuredAt: new Date().toISOString(),
    loadAverageAtStart: os.loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

export async function benchVmCreate(options: { guest: string; runs: number; trace?: boolean }): Promise<BenchResult> {
  const host = benchHost();
  const traces: VmTrace[] = [];
  const metrics: { metric: string; run: (guest: string, traces?: VmTrace[]) => Promise<number>; traced: boolean }[] = [
    { metric: 'create-to-first-byte', run: timeToFirstByte, traced: options.trace === true },
    { metric: 'create-kill', run: createKillCycle, traced: false },
  ];
  const results: BenchMetric[] = [];
  for (const { metric, run, traced } of metrics) {
    for (let i = 0; i < WARMUP_RUNS; i++) await run(options.guest);
    const samples: number[] = [];
    for (let i = 0; i < options.runs; i++) samples.push(await run(options.guest, traced ? traces : undefined));
    const summary = summarize(metric, samples);
    if (traced) summary.trace = traceBreakdown(traces, samples);
    results.push(summary);
  }
  return { name: 'vm-create', runs: options.runs, warmup: WARMUP_RUNS, guest: options.guest, results, host };
}
