// Runs the lab VM: QEMU under TCG with an emulated AMD SVM CPU, the Debian kernel and the lab initramfs. The serial
// console carries only boot noise and SMOL-LAB-* status lines; the command's stdout and stderr arrive on two
// virtio-serial ports, which QEMU connects to Unix sockets we listen on (flow-controlled, byte-exact).
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { spawn } from 'node:child_process';
import { createEndMarkerSplitter } from './end-marker.js';
import { EXIT, LabError, progress } from './errors.js';
import { diagnoseHang, openMonitor, startKeepalive } from './hang.js';

const QEMU = 'qemu-system-x86_64';
const QEMU_NOISE = /TCG doesn't support requested feature|terminating on signal/;
const CONSOLE_TAIL_LINES = 400;
const KEPT_CONSOLE_LOGS = 20;
const NO_KVM_FAILURES = new Set(['nokvm', 'modules']); // init's `fail` kinds that mean kvm-amd did not come up

const virtfs = (tag, dir, readonly) => [
  '-virtfs',
  `local,path=${dir.replaceAll(',', ',,')},mount_tag=${tag},security_model=none,multidevs=remap${readonly ? ',readonly=on' : ''}`,
];
const virtserialPort = (id, socket, name) => [
  '-chardev',
  `socket,id=${id},path=${socket}`,
  '-device',
  `virtserialport,chardev=${id},name=${name}`,
];

// loglevel=1, not 0: a panic is logged at level 0 and must still reach the console. mitigations=off: the lab is a
// test harness, and its syscalls got ~8% cheaper under TCG (node -e 0, three runs each way).
const KERNEL_CMDLINE = 'console=ttyS0 quiet loglevel=1 panic=-1 mitigations=off';

/**
 * A NIC only when ports are forwarded: user-mode networking with `restrict=on`, so the lab reaches nothing
 * outside, and host 127.0.0.1:PORT forwarded to the lab's PORT (init.sh gives the lab 10.0.2.15, QEMU's default).
 */
const forwardedNetwork = (forwards = []) =>
  forwards.length === 0
    ? []
    : [
        '-netdev',
        ['user,id=lan,restrict=on', ...forwards.map((port) => `hostfwd=tcp:127.0.0.1:${port}-:${port}`)].join(','),
        '-device',
        'virtio-net-pci,netdev=lan',
      ];

export function qemuArgs({ kernel, initrd, run, shares, nonce, memory, cpus, forwards }) {
  return [
    ...['-M', 'q35', '-accel', 'tcg,thread=multi', '-cpu', 'EPYC,+svm', '-smp', String(cpus), '-m', String(memory)],
    ...['-nodefaults', '-nographic', '-serial', 'stdio', '-no-reboot'],
    // The monitor: the keep-alive key presses, and what a run that hung was doing (scripts/lab/hang.js).
    ...['-monitor', `unix:${run.monitorSocket},server=on,wait=off`],
    ...['-kernel', kernel.bootImage, '-initrd', initrd],
    ...['-append', `${KERNEL_CMDLINE} smol.nonce=${nonce}`],
    ...virtfs('hostroot', '/', true),
    ...virtfs('smolrun', run.dir, true),
    ...shares.flatMap((share) => virtfs(share.tag, share.dir, false)),
    ...['-device', 'virtio-serial-pci'],
    ...virtserialPort('smolout', run.stdoutSocket, 'smol.stdout'),
    ...virtserialPort('smolerr', run.stderrSocket, 'smol.stderr'),
    ...forwardedNetwork(forwards),
  ];
}

/**
 * Listens on `socket` for QEMU's connection and copies its bytes to `sink` until the end marker; `onData` hears of
 * every chunk (the stall watch).
 */
async function openChannel(socket, token, sink, onData) {
  let resolveEnd;
  const ended = new Promise((resolve) => (resolveEnd = resolve));
  let sinkClosed = false; // e.g. `npm run lab -- … | head`: drop the rest, let the command finish, keep its status
  sink.on('error', () => (sinkClosed = true));
  const write = (chunk) => sinkClosed || sink.write(chunk);
  const server = net.createServer((connection) => {
    const push = createEndMarkerSplitter(token, write, resolveEnd);
    connection.on('data', (chunk) => {
      onData();
      push(chunk);
      if (sink.writableNeedDrain) {
        connection.pause();
        sink.once('drain', () => connection.resume());
      }
    });
    connection.on('error', () => {});
  });
  await new Promise((resolve, reject) => server.once('error', reject).listen(socket, resolve));
  return { ended, close: () => server.close() };
}

