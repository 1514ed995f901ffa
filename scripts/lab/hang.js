// QEMU's monitor, for two things (docs/lab.md, "Known problems"):
// - the keep-alive: a key press on the emulated PS/2 keyboard every second. Under TCG the lab kernel now and then
//   loses its local APIC timer interrupt while idle, and then sleeps until some other interrupt comes: for minutes
//   when the command waits on a timer alone. The key's interrupt wakes it; the keyboard has no other user.
// - what a run that hung was doing, asked before it is stopped: the lab vCPUs' state, then the lab kernel's own
//   account through SysRq (blocked tasks, a backtrace of every CPU, every task's kernel stack) on the serial console.
//   init.sh enables every SysRq function; the keys go through the same keyboard, so nothing inside the lab has to
//   be responsive for this to work.
import net from 'node:net';

const PROMPT = '(qemu) ';
const KEEPALIVE_MS = 1000;
const MONITOR_COMMANDS = ['info status', 'info registers -a'];
// 9: console log level 9, so that the dumps (KERN_INFO) reach a console booted with loglevel=1.
// w: tasks in uninterruptible sleep; l: a backtrace of every active CPU; t: every task with its kernel stack.
const SYSRQ_KEYS = ['9', 'w', 'l', 't'];
const QUIET_MS = 3000; // the console is done printing a dump when it has been quiet this long
const DUMP_LIMIT_MS = 60_000;

/** One HMP session over the monitor's Unix socket: `ask(command)` resolves with what QEMU printed for it. */
function connectMonitor(socketPath) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    let buffer = '';
    let waiting = null;
    const settle = () => {
      const end = buffer.indexOf(PROMPT);
      if (end < 0 || !waiting) return;
      const reply = buffer.slice(0, end);
      buffer = buffer.slice(end + PROMPT.length);
      const done = waiting;
      waiting = null;
      done(reply);
    };
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      buffer += chunk.replaceAll('\r', '');
      settle();
    });
    socket.once('error', reject);
    socket.on('error', () => {}); // once connected: QEMU went away, and a pending question times out
    // One command at a time: the keep-alive and a diagnosis share the session, and HMP answers in order.
    let queue = Promise.resolve();
    const ask = (command, timeoutMs = 10_000) => {
      const asked = queue.then(
        () =>
          new Promise((done, fail) => {
            const timer = setTimeout(() => {
              waiting = null;
              fail(new Error(`QEMU's monitor did not answer "${command}"`));
            }, timeoutMs);
            waiting = (reply) => {
              clearTimeout(timer);
              // HMP echoes the command as it is typed (with terminal redraws): the answer starts on the next line.
              done(command ? reply.slice(reply.indexOf('\n') + 1).trimEnd() : reply);
            };
            if (command) socket.write(`${command}\n`);
            settle();
          }),
      );
      queue = asked.catch(() => undefined);
      return asked;
    };
    // The banner, up to the first prompt, before any question.
    socket.once('connect', () => ask('').then(() => resolve({ ask, close: () => socket.destroy() }), reject));
  });
}

/** Connects to the monitor of a QEMU that is starting (its socket appears shortly after); null if it never does. */
export async function openMonitor(socketPath, { attempts = 100, delayMs = 100 } = {}) {
  for (let i = 0; i < attempts; i++) {
    try {
      return await connectMonitor(socketPath);
    } catch {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
  return null;
}

/** Presses Shift in the lab every second until the returned function is called. */
export function startKeepalive(monitor) {
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    const done = () => (busy = false);
    monitor.ask('sendkey shift').then(done, done);
  }, KEEPALIVE_MS);
  return () => clearInterval(timer);
}

/** Resolves once no console line has arrived for QUIET_MS, or after DUMP_LIMIT_MS. */
function consoleQuiet(state) {
  return new Promise((resolve) => {
    const started = performance.now();
    const check = setInterval(() => {
      const now = performance.now();
      if (now - state.lastConsoleLine >= QUIET_MS || now - started >= DUMP_LIMIT_MS) {
        clearInterval(check);
        resolve();
      }
    }, 250);
  });
}

/**
 * Asks the hung lab what it was doing. Returns the report's lines: the monitor's answers, then the console lines
 * the SysRq dumps produced. Never throws: a monitor that does not answer is itself part of the report.
 */
export async function diagnoseHang(monitor, state) {
  const report = [];
  try {
    if (!monitor) throw new Error('there is no connection to its monitor');
    for (const command of MONITOR_COMMANDS) report.push(`== (qemu) ${command}`, await monitor.ask(command));
    state.dumpLines = [];
    for (const key of SYSRQ_KEYS) {
      await monitor.ask(`sendkey alt-sysrq-${key}`);
      state.lastConsoleLine = performance.now();
      await consoleQuiet(state);
    }
    report.push('== the lab console during SysRq 9, w, l, t', ...state.dumpLines);
  } catch (error) {
    report.push(`== the lab could not be asked: ${error.message}`);
    if (state.dumpLines) report.push(...state.dumpLines);
  } finally {
    state.dumpLines = null;
  }
  return report;
}
