// Benchmark `net`: the Linux guest on a network, our virtio-net on the VM's libslirp stack behind the policy
// (docs/network.md) against QEMU microvm's virtio-net on `-netdev user` (the same libslirp), same kernel,
// initramfs, command line (with the engine's ip=), memory and vCPUs, a fresh VM of each per run, interleaved.
// Every packet stays on this machine: the guest sends to the host's loopback through the gateway (10.0.2.2), the
// host reaches the guest's httpd through a forward on 127.0.0.1.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { GUEST_IP_CMDLINE } from '../guest-build/guest-assets.js';
import { Vm } from '../vmm/vm.js';
import { qemuMicrovmArgs, READY_MARKER, type BootBenchOptions } from './boot.js';
import { qemuShell, serialShell, type SerialShell } from './serial-shell.js';
import { median, pairedMetric, type PairedMetric } from './stats.js';
import { benchHost, type BenchHost } from './vm-create.js';

/** MiB the guest sends the host in the throughput phase (the lab carries about 0.3 MiB/s: nested TCG). */
const SEND_MIB = 4;
const CHUNK = 65536;
/** Sequential requests of the latency phase (each on a new connection: busybox httpd closes after one). */
const REQUESTS = 40;
const TIMEOUT_MS = 300_000;
const WARMUP_RUNS = 1;

/** The guest's monotonic clock in ns into $T (as the disk benchmark reads it). */
const CLOCK = 'ns() { while read -r a b c d; do if [ "$a" = now ]; then T=$c; return; fi; done < /proc/timer_list; }';

interface NetSample {
  /** ms from creating the VM to its init's ready line, with the network. */
  bootNet: number;
  /** The same VMM without a network device (and without ip=). */
  bootPlain: number;
  /** Guest-to-host TCP, guest time from the first byte written to nc's end, MiB/s. */
  sendMiBps: number;
  /** Host-to-guest request/response through the forward, new connection each: median ms of the run. */
  requestMs: number;
}

export type NetMetric = PairedMetric<'MiB/s' | 'ms'>;

export interface NetBenchResult {
  name: 'net';
  runs: number;
  warmup: number;
  guest: string;
  cmdline: string;
  results: NetMetric[];
  /** Boot with the network against boot without it, on the same VMM (goal for ours: at most 1.05). */
  bootCost: { ours: number; qemu: number };
  qemu: { binary: string; args: string[] };
  notes: string[];
  host: BenchHost;
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * A host sink on 127.0.0.1: takes SEND_MIB from a connection, then closes it (which ends the guest's nc).
 * `next()`, called before the guest connects, resolves with the bytes the next connection carried.
 */
async function sink(): Promise<{ port: number; next: () => Promise<number>; close: () => void }> {
  let done: ((n: number) => void) | null = null;
  const server = net.createServer((socket) => {
    let n = 0;
    const finish = () => {
      done?.(n);
      done = null;
    };
    socket.on('data', (chunk: Buffer) => {
      n += chunk.length;
      if (n >= SEND_MIB * 2 ** 20) socket.end();
    });
    socket.on('close', finish);
    socket.on('error', finish);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    next: () => new Promise<number>((resolve) => (done = resolve)),
    close: () => server.close(),
  };
}

/** One GET of http://127.0.0.1:port/ on a connection of its own; its body. */
function get(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port, path: '/', agent: false, timeout: 30_000 }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve(body));
    });
    request.on('timeout', () => request.destroy(new Error(`GET 127.0.0.1:${port}: no answer in 30 s`)));
    request.on('error', reject);
  });
}

/** Boot to the ready line (`bootNet`, from `start`), then the phases at the prompt. */
async function measure(
  shell: SerialShell,
  what: string,
  start: number,
  sinkPort: number,
  hostPort: number,
  received: () => Promise<number>,
): Promise<Omit<NetSample, 'bootPlain'>> {
  await shell.waitFor(new RegExp(READY_MARKER), 0);
  const bootNet = performance.now() - start;
  await shell.waitFor(new RegExp(`${READY_MARKER}[\\s\\S]*# `), 0);
  await shell.run(CLOCK);
  const eth0 = await shell.run('ip -4 addr show eth0 | grep -o "inet [0-9./]*"');
  if (!eth0.includes('inet 10.0.2.15/24'))
    throw new Error(`${what}: eth0 is not 10.0.2.15/24; the guest said:\n${eth0}`);

  const bytes = received();
  const out = await shell.run(
    `ns; s=$T; dd if=/dev/zero bs=${CHUNK} count=${(SEND_MIB * 2 ** 20) / CHUNK} 2>/dev/null | ` +
      `nc 10.0.2.2 ${sinkPort}; ns; echo "R $((T-s))"`,
  );
  const ns = /^R (\d+)$/m.exec(out);
  const got = await bytes;
  if (!ns || got < SEND_MIB * 2 ** 20) {
    throw new Error(`${what}: the host received ${got} of ${SEND_MIB} MiB; the guest printed:\n${out}`);
  }
  const sendMiBps = (SEND_MIB * 1e9) / Number(ns[1]);

  await shell.run('mkdir -p /www && echo served-by-the-guest > /www/index.html && httpd -p 80 -h /www');
  const body = await get(hostPort); // the first request also warms the path
  if (body !== 'served-by-the-guest\n') throw new Error(`${what}: the forward answered ${JSON.stringify(body)}`);
  const times: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const t = performance.now();
    await get(hostPort);
    times.push(performance.now() - t);
  }
  return { bootNet, sendMiBps, requestMs: median(times) };
}

