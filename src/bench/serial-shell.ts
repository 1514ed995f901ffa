// A shell on a Linux guest's serial console, driven by typing: the Linux benchmarks (disk, net) run their phases
// through it on our VMM and on QEMU alike, so both are measured by the same commands.
import { spawn } from 'node:child_process';
import { withTimeout } from './vm-create.js';

/** A shell on a serial console: `feed` takes its output, `run` types a command and resolves with what it printed. */
export function serialShell(write: (text: string) => void, ended: Promise<never>, what: string, timeoutMs: number) {
  let text = '';
  let waiters: Array<() => void> = [];
  let marks = 0;
  const feed = (chunk: Buffer) => {
    text += chunk.toString('latin1');
    for (const waiter of [...waiters]) waiter();
  };
  const waitFor = (pattern: RegExp, from: number) =>
    withTimeout(
      Promise.race([
        ended,
        new Promise<RegExpExecArray>((resolve) => {
          const check = () => {
            const match = pattern.exec(text.slice(from));
            if (!match) return;
            waiters = waiters.filter((w) => w !== check);
            resolve(match);
          };
          waiters.push(check);
          check();
        }),
      ]),
      timeoutMs,
      `${what}: no ${pattern} within ${timeoutMs / 1000} s; output was:\n${text.slice(-2000)}`,
    );
  const run = async (command: string) => {
    // The marks are built by the shell, so the echo of the typed line never matches them.
    const n = ++marks;
    const from = text.length;
    write(`echo "<<$((${n})):begin>>"; ${command}; echo "<<$((${n})):end>>"\n`);
    const match = await waitFor(new RegExp(`<<${n}:begin>>\\r?\\n([\\s\\S]*?)<<${n}:end>>`), from);
    return match[1]!.replace(/\r\n/g, '\n');
  };
  return { feed, waitFor, run };
}

export type SerialShell = ReturnType<typeof serialShell>;

/** QEMU with its serial console on stdio as a SerialShell; `stop()` kills it and waits for it to end. */
export function qemuShell(
  binary: string,
  args: string[],
  timeoutMs: number,
  env: NodeJS.ProcessEnv = process.env,
): { shell: SerialShell; stop: () => Promise<void> } {
  const child = spawn(binary, args, { stdio: ['pipe', 'pipe', 'pipe'], env });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const ended = new Promise<never>((_, reject) => {
    child.on('error', (e) => reject(new Error(`cannot run ${binary}: ${e.message}`)));
    void closed.then(() => reject(new Error(`QEMU ended: ${stderr.trim() || 'no message'}`)));
  });
  ended.catch(() => {});
  const shell = serialShell((text) => child.stdin.write(text), ended, 'QEMU', timeoutMs);
  child.stdout.on('data', shell.feed);
  const stop = async () => {
    child.kill('SIGKILL');
    await closed;
  };
  return { shell, stop };
}