function spawnQemu(args) {
  // setpriv --pdeathsig: QEMU dies with us even if we are killed with SIGKILL. Its own process group keeps a
  // terminal's Ctrl-C away from QEMU; we stop it ourselves.
  const withDeathSignal = fs.existsSync('/usr/bin/setpriv');
  const [command, argv] = withDeathSignal
    ? ['/usr/bin/setpriv', ['--pdeathsig', 'KILL', '--', QEMU, ...args]]
    : [QEMU, args];
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const exited = new Promise((resolve) => {
    child.once('error', (error) => resolve({ spawnError: error }));
    child.once('close', (code, signal) => resolve({ qemuExit: code ?? signal })); // after its output was read
  });
  const killOnExit = () => child.exitCode === null && child.signalCode === null && child.kill('SIGKILL');
  process.on('exit', killOnExit);
  return { child, exited, killOnExit };
}

async function stopQemu({ child, exited }) {
  if (child.exitCode !== null || child.signalCode !== null || !child.pid) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
  await exited;
  clearTimeout(timer);
}

const LAB_KERNEL_ALARM =
  /soft lockup|hard LOCKUP|rcu_(sched|preempt) (self-)?detected stall|blocked for more than|\bBUG:|WARNING:|Oops/;
const ALARM_CONTEXT_LINES = 40;

/** Follows the serial console: keeps a tail for diagnostics and notes the init's status lines and kernel panics. */
function watchConsole(stream, nonce, state, verbose, bootStart) {
  const lines = readline.createInterface({ input: stream, crlfDelay: Infinity });
  const status = new RegExp(`SMOL-LAB-(START|FAIL|DONE)-${nonce} ?(.*)`);
  lines.on('line', (raw) => {
    const line = raw.replace(/\r$/, '');
    state.lastConsoleLine = performance.now();
    state.dumpLines?.push(line);
    state.consoleTail.push(line);
    if (state.consoleTail.length > CONSOLE_TAIL_LINES) state.consoleTail.shift();
    if (verbose)
      process.stderr.write(`lab console +${((performance.now() - bootStart) / 1000).toFixed(1)}s: ${line}\n`);
    // The lab kernel's own alarms (a soft lockup, an RCU stall, a warning) and the trace lines after them go to
    // stderr even without --verbose: when a test in the lab hangs, they are the evidence.
    if (!verbose && state.startedAt) {
      if (LAB_KERNEL_ALARM.test(line)) state.alarmLines = ALARM_CONTEXT_LINES;
      if (state.alarmLines > 0) {
        state.alarmLines--;
        process.stderr.write(`lab kernel: ${line}\n`);
      }
    }
    const match = status.exec(line);
    if (match?.[1] === 'START') state.startedAt = performance.now();
    if (match?.[1] === 'FAIL') state.failure ??= match[2];
    if (!state.panic && line.includes('Kernel panic')) state.panic = line.slice(line.indexOf('Kernel panic')).trim();
  });
}

/** QEMU's own messages: kept for the error message; shown as they come once the command runs, or with --verbose. */
function watchQemuStderr(stream, state, verbose) {
  const lines = readline.createInterface({ input: stream, crlfDelay: Infinity });
  lines.on('line', (line) => {
    if (QEMU_NOISE.test(line)) return;
    state.qemuErrors.push(line);
    if (verbose || state.startedAt) process.stderr.write(`lab: qemu: ${line}\n`);
  });
}

function waitForSignal(state) {
  const handlers = {};
  const received = new Promise((resolve) => {
    for (const name of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
      handlers[name] = () => resolve({ signal: name });
      process.once(name, handlers[name]);
    }
  });
  state.cleanups.push(() => Object.entries(handlers).forEach(([name, handler]) => process.off(name, handler)));
  return received;
}

function waitForTimeout(seconds, state) {
  let timer;
  const ms = Math.min(seconds * 1000, 2 ** 31 - 1); // setTimeout's limit (24 days)
  const expired = new Promise((resolve) => (timer = setTimeout(() => resolve({ timedOut: true }), ms)));
  state.cleanups.push(() => clearTimeout(timer));
  return expired;
}

/**
 * Resolves when the command has written nothing to stdout or stderr for `seconds` (0: never). A test run that
 * prints nothing for that long is taken to be hung; the lab is then asked why (scripts/lab/hang.js) and stopped.
 */
function waitForStall(seconds, state) {
  if (!seconds) return new Promise(() => {});
  let timer;
  const stalled = new Promise((resolve) => {
    timer = setInterval(() => {
      if (state.startedAt && performance.now() - state.lastOutput >= seconds * 1000) resolve({ stalled: true });
    }, 1000);
  });
  state.cleanups.push(() => clearInterval(timer));
  return stalled;
}

function saveConsoleLog(state, logDir, report = []) {
  fs.mkdirSync(logDir, { recursive: true });
  const file = path.join(logDir, `console-${new Date().toISOString().replaceAll(':', '-')}-${process.pid}.log`);
  const hang = report.length > 0 ? ['', '== what the hung lab was doing (scripts/lab/hang.js)', ...report] : [];
  fs.writeFileSync(file, [...state.consoleTail, ...hang].join('\n') + '\n');
  const old = fs.readdirSync(logDir).sort().reverse().slice(KEPT_CONSOLE_LOGS);
  for (const name of old) fs.rmSync(path.join(logDir, name), { force: true });
  return file;
}

