// Stress for a restored Linux guest that stops answering (docs/lab.md, "Known problems"): boots a 2-vCPU guest,
// writes files, starts a ticker, checkpoints it (idle, while output flows, after a delay, or while a line is being
// typed), kills it, restores it and types commands; N times. Every failure is logged with the console tail, the
// vCPU state the snapshot saved, and, with SMOL_DEBUG_DUMP=FILE, the VMM's dump of the stuck VM with its kernel
// addresses looked up in the lab kernel's /proc/kallsyms. Not a vitest test: run it in the lab, after
// `npm run build:ts` (it loads dist/):
//
//   SMOL_N=20 SMOL_LOAD=1 SMOL_DEBUG_DUMP=$PWD/test-results/dump.txt \
//     node scripts/lab.js --timeout 1700 -- node tests/linux/restore-stress.mjs
//
// SMOL_N cycles (10), SMOL_CPUS guest vCPUs (2), SMOL_LOAD busy loops competing for the lab's CPUs (0), SMOL_MODE
// idle|flow|delay|typing|random (random: each in turn), SMOL_TRACE=1 records kvm: events in the lab kernel's tracefs
// and stops at the first vCPU entry at a lab-kernel address (the trace is copied into test-results/ on a failure).
import { execSync, spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findGuestAssets, GUEST_CMDLINE } from '../../dist/src/guest-build/guest-assets.js';
import { Vm } from '../../dist/src/vmm/vm.js';

const log = (m) => writeSync(2, `${(performance.now() / 1000).toFixed(3)} ${m}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const sh = (command) => {
  try {
    return execSync(command, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    return `(${command} failed: ${error.message})`;
  }
};
const N = Number(process.env.SMOL_N ?? 10);
const cpus = Number(process.env.SMOL_CPUS ?? 2);
const mode = process.env.SMOL_MODE ?? 'random';
const work = mkdtempSync(path.join(os.tmpdir(), 'restore-stress-'));
const assets = findGuestAssets();
for (let i = 0; i < Number(process.env.SMOL_LOAD ?? 0); i++) {
  spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }).unref();
}

const TRACE = '/sys/kernel/tracing';
if (process.env.SMOL_TRACE) {
  if (!existsSync(`${TRACE}/trace`)) sh(`mount -t tracefs none ${TRACE}`);
  writeFileSync(`${TRACE}/buffer_size_kb`, '65536');
  for (const event of ['kvm_exit', 'kvm_entry', 'kvm_inj_virq', 'kvm_inj_exception', 'kvm_userspace_exit']) {
    writeFileSync(`${TRACE}/events/kvm/${event}/enable`, '1');
  }
  // The guest has no modules: an entry at 0xffffffffc0000000 and up is the lab fault. Stop there, keep the history.
  writeFileSync(
    `${TRACE}/events/kvm/kvm_entry/trigger`,
    'traceoff if rip >= 0xffffffffc0000000 && rip < 0xffffffffff000000',
  );
  writeFileSync(`${TRACE}/tracing_on`, '1');
}

/** The vCPU sections of a snapshot's `state` (docs/snapshots.md): registers, events, LAPIC. */
function savedVcpus(stateFile) {
  const b = readFileSync(stateFile);
  const hex = (x) => x.toString(16);
  const u64 = (d, o) => d.readBigUInt64LE(o);
  let out = '';
  for (let i = 0, off = 64, n = b.readUInt32LE(56); i < n; i++) {
    const kind = b.readUInt32LE(off),
      index = b.readUInt32LE(off + 4),
      len = Number(b.readBigUInt64LE(off + 8));
    const d = b.subarray(off + 16, off + 16 + len);
    off += 16 + Math.ceil(len / 8) * 8;
    if (kind === 33) out += `vcpu ${index}: mp_state=${d.readUInt32LE(0)}\n`;
    if (kind === 34) out += `  rip=${hex(u64(d, 128))} rsp=${hex(u64(d, 48))} rflags=${hex(u64(d, 136))}\n`;
    if (kind === 35)
      out += `  cr0=${hex(u64(d, 224))} cr2=${hex(u64(d, 232))} cr3=${hex(u64(d, 240))} cr4=${hex(u64(d, 248))}\n`;
    if (kind === 41) {
      out += `  events: exception inj=${d[0]} nr=${d[1]} pending=${d[3]}; interrupt inj=${d[8]} nr=${d[9]}; `;
      out += `nmi inj=${d[12]} pending=${d[13]} masked=${d[14]}; flags=${hex(d.readUInt32LE(20))}\n`;
    }
    if (kind === 39) {
      const vectors = (base) =>
        [...Array(256).keys()].filter((v) => d.readUInt32LE(base + (v >> 5) * 16) & (1 << (v & 31)));
      out += `  lapic: ISR=[${vectors(0x100).map(hex)}] IRR=[${vectors(0x200).map(hex)}] lvtt=${hex(d.readUInt32LE(0x320))}\n`;
    }
  }
  return out;
}

/** Each kernel address `rip=…` in a dump, with the lab kernel's symbol at or below it. */
function labSymbols(dump) {
  const addresses = [...new Set([...dump.matchAll(/rip=(ffffffff[0-9a-f]{8})/g)].map((m) => m[1]))];
  const symbols = readFileSync('/proc/kallsyms', 'utf8')
    .split('\n')
    .map((line) => line.split(' '))
    .filter((f) => f.length >= 3)
    .map((f) => [BigInt(`0x${f[0]}`), `${f[2]} ${f[3] ?? ''}`])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return addresses
    .map((address) => {
      const value = BigInt(`0x${address}`);
      const below = symbols.filter((s) => s[0] <= value).at(-1);
      return `${address} = lab kernel ${below ? `${below[1]} +0x${(value - below[0]).toString(16)}` : '?'}`;
    })
    .join('\n');
}

async function evidence(label) {
  if (process.env.SMOL_TRACE) writeFileSync(`${TRACE}/tracing_on`, '0');
  const file = process.env.SMOL_DEBUG_DUMP;
  if (file && file !== '1') {
    const before = existsSync(file) ? readFileSync(file, 'latin1').length : 0;
    process.kill(process.pid, 'SIGUSR1');
    for (let t = 0; t < 300 && !readFileSync(file, 'latin1').endsWith('smol-debug: end of dump\n'); t++)
      await sleep(100);
    const dump = readFileSync(file, 'latin1').slice(before);
    log(`${label}: VMM debug dump:\n${dump}\nlab kernel symbols:\n${labSymbols(dump)}`);
  }
  if (process.env.SMOL_TRACE) {
    const out = `test-results/trace-${process.pid}-${label}.txt`;
    sh(`mkdir -p test-results && cp ${TRACE}/trace ${out}`);
    log(`${label}: trace copied to ${out}`);
    writeFileSync(`${TRACE}/trace`, '');
    writeFileSync(`${TRACE}/tracing_on`, '1');
  }
}

let marks = 0;
function attach(vm) {
  let out = '';
  vm.on('console', (chunk) => (out += Buffer.from(chunk).toString('latin1')));
  const waitFor = async (re, ms) => {
    for (const t0 = Date.now(); !re.test(out); await sleep(20)) {
      if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${re}`);
    }
  };
  const run = async (command, ms = 60_000) => {
    const n = ++marks;
    vm.write(`echo "<<$((${n})):begin>>"; ${command}; echo "<<$((${n})):end>>"\n`);
    await waitFor(new RegExp(`<<${n}:begin>>\\r?\\n[\\s\\S]*?<<${n}:end>>`), ms);
  };
  return { run, waitFor, tail: () => JSON.stringify(out.slice(-1500)) };
}

