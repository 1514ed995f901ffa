// Benchmark `boot`: a Linux guest from "make a VM" to the ready line its init prints, our VMM against QEMU microvm
// with the same kernel, initramfs, command line, memory and vCPUs, interleaved run by run in one process.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Vm } from '../vmm/vm.js';
import type { BootTrace } from './boot-trace.js';
import { benchHost, summarize, withTimeout, type BenchMetric, type BenchResult } from './vm-create.js';

/** What the base initramfs's /init prints once user space is up (resources/guest-initramfs/init). */
export const READY_MARKER = 'smol-guest: ready';
const RUN_TIMEOUT_MS = 120_000;
const WARMUP_RUNS = 1;

export interface BootBenchOptions {
  runs: number;
  kernel: string;
  initramfs: string;
  cmdline: string;
  memoryMiB: number;
  cpus: number;
  /** QEMU's x86-64 system emulator. */
  qemu: string;
}

/** One boot: ms from the start to the first serial byte (the kernel is running) and to the ready marker. */
interface BootSample {
  firstByte: number;
  ready: number;
}

/** Watches console text for the first byte and the ready marker; `feed` takes output as it arrives. */
function bootWatcher(start: number) {
  let firstByte: number | undefined;
  let tail = '';
  let resolveReady!: (sample: BootSample) => void;
  const ready = new Promise<BootSample>((resolve) => (resolveReady = resolve));
  const feed = (chunk: Buffer) => {
    const now = performance.now();
    firstByte ??= now - start;
    tail = (tail + chunk.toString('latin1')).slice(-(READY_MARKER.length + chunk.length));
    if (tail.includes(READY_MARKER)) resolveReady({ firstByte, ready: now - start });
  };
  return { feed, ready };
}

/** Our VMM: Vm.create → start → marker, then kill. */
export async function bootOurs(options: BootBenchOptions): Promise<BootSample> {
  const start = performance.now();
  const { kernel, initramfs: initrd, cmdline, memoryMiB, cpus } = options;
  const vm = await Vm.create({ kernel, initrd, cmdline, memoryMiB, cpus });
  const watcher = bootWatcher(start);
  vm.on('console', watcher.feed);
  const ended = vm.exited.then((exit) => {
    throw new Error(
      `our VMM's guest ended (${exit.reason}${exit.message ? `: ${exit.message}` : ''}) before it was ready`,
    );
  });
  try {
    vm.start();
    return await withTimeout(Promise.race([watcher.ready, ended]), RUN_TIMEOUT_MS, `no "${READY_MARKER}" within 120 s`);
  } finally {
    await vm.kill();
  }
}

/** QEMU's arguments: microvm as its documentation recommends for fast boots (no option ROMs, PIT, PIC or RTC). */
export function qemuMicrovmArgs(options: BootBenchOptions): string[] {
  return [
    ...['-M', 'microvm,x-option-roms=off,pit=off,pic=off,rtc=off', '-accel', 'kvm', '-cpu', 'host'],
    ...['-smp', String(options.cpus), '-m', String(options.memoryMiB)],
    ...['-nodefaults', '-no-user-config', '-display', 'none', '-monitor', 'none', '-serial', 'stdio', '-no-reboot'],
    ...['-kernel', options.kernel, '-initrd', options.initramfs, '-append', options.cmdline],
  ];
}

/** QEMU microvm: spawn → marker on its serial (stdout), then SIGKILL. */
export async function bootQemu(options: BootBenchOptions): Promise<BootSample> {
  const start = performance.now();
  const child = spawn(options.qemu, qemuMicrovmArgs(options), { stdio: ['pipe', 'pipe', 'pipe'] });
  const watcher = bootWatcher(start);
  let stderr = '';
  child.stdout.on('data', watcher.feed);
  child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const ended = new Promise<never>((_, reject) => {
    child.on('error', (error) => reject(new Error(`cannot run ${options.qemu}: ${error.message}`)));
    void closed.then(() =>
      reject(new Error(`QEMU ended before the guest was ready: ${stderr.trim() || 'no message'}`)),
    );
  });
  try {
    return await withTimeout(
      Promise.race([watcher.ready, ended]),
      RUN_TIMEOUT_MS,
      `QEMU: no "${READY_MARKER}" in 120 s`,
    );
  } finally {
    child.kill('SIGKILL');
    await closed;
  }
}

export interface BootBenchResult extends BenchResult {
  /** Ours divided by QEMU's, for each quantile of create-to-ready: below 1 we are faster. */
  ratio: { p50: number; p90: number };
  qemu: { binary: string; args: string[] };
  cmdline: string;
  /** With --trace: the traced boots' breakdown (boot-trace.ts). */
  trace?: BootTrace;
  /**
   * The host's transparent huge page settings (/sys/kernel/mm/transparent_hugepage): QEMU's RAM is anonymous memory
   * (`enabled`), ours a memfd (`shmem_enabled`); each side gets 2 MiB pages only where its setting allows them.
   */
  hugePages: { anonymous: string; shmem: string } | null;
}

/** The selected value of a /sys/kernel/mm/transparent_hugepage setting ("always [madvise] never" → madvise). */
function hugePageSetting(file: string): string | undefined {
  try {
    return /\[(\S+)\]/.exec(readFileSync(`/sys/kernel/mm/transparent_hugepage/${file}`, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
}

export function hostHugePages(): BootBenchResult['hugePages'] {
  const [anonymous, shmem] = [hugePageSetting('enabled'), hugePageSetting('shmem_enabled')];
  return anonymous && shmem ? { anonymous, shmem } : null;
}

export async function benchBoot(
  options: BootBenchOptions,
  progress: (line: string) => void = () => {},
): Promise<BootBenchResult> {
  const host = benchHost();
  const ours: BootSample[] = [];
  const qemu: BootSample[] = [];
  const ms = (sample: BootSample) => `${sample.ready.toFixed(0)} ms`;
  for (let i = 0; i < WARMUP_RUNS; i++) {
    progress(`warm-up: ours ${ms(await bootOurs(options))}, qemu ${ms(await bootQemu(options))}`);
  }
  // Interleaved, so a slow phase of the machine hits both the same way.
  for (let i = 0; i < options.runs; i++) {
    ours.push(await bootOurs(options));
    qemu.push(await bootQemu(options));
    progress(`run ${i + 1}/${options.runs}: ours ${ms(ours.at(-1)!)}, qemu ${ms(qemu.at(-1)!)}`);
  }
  const results: BenchMetric[] = [
    summarize(
      'ours: create-to-ready',
      ours.map((s) => s.ready),
    ),
    summarize(
      'qemu-microvm: spawn-to-ready',
      qemu.map((s) => s.ready),
    ),
    summarize(
      'ours: create-to-first-byte',
      ours.map((s) => s.firstByte),
    ),
    summarize(
      'qemu-microvm: spawn-to-first-byte',
      qemu.map((s) => s.firstByte),
    ),
  ];
  const ratioOf = (pick: (m: BenchMetric) => number) =>
    Math.round((pick(results[0]!) / pick(results[1]!)) * 1000) / 1000;
  return {
    name: 'boot',
    runs: options.runs,
    warmup: WARMUP_RUNS,
    guest: `${options.kernel} + ${options.initramfs} (${options.cpus} vCPU, ${options.memoryMiB} MiB)`,
    cmdline: options.cmdline,
    results,
    ratio: { p50: ratioOf((m) => m.p50_ms), p90: ratioOf((m) => m.p90_ms) },
    qemu: { binary: options.qemu, args: qemuMicrovmArgs(options) },
    host,
    hugePages: hostHugePages(),
  };
}