function consoleEnded(exited: Promise<{ reason: string; message?: string }>, what: string): Promise<never> {
  const ended = exited.then((exit) => {
    throw new Error(`${what}'s guest ended (${exit.reason}${exit.message ? `: ${exit.message}` : ''})`);
  });
  ended.catch(() => {});
  return ended;
}

async function bootPlainOurs(o: BootBenchOptions): Promise<number> {
  const start = performance.now();
  const { kernel, initramfs: initrd, cmdline, memoryMiB, cpus } = o;
  const vm = await Vm.create({ kernel, initrd, cmdline, memoryMiB, cpus });
  const shell = serialShell((text) => vm.write(text), consoleEnded(vm.exited, 'our VMM'), 'our VMM', TIMEOUT_MS);
  vm.on('console', shell.feed);
  try {
    vm.start();
    await shell.waitFor(new RegExp(READY_MARKER), 0);
    return performance.now() - start;
  } finally {
    await vm.kill();
  }
}

async function runOurs(o: BootBenchOptions, work: string, sinkPort: number, received: () => Promise<number>) {
  const hostPort = await freePort();
  const conf = path.join(work, `net-${hostPort}.conf`);
  writeFileSync(conf, `allow_host host.smol.internal:${sinkPort}\nforward ${hostPort} 80\n`);
  const start = performance.now();
  const { kernel, initramfs: initrd, memoryMiB, cpus } = o;
  const cmdline = `${o.cmdline} ${GUEST_IP_CMDLINE}`;
  const vm = await Vm.create({ kernel, initrd, cmdline, memoryMiB, cpus, resources: { 'virtio-net': { path: conf } } });
  const shell = serialShell((text) => vm.write(text), consoleEnded(vm.exited, 'our VMM'), 'our VMM', TIMEOUT_MS);
  vm.on('console', shell.feed);
  try {
    vm.start();
    return await measure(shell, 'our VMM', start, sinkPort, hostPort, received);
  } finally {
    await vm.kill();
  }
}

/** QEMU's arguments: the boot benchmark's microvm with ip=, plus virtio-net on user networking with the forward. */
export function qemuNetArgs(o: BootBenchOptions, hostPort: number | null): string[] {
  const withIp = { ...o, cmdline: hostPort === null ? o.cmdline : `${o.cmdline} ${GUEST_IP_CMDLINE}` };
  const net =
    hostPort === null
      ? []
      : [
          ...['-global', 'virtio-mmio.force-legacy=false'],
          ...['-netdev', `user,id=n0,hostfwd=tcp:127.0.0.1:${hostPort}-:80`, '-device', 'virtio-net-device,netdev=n0'],
        ];
  return [...qemuMicrovmArgs(withIp), ...net];
}

const spawnQemu = (o: BootBenchOptions, hostPort: number | null) =>
  qemuShell(o.qemu, qemuNetArgs(o, hostPort), TIMEOUT_MS);

async function runQemu(o: BootBenchOptions, sinkPort: number, received: () => Promise<number>) {
  const hostPort = await freePort();
  const start = performance.now();
  const { shell, stop } = spawnQemu(o, hostPort);
  try {
    return await measure(shell, 'QEMU', start, sinkPort, hostPort, received);
  } finally {
    await stop();
  }
}

async function bootPlainQemu(o: BootBenchOptions): Promise<number> {
  const start = performance.now();
  const { shell, stop } = spawnQemu(o, null);
  try {
    await shell.waitFor(new RegExp(READY_MARKER), 0);
    return performance.now() - start;
  } finally {
    await stop();
  }
}

