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
    const abort = () => child.kill('SIGTERM');
    options.signal?.addEventListener('abort', abort, { once: true });
    child.on('error', (err) => {
      options.signal?.removeEventListener('abort', abort);
      reject(new Error(`cannot run ${command}: ${err.message}`));
    });
    child.on('close', (status, signal) => {
      options.signal?.removeEventListener('abort', abort);
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
