// Benchmark `disk`: sequential and random I/O on /dev/vda, timed inside the Linux guest, our virtio-blk (a fresh
// copy-on-write layer over a raw base image) against QEMU microvm's virtio-blk (the same image, `snapshot=on`: a
// fresh qcow2 overlay), one fresh VM of each per run, interleaved. O_DIRECT throughout, so the guest's page cache
// never answers a read.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Vm } from '../vmm/vm.js';
import { qemuMicrovmArgs, READY_MARKER, type BootBenchOptions } from './boot.js';
import { qemuShell, serialShell, type SerialShell } from './serial-shell.js';
import { pairedMetric, type PairedMetric } from './stats.js';
import { benchHost, type BenchHost } from './vm-create.js';

const DISK_MIB = 256;
/** Written then read from the start of the disk; the random I/O goes to the rest, so its reads come from the base. */
const SEQUENTIAL_MIB = 64;
const RANDOM_OPS = 400;
const BLOCK = 4096;
const TIMEOUT_MS = 300_000;
const WARMUP_RUNS = 1;

/** One run on one VMM: nanoseconds of guest time for each phase. */
interface DiskSample {
  seqWrite: number;
  seqRead: number;
  randRead: number;
  randWrite: number;
  /** The random loop with `dd` between /dev/zero and /dev/null: the cost of the loop and of starting dd. */
  loop: number;
}

export type DiskMetric = PairedMetric<'MiB/s' | 'IOPS' | 'ms/op'>;

export interface DiskBenchResult {
  name: 'disk';
  runs: number;
  warmup: number;
  guest: string;
  disk: { sizeMiB: number; sequentialMiB: number; randomOps: number; blockBytes: number };
  results: DiskMetric[];
  qemu: { binary: string; args: string[] };
  notes: string[];
  host: BenchHost;
}

/** The guest's monotonic clock in ns into $T, with shell builtins only (busybox's date has no %N, its dd no timing). */
const CLOCK = 'ns() { while read -r a b c d; do if [ "$a" = now ]; then T=$c; return; fi; done < /proc/timer_list; }';

/** A shell command that prints `R <ns>`, the guest time `body` took (and FAIL if a dd failed). */
const timed = (body: string) => `ns; s=$T; ${body}; ns; echo "R $((T-s))"`;

/** `body` once per pseudo-random 4 KiB block $b past the sequential area (an LCG, the same for both VMMs). */
function randomLoop(seed: number, body: string): string {
  const low = (SEQUENTIAL_MIB * 2 ** 20) / BLOCK;
  const span = (DISK_MIB * 2 ** 20) / BLOCK - low;
  return timed(
    `x=${seed}; i=0; while [ $i -lt ${RANDOM_OPS} ]; do x=$(( (x*1103515245+12345) % 2147483648 )); ` +
      `b=$(( ${low} + x % ${span} )); ${body} 2>/dev/null || echo FAIL; i=$((i+1)); done`,
  );
}

const PHASES: Array<[keyof DiskSample, string]> = [
  [
    'seqWrite',
    timed(`dd if=/dev/zero of=/dev/vda bs=1M count=${SEQUENTIAL_MIB} oflag=direct conv=fsync 2>/dev/null || echo FAIL`),
  ],
  ['seqRead', timed(`dd if=/dev/vda of=/dev/null bs=1M count=${SEQUENTIAL_MIB} iflag=direct 2>/dev/null || echo FAIL`)],
  ['randRead', randomLoop(1, `dd if=/dev/vda of=/dev/null bs=${BLOCK} count=1 skip=$b iflag=direct`)],
  ['randWrite', randomLoop(2, `dd if=/dev/zero of=/dev/vda bs=${BLOCK} count=1 seek=$b oflag=direct`)],
  ['loop', randomLoop(3, `dd if=/dev/zero of=/dev/null bs=${BLOCK} count=1`)],
];

