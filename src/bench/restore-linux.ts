// Benchmark `restore --linux`: a booted Linux guest with its shell idle, restored from a snapshot until the shell
// answers a command; ours (Vm.restore) against QEMU microvm's own restore (`migrate` to a file, then `-incoming`),
// interleaved run by run.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Vm } from '../vmm/vm.js';
import { qemuMicrovmArgs, READY_MARKER, type BootBenchOptions } from './boot.js';
import { metric, type SnapshotBenchResult } from './snapshot.js';
import { benchHost, withTimeout } from './vm-create.js';

/** Typed into the guest's shell; only the shell running it prints 42 (the echoed input shows the expression). */
export const PROBE_COMMAND = 'echo $((6*7))\n';
const PROBE_ANSWER = '\n42';
const TIMEOUT_MS = 120_000;
const WARMUP_RUNS = 1;

/** Collects console text and resolves `waitFor(text)` with performance.now() once it has appeared. */
function consoleText() {
  let text = '';
  let waiters: Array<() => void> = [];
  let firstByte: number | undefined;
  const feed = (chunk: Buffer) => {
    firstByte ??= performance.now();
    text += chunk.toString('latin1');
    for (const w of waiters) w();
  };
  const waitFor = (needle: string, what: string) =>
    withTimeout(
      new Promise<number>((resolve) => {
        const check = () => {
          if (!text.includes(needle)) return;
          waiters = waiters.filter((w) => w !== check);
          resolve(performance.now());
        };
        waiters.push(check);
        check();
      }),
      TIMEOUT_MS,
      `${what}: no ${JSON.stringify(needle)} within ${TIMEOUT_MS / 1000} s; output was:\n${text.slice(-2000)}`,
    );
  return { feed, waitFor, firstByte: () => firstByte };
}

interface RestoreSample {
  /** Start of the restore to the shell's answer. */
  answered: number;
  firstByte: number;
}

async function snapshotOurs(o: BootBenchOptions, dir: string): Promise<void> {
  const { kernel, initramfs: initrd, cmdline, memoryMiB, cpus } = o;
  const vm = await Vm.create({ kernel, initrd, cmdline, memoryMiB, cpus });
  const out = consoleText();
  vm.on('console', out.feed);
  try {
    vm.start();
    await out.waitFor(READY_MARKER, 'our VMM');
    vm.write(PROBE_COMMAND);
    await out.waitFor(PROBE_ANSWER, 'our VMM');
    await new Promise((resolve) => setTimeout(resolve, 500));
    await vm.checkpoint(dir);
  } finally {
    await vm.kill();
  }
}

async function restoreOurs(dir: string): Promise<RestoreSample> {
  const start = performance.now();
  const vm = await Vm.restore(dir);
  const out = consoleText();
  vm.on('console', out.feed);
  try {
    vm.start();
    vm.write(PROBE_COMMAND);
    const answered = await out.waitFor(PROBE_ANSWER, 'our restored guest');
    return { answered: answered - start, firstByte: out.firstByte()! - start };
  } finally {
    await vm.kill();
  }
}

function spawnQemu(o: BootBenchOptions, extra: string[]) {
  const child = spawn(o.qemu, [...qemuMicrovmArgs(o), ...extra], { stdio: ['pipe', 'pipe', 'pipe'] });
  const out = consoleText();
  let stderr = '';
  child.stdout.on('data', out.feed);
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const failed = new Promise<never>((_, reject) => {
    child.on('error', (e) => reject(new Error(`cannot run ${o.qemu}: ${e.message}`)));
    void closed.then(() => reject(new Error(`QEMU ended: ${stderr.trim() || 'no message'}`)));
  });
  failed.catch(() => {});
  const stop = async () => {
    child.kill('SIGKILL');
    await closed;
  };
  return { child, out, failed, stop };
}

/** A minimal QMP client: one command at a time, events skipped. */
async function qmp(socket: string): Promise<(command: string, args?: object) => Promise<unknown>> {
  const conn = await withTimeout(
    new Promise<net.Socket>((resolve, reject) => {
      const s = net.createConnection(socket, () => resolve(s));
      s.once('error', reject);
    }),
    10_000,
    'QMP did not answer',
  );
  let buffer = '';
  let pending: ((reply: { return?: unknown; error?: { desc: string } }) => void) | undefined;
  conn.on('data', (d: Buffer) => {
    buffer += d.toString();
    let nl;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const msg = JSON.parse(buffer.slice(0, nl)) as { return?: unknown; error?: { desc: string } };
      buffer = buffer.slice(nl + 1);
      if (('return' in msg || 'error' in msg) && pending) pending(msg);
    }
  });
  const send = (command: string, args?: object) =>
    new Promise<unknown>((resolve, reject) => {
      pending = (reply) =>
        reply.error ? reject(new Error(`QMP ${command}: ${reply.error.desc}`)) : resolve(reply.return);
      conn.write(JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}) }) + '\n');
    });
  await send('qmp_capabilities');
  return send;
}

