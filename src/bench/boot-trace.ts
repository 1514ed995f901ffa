// `smol bench boot --trace`: where a Linux boot's time goes, on our VMM and on QEMU microvm side by side. Extra boots
// (after the timed ones, interleaved the same way) with the kernel's initcall_debug and printk.time; once the guest's
// shell is up, its kernel log is read back through the serial console, so the boot itself prints nothing more than an
// untraced one (`quiet` keeps the debug lines out of the console: each console byte is a VM exit).
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { Vm } from '../vmm/vm.js';
import { qemuMicrovmArgs, READY_MARKER, type BootBenchOptions } from './boot.js';
import { serialShell, type SerialShell } from './serial-shell.js';
import { median } from './stats.js';

/** Added to the command line of a traced boot: per-initcall times, timestamps, room in the log for both. */
export const TRACE_CMDLINE = 'initcall_debug printk.time=1 log_buf_len=1M';
const TRACE_TIMEOUT_MS = 180_000;
const SLOWEST = 15;

export interface Initcall {
  /** The function, without its +offset/size. */
  fn: string;
  /** Microseconds it took, by the kernel's clock. */
  us: number;
  /** Kernel seconds when it returned. */
  at: number;
}

export interface KernelLog {
  initcalls: Initcall[];
  /** Kernel seconds at "Run /init as init process", when the kernel hands over to user space. */
  runInitAt?: number;
}

const LINE = /^\[\s*(\d+\.\d+)\] (.*)$/;
const INITCALL = /^initcall (\S+?)(?:\+0x[0-9a-f]+\/0x[0-9a-f]+)?(?: \[\S+\])? returned -?\d+ after (\d+) usecs/;
const RUN_INIT = /^Run \S+ as init process/;

/** The initcall and hand-over lines of a `printk.time=1 initcall_debug` kernel log (dmesg's output). */
export function parseKernelLog(text: string): KernelLog {
  const log: KernelLog = { initcalls: [] };
  for (const raw of text.split('\n')) {
    const line = LINE.exec(raw.replace(/\r$/, ''));
    if (!line) continue;
    const at = Number(line[1]);
    const initcall = INITCALL.exec(line[2]!);
    if (initcall) log.initcalls.push({ fn: initcall[1]!, us: Number(initcall[2]), at });
    else if (RUN_INIT.test(line[2]!)) log.runInitAt ??= at;
  }
  return log;
}

/** One traced boot: host ms to the first console byte and to the ready line, the kernel clock of the first line. */
export interface TraceSample {
  firstByte: number;
  ready: number;
  /** Kernel seconds printed on the first console line, when it has a timestamp. */
  firstLineAt?: number;
  /** That line's text (the first message `quiet` lets through). */
  firstLine?: string;
  log: KernelLog;
}

/** The phases of one traced boot, in ms; undefined where the boot's log did not have what a phase needs. */
export function bootPhases(sample: TraceSample): Record<string, number | undefined> {
  const { log, firstLineAt, firstByte, ready } = sample;
  const first = log.initcalls[0];
  const initcallsFrom = first && (first.at - first.us / 1e6) * 1000;
  const runInit = log.runInitAt === undefined ? undefined : log.runInitAt * 1000;
  // Host time = kernel time + offset, from the first console line (printed as soon as it is logged).
  const offset = firstLineAt === undefined ? undefined : firstByte - firstLineAt * 1000;
  const minus = (a?: number, b?: number) => (a === undefined || b === undefined ? undefined : a - b);
  const runInitOnHost = offset === undefined || runInit === undefined ? undefined : runInit + offset;
  return {
    'start to kernel clock 0 (VMM, entry; est.)': offset,
    'kernel: clock 0 to first initcall': initcallsFrom,
    'kernel: first initcall to /init': minus(runInit, initcallsFrom),
    '  time inside initcalls (sum)': log.initcalls.reduce((sum, call) => sum + call.us, 0) / 1000,
    '/init to ready line (est.)': minus(ready, runInitOnHost),
    'first console byte': firstByte,
    'create/spawn to ready (traced boot)': ready,
  };
}