/** Waits for the shell, then runs every phase; guest nanoseconds per phase. */
async function measure(shell: SerialShell, what: string): Promise<DiskSample> {
  // The shell's prompt after init's ready line: typed input before the shell opened the console would be lost.
  await shell.waitFor(new RegExp(`${READY_MARKER}[\\s\\S]*# `), 0);
  await shell.run(CLOCK);
  const sample = {} as DiskSample;
  for (const [phase, command] of PHASES) {
    await shell.run('sync; echo 3 > /proc/sys/vm/drop_caches');
    const out = await shell.run(command);
    const ns = /^R (\d+)$/m.exec(out);
    if (out.includes('FAIL') || !ns || Number(ns[1]) <= 0) {
      throw new Error(`${what}: the ${phase} phase failed; the guest printed:\n${out}`);
    }
    sample[phase] = Number(ns[1]);
  }
  return sample;
}

async function runOurs(o: BootBenchOptions, base: string, top: string): Promise<DiskSample> {
  const { kernel, initramfs: initrd, cmdline, memoryMiB, cpus } = o;
  const vm = await Vm.create({ kernel, initrd, cmdline, memoryMiB, cpus, disk: { base, top } });
  const ended = vm.exited.then((exit) => {
    throw new Error(`our VMM's guest ended (${exit.reason}${exit.message ? `: ${exit.message}` : ''})`);
  });
  ended.catch(() => {});
  const shell = serialShell((text) => vm.write(text), ended, 'our VMM', TIMEOUT_MS);
  vm.on('console', shell.feed);
  try {
    vm.start();
    return await measure(shell, 'our VMM');
  } finally {
    await vm.kill();
  }
}

/** QEMU's arguments: the boot benchmark's microvm, plus the image as a modern virtio-mmio disk over a temporary overlay. */
export function qemuDiskArgs(o: BootBenchOptions, base: string): string[] {
  return [
    ...qemuMicrovmArgs(o),
    ...['-global', 'virtio-mmio.force-legacy=false'],
    ...['-drive', `id=vda,file=${base},format=raw,if=none,snapshot=on`, '-device', 'virtio-blk-device,drive=vda'],
  ];
}

async function runQemu(o: BootBenchOptions, base: string, tmp: string): Promise<DiskSample> {
  // snapshot=on puts its qcow2 overlay in $TMPDIR (else /var/tmp, read-only in the lab).
  const { shell, stop } = qemuShell(o.qemu, qemuDiskArgs(o, base), TIMEOUT_MS, { ...process.env, TMPDIR: tmp });
  try {
    return await measure(shell, 'QEMU');
  } finally {
    await stop();
  }
}

/** A raw image of DISK_MIB with a repeating non-zero pattern (not a sparse file of holes). */
function makeBase(file: string): void {
  const mib = Buffer.alloc(2 ** 20);
  for (let i = 0; i < mib.length; i += 4) mib.writeUInt32LE((i * 2654435761) >>> 0, i);
  writeFileSync(file, Buffer.concat(Array.from({ length: DISK_MIB }, () => mib)));
}

const metric = (
  name: string,
  unit: DiskMetric['unit'],
  ours: DiskSample[],
  qemu: DiskSample[],
  of: (s: DiskSample) => number,
) => pairedMetric(name, unit, ours, qemu, of);