async function snapshotQemu(o: BootBenchOptions, file: string, socket: string): Promise<void> {
  const qemu = spawnQemu(o, ['-qmp', `unix:${socket},server=on,wait=off`]);
  try {
    await Promise.race([qemu.out.waitFor(READY_MARKER, 'QEMU'), qemu.failed]);
    qemu.child.stdin.write(PROBE_COMMAND);
    await Promise.race([qemu.out.waitFor(PROBE_ANSWER, 'QEMU'), qemu.failed]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const send = await qmp(socket);
    await send('migrate-set-parameters', { 'max-bandwidth': 64 * 2 ** 30 });
    await send('migrate', { uri: `exec:cat > ${file}` });
    for (;;) {
      const { status } = (await send('query-migrate')) as { status?: string };
      if (status === 'completed') break;
      if (status === 'failed' || status === 'cancelled') throw new Error(`QEMU's migration to ${file} ${status}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await qemu.stop();
  }
}

async function restoreQemu(o: BootBenchOptions, file: string): Promise<RestoreSample> {
  const start = performance.now();
  const qemu = spawnQemu(o, ['-incoming', `exec:cat ${file}`]);
  try {
    // Input that arrives while QEMU is still loading the migration stream is lost (the UART's state is loaded over
    // it), so the command is typed again every 10 ms until the shell answers.
    const typing = setInterval(() => qemu.child.stdin.write(PROBE_COMMAND), 10);
    qemu.child.stdin.write(PROBE_COMMAND);
    const answered = await Promise.race([qemu.out.waitFor(PROBE_ANSWER, 'QEMU restored'), qemu.failed]).finally(() =>
      clearInterval(typing),
    );
    return { answered: answered - start, firstByte: qemu.out.firstByte()! - start };
  } finally {
    await qemu.stop();
  }
}

export async function benchRestoreLinux(
  o: BootBenchOptions,
  progress: (line: string) => void = () => {},
): Promise<SnapshotBenchResult> {
  const host = benchHost();
  const work = mkdtempSync(path.join(os.tmpdir(), 'smol-bench-linux-'));
  const ours: RestoreSample[] = [];
  const qemu: RestoreSample[] = [];
  try {
    const dir = path.join(work, 'ours');
    const file = path.join(work, 'qemu.migration');
    await snapshotOurs(o, dir);
    await snapshotQemu(o, file, path.join(work, 'qmp.sock'));
    progress('snapshots taken');
    const ms = (s: RestoreSample) => `${s.answered.toFixed(1)} ms`;
    for (let i = -WARMUP_RUNS; i < o.runs; i++) {
      const [a, b] = [await restoreOurs(dir), await restoreQemu(o, file)];
      progress(`${i < 0 ? 'warm-up' : `run ${i + 1}/${o.runs}`}: ours ${ms(a)}, qemu ${ms(b)}`);
      if (i < 0) continue;
      ours.push(a);
      qemu.push(b);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const inputs = {
    kernel: o.kernel,
    initrd: o.initramfs,
    memoryMiB: o.memoryMiB,
    cpus: o.cpus,
    probe: 'echo $((6*7))',
  };
  const results = [
    metric(
      'ours: restore-to-answer',
      ours.map((s) => s.answered),
      inputs,
    ),
    metric(
      'qemu-microvm: incoming-to-answer',
      qemu.map((s) => s.answered),
      inputs,
    ),
    metric(
      'ours: restore-to-first-byte',
      ours.map((s) => s.firstByte),
      inputs,
    ),
    metric(
      'qemu-microvm: incoming-to-first-byte',
      qemu.map((s) => s.firstByte),
      inputs,
    ),
  ];
  const ratio = (pick: (m: (typeof results)[number]) => number) =>
    Math.round((pick(results[0]!) / pick(results[1]!)) * 1000) / 1000;
  return {
    name: 'restore --linux',
    runs: o.runs,
    warmup: WARMUP_RUNS,
    guest: `${o.kernel} + ${o.initramfs} (${o.cpus} vCPU, ${o.memoryMiB} MiB)`,
    results,
    notes: [
      `ratio ours/qemu restore-to-answer: p50 ${ratio((m) => m.p50_ms)}, p90 ${ratio((m) => m.p90_ms)} ` +
        `(qemu: ${o.qemu} ${[...qemuMicrovmArgs(o), '-incoming', 'exec:cat FILE'].join(' ')}).`,
    ],
    host,
  };
}