let failures = 0;
for (let i = 0; i < N; i++) {
  const vm = await Vm.create({
    kernel: assets.kernel,
    initrd: assets.initramfs,
    cmdline: GUEST_CMDLINE,
    memoryMiB: 256,
    cpus,
  });
  const original = attach(vm);
  vm.start();
  try {
    await original.waitFor(/smol-guest: ready/, 120_000);
    await original.run('mkdir -p /root && head -c 1048576 /dev/urandom > /root/a && seq 1 100000 > /root/seq');
    await original.run('(i=0; while :; do i=$((i + 1)); echo $i >> /tmp/tick; sleep 0.2; done) >/dev/null 2>&1 & true');
    await original.run('sleep 1; cat /proc/uptime');
  } catch (error) {
    failures++;
    log(`${i}: THE BOOTED VM STOPPED ANSWERING: ${error.message}\n${original.tail()}`);
    await evidence(`booted-${i}`);
    await vm.kill();
    continue;
  }
  const how = mode === 'random' ? ['idle', 'flow', 'delay', 'typing'][i % 4] : mode;
  let what = how;
  if (how === 'flow') vm.write('seq 1 3000\n');
  if (how === 'flow' || how === 'delay') {
    const ms = Math.floor(Math.random() * (how === 'flow' ? 400 : 1500));
    await sleep(ms);
    what += ` after ${ms} ms`;
  }
  if (how === 'typing') vm.write('echo typed-while-checkpointing-a-long-line-of-text-0123456789-abcdefghijklmnop\n');
  const info = await vm.checkpoint(path.join(work, `s${i}`));
  await vm.kill();
  const restoredVm = await Vm.restore(info.dir);
  const restored = attach(restoredVm);
  restoredVm.start();
  try {
    for (let k = 0; k < 5; k++) await restored.run('cat /proc/uptime; wc -l /tmp/tick; sha256sum /root/seq', 90_000);
    log(`${i}: ok (${what})`);
  } catch (error) {
    failures++;
    log(`${i}: THE RESTORED VM STOPPED ANSWERING (${what}): ${error.message}\n${restored.tail()}`);
    log(`${i}: the vCPUs as the snapshot saved them:\n${savedVcpus(path.join(info.dir, 'state'))}`);
    const keep = `test-results/restore-stress-${process.pid}-${i}`;
    mkdirSync(keep, { recursive: true });
    copyFileSync(path.join(info.dir, 'state'), path.join(keep, 'state'));
    await evidence(`restored-${i}`);
  }
  if (process.env.SMOL_TRACE && readFileSync(`${TRACE}/tracing_on`, 'utf8').trim() === '0') {
    log(`${i}: the trace trigger fired: a vCPU entered at a lab-kernel address`);
    await evidence(`trigger-${i}`);
  }
  await restoredVm.kill();
  rmSync(info.dir, { recursive: true, force: true });
}
rmSync(work, { recursive: true, force: true });
log(`done: ${failures} of ${N} cycles had a VM that stopped answering`);
process.exit(failures ? 1 : 0);