export interface BootTrace {
  cmdline: string;
  boots: number;
  /** Median ms of each phase over the traced boots; null where no boot had it. */
  phases: Array<{ phase: string; ours: number | null; qemu: number | null }>;
  /** The slowest initcalls on either side: median µs over the boots, null where that side never ran it. */
  slowest: Array<{ fn: string; ours: number | null; qemu: number | null }>;
  initcalls: { ours: number; qemu: number };
  /** The first console line of each side's first traced boot (its timestamp places kernel time on the host's). */
  firstLine: { ours: string | null; qemu: string | null };
  /** Each traced boot's phases (the logs themselves are left out: a few hundred initcalls each). */
  samples: { ours: Array<Record<string, number | undefined>>; qemu: Array<Record<string, number | undefined>> };
}

/** Follows a traced boot's console: first byte, first line's kernel time, ready, and the shell after it. */
function tracedConsole(start: number, write: (text: string) => void, ended: Promise<never>, what: string) {
  const shell: SerialShell = serialShell(write, ended, what, TRACE_TIMEOUT_MS);
  let firstByte: number | undefined;
  let readyAt: number | undefined;
  let head = '';
  let tail = '';
  const feed = (chunk: Buffer) => {
    const now = performance.now();
    firstByte ??= now - start;
    if (head.length < 200) head += chunk.toString('latin1');
    tail = (tail + chunk.toString('latin1')).slice(-(READY_MARKER.length + chunk.length));
    if (readyAt === undefined && tail.includes(READY_MARKER)) readyAt = now - start;
    shell.feed(chunk);
  };
  const measure = async (): Promise<TraceSample> => {
    // The prompt after the ready line: typed input before the shell opened the console would be lost.
    await shell.waitFor(new RegExp(`${READY_MARKER}[\\s\\S]*# `), 0);
    const dmesg = await shell.run("dmesg | grep -e ' returned ' -e ' as init process'");
    const firstLine = LINE.exec(head.split('\n')[0]!.replace(/\r$/, ''));
    return {
      firstByte: firstByte!,
      ready: readyAt!,
      ...(firstLine && { firstLineAt: Number(firstLine[1]), firstLine: firstLine[2]! }),
      log: parseKernelLog(dmesg),
    };
  };
  return { feed, measure };
}

async function traceOurs(options: BootBenchOptions, cmdline: string): Promise<TraceSample> {
  const start = performance.now();
  const { kernel, initramfs: initrd, memoryMiB, cpus } = options;
  const vm = await Vm.create({ kernel, initrd, cmdline, memoryMiB, cpus });
  const ended = vm.exited.then((exit) => {
    throw new Error(`our VMM's traced guest ended (${exit.reason}${exit.message ? `: ${exit.message}` : ''})`);
  });
  ended.catch(() => {});
  const console = tracedConsole(start, (text) => vm.write(text), ended, 'our VMM (traced)');
  vm.on('console', console.feed);
  try {
    vm.start();
    return await console.measure();
  } finally {
    await vm.kill();
  }
}

async function traceQemu(options: BootBenchOptions, cmdline: string): Promise<TraceSample> {
  const start = performance.now();
  const child = spawn(options.qemu, qemuMicrovmArgs({ ...options, cmdline }), { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const ended = new Promise<never>((_, reject) => {
    child.on('error', (e) => reject(new Error(`cannot run ${options.qemu}: ${e.message}`)));
    void closed.then(() => reject(new Error(`QEMU (traced) ended: ${stderr.trim() || 'no message'}`)));
  });
  ended.catch(() => {});
  const console = tracedConsole(start, (text) => child.stdin.write(text), ended, 'QEMU (traced)');
  child.stdout.on('data', console.feed);
  try {
    return await console.measure();
  } finally {
    child.kill('SIGKILL');
    await closed;
  }
}

const round = (x: number) => Math.round(x * 1000) / 1000;

const rounded = (phases: Record<string, number | undefined>) =>
  Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, v === undefined ? undefined : round(v)]));

function medianOf(values: Array<number | undefined>): number | null {
  const known = values.filter((v): v is number => v !== undefined);
  return known.length === 0 ? null : round(median(known));
}

