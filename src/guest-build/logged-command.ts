// Runs a build command with its output appended to a log file and handed over line by line; a failure names the
// command, its status, the last lines it printed and the log that has the rest.
import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';

export interface LoggedCommandOptions {
  cwd: string;
  log: string;
  env?: NodeJS.ProcessEnv;
  onLine?: (line: string) => void;
  signal?: AbortSignal;
  /**
   * Runs the command in a process group of its own and ends the whole group on abort (SIGTERM, then SIGKILL if it is
   * still there after GROUP_KILL_MS): mmdebstrap answers SIGTERM by waiting for its worker to finish the build.
   */
  processGroup?: boolean;
}

const GROUP_KILL_MS = 10_000;

/** Signals a process group, which may be gone already. */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: nothing left in it
  }
}

const TAIL_LINES = 15;

export class CommandFailedError extends Error {
  constructor(
    message: string,
    readonly tail: string[],
  ) {
    super(message);
    this.name = 'CommandFailedError';
  }
}

export function runLogged(command: string, args: string[], options: LoggedCommandOptions): Promise<void> {
  const shown = [command, ...args].join(' ');
  appendFileSync(options.log, `$ ${shown}\n`);
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) return reject(new Error('interrupted'));
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: options.processGroup ?? false,
    });
    const tail: string[] = [];
    let partial = { stdout: '', stderr: '' };
    const take = (stream: 'stdout' | 'stderr', chunk: Buffer) => {
      appendFileSync(options.log, chunk);
      const lines = (partial[stream] + chunk.toString('utf8')).split('\n');
      partial = { ...partial, [stream]: lines.pop() ?? '' };
      for (const line of lines) {
        tail.push(line);
        if (tail.length > TAIL_LINES) tail.shift();
        options.onLine?.(line);
      }
    };
    child.stdout.on('data', (chunk: Buffer) => take('stdout', chunk));
    child.stderr.on('data', (chunk: Buffer) => take('stderr', chunk));
    const group = options.processGroup ? child.pid : undefined;
    let killTimer: NodeJS.Timeout | undefined;
    const abort = () => {
      if (group === undefined) return void child.kill('SIGTERM');
      signalGroup(group, 'SIGTERM');
      killTimer = setTimeout(() => signalGroup(group, 'SIGKILL'), GROUP_KILL_MS);
    };
    options.signal?.addEventListener('abort', abort, { once: true });
    child.on('error', (err) => {
      options.signal?.removeEventListener('abort', abort);
      reject(new Error(`cannot run ${command}: ${err.message}`));
    });
    child.on('close', (status, signal) => {
      options.signal?.removeEventListener('abort', abort);
      clearTimeout(killTimer);
      // Whatever of an aborted group outlived its leader goes too.
      if (group !== undefined && options.signal?.aborted) signalGroup(group, 'SIGKILL');
      for (const rest of [partial.stdout, partial.stderr]) if (rest) tail.push(rest);
      if (options.signal?.aborted) return reject(new Error('interrupted'));
      if (status === 0) return resolve();
      const how = signal ? `was killed by ${signal}` : `failed with status ${status}`;
      const lines = tail.slice(-TAIL_LINES);
      const shownTail = lines.length > 0 ? `; its last lines:\n${lines.map((l) => `  ${l}`).join('\n')}\n` : '; ';
      reject(new CommandFailedError(`${shown} ${how}${shownTail}full log: ${options.log}`, lines));
    });
  });
}