export async function benchDisk(
  o: BootBenchOptions,
  progress: (line: string) => void = () => {},
): Promise<DiskBenchResult> {
  const host = benchHost();
  const work = mkdtempSync(path.join(os.tmpdir(), 'smol-bench-disk-'));
  const ours: DiskSample[] = [];
  const qemu: DiskSample[] = [];
  const base = path.join(work, 'base.img');
  try {
    makeBase(base);
    const mibps = (ns: number) => (SEQUENTIAL_MIB * 1e9) / ns;
    const show = (s: DiskSample) =>
      `write ${mibps(s.seqWrite).toFixed(0)} MiB/s, read ${mibps(s.seqRead).toFixed(0)} MiB/s, ` +
      `4K ${(s.randRead / RANDOM_OPS / 1e6).toFixed(2)}/${(s.randWrite / RANDOM_OPS / 1e6).toFixed(2)} ms`;
    for (let i = -WARMUP_RUNS; i < o.runs; i++) {
      const a = await runOurs(o, base, path.join(work, `top-${i + WARMUP_RUNS}`));
      const b = await runQemu(o, base, work);
      progress(`${i < 0 ? 'warm-up' : `run ${i + 1}/${o.runs}`}: ours ${show(a)}; qemu ${show(b)}`);
      if (i < 0) continue;
      ours.push(a);
      qemu.push(b);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const rate = (ns: number) => (SEQUENTIAL_MIB * 1e9) / ns;
  const perOp = (ns: number) => ns / RANDOM_OPS / 1e6;
  // IOPS of the I/O alone: the loop's own cost per op (shell arithmetic, starting dd) taken off.
  const iops = (ns: number, s: DiskSample) => 1000 / Math.max(perOp(ns) - perOp(s.loop), 1e-6);
  const results = [
    metric(`seq write ${SEQUENTIAL_MIB} MiB, 1 MiB O_DIRECT + fsync`, 'MiB/s', ours, qemu, (s) => rate(s.seqWrite)),
    metric(`seq read ${SEQUENTIAL_MIB} MiB, 1 MiB O_DIRECT`, 'MiB/s', ours, qemu, (s) => rate(s.seqRead)),
    metric('rand read 4 KiB O_DIRECT, net of loop', 'IOPS', ours, qemu, (s) => iops(s.randRead, s)),
    metric('rand write 4 KiB O_DIRECT, net of loop', 'IOPS', ours, qemu, (s) => iops(s.randWrite, s)),
    metric('rand read 4 KiB, one dd each', 'ms/op', ours, qemu, (s) => perOp(s.randRead)),
    metric('rand write 4 KiB, one dd each', 'ms/op', ours, qemu, (s) => perOp(s.randWrite)),
    metric('loop alone (dd /dev/zero → /dev/null)', 'ms/op', ours, qemu, (s) => perOp(s.loop)),
  ];
  return {
    name: 'disk',
    runs: o.runs,
    warmup: WARMUP_RUNS,
    guest: `${o.kernel} + ${o.initramfs} (${o.cpus} vCPU, ${o.memoryMiB} MiB)`,
    disk: { sizeMiB: DISK_MIB, sequentialMiB: SEQUENTIAL_MIB, randomOps: RANDOM_OPS, blockBytes: BLOCK },
    results,
    qemu: { binary: o.qemu, args: qemuDiskArgs(o, 'BASE.img') },
    notes: [
      `a fresh VM per run on a ${DISK_MIB} MiB raw base: ours with a new copy-on-write layer, QEMU with snapshot=on ` +
        `(a new qcow2 overlay); the random I/O hits ${RANDOM_OPS} pseudo-random blocks past the first ` +
        `${SEQUENTIAL_MIB} MiB, so its reads come from the base and its writes copy clusters up`,
      'timed in the guest (/proc/timer_list); ratio = ours/QEMU at the median: above 1 ours is faster for MiB/s ' +
        'and IOPS, slower for ms/op',
    ],
    host,
  };
}

export function formatDiskBenchResult(result: DiskBenchResult): string {
  const { kvm, inLab } = result.host;
  const where = `KVM ${kvm.implementation}${inLab ? ', in the lab' : ''}`;
  const width = Math.max(...result.results.map((r) => r.metric.length));
  const num = (x: number) => (x >= 100 ? x.toFixed(0) : x.toFixed(2)).padStart(9);
  const lines = [
    `disk: ${result.runs} runs after ${result.warmup} warm-up, guest ${result.guest} (${where})`,
    `${'metric'.padEnd(width)}  unit    ${'ours p50'.padStart(9)}  ${'qemu p50'.padStart(9)}  ours/qemu`,
    ...result.results.map(
      (r) =>
        `${r.metric.padEnd(width)}  ${r.unit.padEnd(6)}  ${num(r.ours.p50)}  ${num(r.qemu.p50)}  ${r.ratio.toFixed(3)}`,
    ),
    ...result.notes.map((note) => `note: ${note}`),
  ];
  return lines.join('\n') + '\n';
}