/** Medians of each initcall's µs over the boots that ran it. */
function initcallMedians(samples: TraceSample[]): Map<string, number> {
  const byFn = new Map<string, number[]>();
  for (const sample of samples) {
    for (const call of sample.log.initcalls) byFn.set(call.fn, [...(byFn.get(call.fn) ?? []), call.us]);
  }
  return new Map([...byFn].map(([fn, us]) => [fn, median(us)]));
}

export function summarizeTrace(cmdline: string, ours: TraceSample[], qemu: TraceSample[]): BootTrace {
  const [oursPhases, qemuPhases] = [ours.map(bootPhases), qemu.map(bootPhases)];
  const phases = Object.keys(oursPhases[0] ?? qemuPhases[0] ?? {}).map((phase) => ({
    phase,
    ours: medianOf(oursPhases.map((p) => p[phase])),
    qemu: medianOf(qemuPhases.map((p) => p[phase])),
  }));
  const [a, b] = [initcallMedians(ours), initcallMedians(qemu)];
  const slowest = [...new Set([...a.keys(), ...b.keys()])]
    .map((fn) => ({ fn, ours: a.has(fn) ? round(a.get(fn)!) : null, qemu: b.has(fn) ? round(b.get(fn)!) : null }))
    .sort((x, y) => Math.max(y.ours ?? 0, y.qemu ?? 0) - Math.max(x.ours ?? 0, x.qemu ?? 0))
    .slice(0, SLOWEST);
  const count = (samples: TraceSample[]) => Math.round(median(samples.map((s) => s.log.initcalls.length)));
  return {
    cmdline,
    boots: ours.length,
    phases,
    slowest,
    initcalls: { ours: count(ours), qemu: count(qemu) },
    firstLine: { ours: ours[0]?.firstLine ?? null, qemu: qemu[0]?.firstLine ?? null },
    samples: { ours: oursPhases.map(rounded), qemu: qemuPhases.map(rounded) },
  };
}

/** `runs` traced boots of each, interleaved; the command line is the benchmark's with TRACE_CMDLINE added. */
export async function traceBoots(
  options: BootBenchOptions,
  runs: number,
  progress: (line: string) => void,
): Promise<BootTrace> {
  const cmdline = `${options.cmdline} ${TRACE_CMDLINE}`;
  const ours: TraceSample[] = [];
  const qemu: TraceSample[] = [];
  for (let i = 0; i < runs; i++) {
    ours.push(await traceOurs(options, cmdline));
    qemu.push(await traceQemu(options, cmdline));
    const [o, q] = [ours.at(-1)!, qemu.at(-1)!];
    if (o.log.initcalls.length === 0 || q.log.initcalls.length === 0) {
      throw new Error(`traced boot ${i + 1}: no initcall lines in the kernel log (is initcall_debug in this kernel?)`);
    }
    progress(`trace ${i + 1}/${runs}: ours ${o.ready.toFixed(0)} ms, qemu ${q.ready.toFixed(0)} ms`);
  }
  return summarizeTrace(cmdline, ours, qemu);
}

/** The breakdown as text: the phases side by side, then the slowest initcalls. */
export function formatBootTrace(trace: BootTrace): string[] {
  const cell = (x: number | null, digits: number) => (x === null ? '-' : x.toFixed(digits)).padStart(10);
  const width = Math.max(44, ...trace.slowest.map((s) => s.fn.length + 2));
  return [
    `trace: ${trace.boots} boots of each with "${TRACE_CMDLINE}" (medians)`,
    `${'phase (ms)'.padEnd(width)}  ${'ours'.padStart(10)}  ${'qemu'.padStart(10)}`,
    ...trace.phases.map((p) => `${p.phase.padEnd(width)}  ${cell(p.ours, 1)}  ${cell(p.qemu, 1)}`),
    `${`slowest initcalls (µs; ${trace.initcalls.ours} / ${trace.initcalls.qemu} run)`.padEnd(width)}`,
    ...trace.slowest.map((s) => `${`  ${s.fn}`.padEnd(width)}  ${cell(s.ours, 0)}  ${cell(s.qemu, 0)}`),
  ];
}