const metric = (
  name: string,
  unit: NetMetric['unit'],
  ours: NetSample[],
  qemu: NetSample[],
  of: (s: NetSample) => number,
) => pairedMetric(name, unit, ours, qemu, of);

export async function benchNet(
  o: BootBenchOptions,
  progress: (line: string) => void = () => {},
): Promise<NetBenchResult> {
  const host = benchHost();
  const work = mkdtempSync(path.join(os.tmpdir(), 'smol-bench-net-'));
  const target = await sink();
  const ours: NetSample[] = [];
  const qemu: NetSample[] = [];
  const show = (s: NetSample) =>
    `boot ${s.bootNet.toFixed(0)}/${s.bootPlain.toFixed(0)} ms, send ${s.sendMiBps.toFixed(1)} MiB/s, ` +
    `request ${s.requestMs.toFixed(2)} ms`;
  try {
    for (let i = -WARMUP_RUNS; i < o.runs; i++) {
      const a = { ...(await runOurs(o, work, target.port, target.next)), bootPlain: await bootPlainOurs(o) };
      const b = { ...(await runQemu(o, target.port, target.next)), bootPlain: await bootPlainQemu(o) };
      progress(`${i < 0 ? 'warm-up' : `run ${i + 1}/${o.runs}`}: ours ${show(a)}; qemu ${show(b)}`);
      if (i < 0) continue;
      ours.push(a);
      qemu.push(b);
    }
  } finally {
    target.close();
    rmSync(work, { recursive: true, force: true });
  }
  const results = [
    metric(`guest → host TCP, ${SEND_MIB} MiB`, 'MiB/s', ours, qemu, (s) => s.sendMiBps),
    metric(`host → guest HTTP request, new connection (median of ${REQUESTS})`, 'ms', ours, qemu, (s) => s.requestMs),
    metric('boot to ready with the network', 'ms', ours, qemu, (s) => s.bootNet),
    metric('boot to ready without it', 'ms', ours, qemu, (s) => s.bootPlain),
  ];
  const cost = (samples: NetSample[]) =>
    Math.round((median(samples.map((s) => s.bootNet)) / median(samples.map((s) => s.bootPlain))) * 1000) / 1000;
  return {
    name: 'net',
    runs: o.runs,
    warmup: WARMUP_RUNS,
    guest: `${o.kernel} + ${o.initramfs} (${o.cpus} vCPU, ${o.memoryMiB} MiB)`,
    cmdline: `${o.cmdline} ${GUEST_IP_CMDLINE}`,
    results,
    bootCost: { ours: cost(ours), qemu: cost(qemu) },
    qemu: { binary: o.qemu, args: qemuNetArgs(o, 0) },
    notes: [
      'ours: virtio-net on libslirp behind the policy (allow_host host.smol.internal:SINK, forward HOST 80); ' +
        'QEMU: virtio-net-device on -netdev user (libslirp, no policy) with hostfwd; eth0 from the same ip=',
      `throughput: the guest's dd | nc to a host sink on 127.0.0.1 through the gateway, timed in the guest; ` +
        `latency: the host's GET of the guest's busybox httpd through the forward, a new connection each`,
      'ratio = ours/QEMU at the median: above 1 ours is faster for MiB/s, slower for ms; ' +
        'bootCost = boot with the network / boot without, per VMM (goal for ours: at most 1.05)',
    ],
    host,
  };
}

export function formatNetBenchResult(result: NetBenchResult): string {
  const { kvm, inLab } = result.host;
  const where = `KVM ${kvm.implementation}${inLab ? ', in the lab' : ''}`;
  const width = Math.max(...result.results.map((r) => r.metric.length));
  const num = (x: number) => (x >= 100 ? x.toFixed(0) : x.toFixed(2)).padStart(9);
  const lines = [
    `net: ${result.runs} runs after ${result.warmup} warm-up, guest ${result.guest} (${where})`,
    `${'metric'.padEnd(width)}  unit    ${'ours p50'.padStart(9)}  ${'qemu p50'.padStart(9)}  ours/qemu`,
    ...result.results.map(
      (r) =>
        `${r.metric.padEnd(width)}  ${r.unit.padEnd(6)}  ${num(r.ours.p50)}  ${num(r.qemu.p50)}  ${r.ratio.toFixed(3)}`,
    ),
    `boot with the network / without: ours ${result.bootCost.ours.toFixed(3)}, qemu ${result.bootCost.qemu.toFixed(3)}`,
    ...result.notes.map((note) => `note: ${note}`),
  ];
  return lines.join('\n') + '\n';
}