/** Turns how the run ended into the command's exit status, or a LabError saying what went wrong. */
function interpret(outcome, state, options) {
  if ('status' in outcome && Number.isInteger(outcome.status)) return outcome.status;
  if (outcome.timedOut || outcome.stalled) {
    const why = outcome.timedOut
      ? `timed out after ${options.timeoutSeconds} s`
      : `the command wrote nothing for ${options.stallSeconds} s (--stall)`;
    const log = saveConsoleLog(state, options.logDir, outcome.report);
    throw new LabError(EXIT.timeout, `${why}; the lab VM was stopped (its console and what it was doing: ${log})`);
  }
  if (outcome.signal) {
    throw new LabError(
      128 + os.constants.signals[outcome.signal],
      `interrupted by ${outcome.signal}; the lab VM was stopped`,
    );
  }
  if (outcome.spawnError) throw new LabError(EXIT.qemuFailed, `cannot start ${QEMU}: ${outcome.spawnError.message}`);
  const log = ` (console log: ${saveConsoleLog(state, options.logDir)})`;
  if (state.panic) throw new LabError(EXIT.kernelPanic, `the lab kernel panicked: ${state.panic}${log}`);
  if (state.failure) {
    const [kind, ...rest] = state.failure.split(' ');
    if (NO_KVM_FAILURES.has(kind))
      throw new LabError(EXIT.noKvm, `/dev/kvm is missing inside the lab: ${rest.join(' ')}${log}`);
    throw new LabError(EXIT.vmStopped, `the lab failed to boot: ${rest.join(' ')}${log}`);
  }
  if (state.consoleTail.length === 0 && state.qemuErrors.length > 0) {
    throw new LabError(EXIT.qemuFailed, `QEMU failed to start: ${state.qemuErrors[0]}`);
  }
  const qemuSaid = state.qemuErrors.length > 0 ? `; QEMU said: ${state.qemuErrors.at(-1)}` : '';
  throw new LabError(
    EXIT.vmStopped,
    `the lab VM stopped before the command finished (QEMU exit ${outcome.qemuExit ?? 'unknown'}${qemuSaid})${log}`,
  );
}

/**
 * Boots the lab, streams the command's output to our stdout and stderr, and returns its exit status.
 * QEMU is stopped on every path out of here.
 */
export async function runInLab(options) {
  const { run, nonce, verbose, timeoutSeconds, stallSeconds } = options;
  const state = {
    consoleTail: [],
    qemuErrors: [],
    failure: null,
    panic: null,
    startedAt: null,
    alarmLines: 0,
    lastOutput: performance.now(),
    lastConsoleLine: 0,
    dumpLines: null,
    cleanups: [],
  };
  const onData = () => (state.lastOutput = performance.now());
  const stdout = await openChannel(run.stdoutSocket, `SMOL-LAB-EXIT-${nonce}=`, process.stdout, onData);
  const stderr = await openChannel(run.stderrSocket, `SMOL-LAB-END-${nonce}`, process.stderr, onData);
  const bootStart = performance.now();
  const qemu = spawnQemu(qemuArgs(options));
  let monitor = null;
  let over = false;
  try {
    const monitorReady = openMonitor(run.monitorSocket).then((opened) => {
      if (over) return void opened?.close(); // QEMU ended before its monitor was reached
      monitor = opened;
      if (opened) state.cleanups.push(startKeepalive(opened), () => opened.close());
    });
    watchConsole(qemu.child.stdout, nonce, state, verbose, bootStart);
    watchQemuStderr(qemu.child.stderr, state, verbose);
    const finished = Promise.all([stdout.ended, stderr.ended]).then(([status]) => ({ status: Number(status) }));
    const outcome = await Promise.race([
      finished,
      qemu.exited,
      waitForSignal(state),
      waitForTimeout(timeoutSeconds, state),
      waitForStall(stallSeconds, state),
    ]);
    if (outcome.timedOut || outcome.stalled) {
      progress(
        outcome.timedOut
          ? 'timed out; asking the lab what it was doing…'
          : `no output for ${stallSeconds} s; asking the lab what it was doing…`,
      );
      await monitorReady;
      outcome.report = await diagnoseHang(monitor, state);
    }
    if (verbose && state.startedAt) progress(`booted in ${((state.startedAt - bootStart) / 1000).toFixed(1)} s`);
    return interpret(outcome, state, options);
  } finally {
    over = true;
    state.cleanups.forEach((cleanup) => cleanup());
    await stopQemu(qemu);
    process.off('exit', qemu.killOnExit);
    stdout.close();
    stderr.close();
  }
}
