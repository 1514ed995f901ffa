// Finding the engine of a data dir, and starting it when nothing answers (docs/engine.md, "Processes").
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ApiClient } from '../../src/api/api-client.js';
import type { Health } from '../../src/api/schema.js';
import { enginePaths } from '../../src/engine/engine-paths.js';
import { packageRoot } from '../../src/package-root.js';
import { smolHomeDir } from '../../src/smol-dirs.js';

export interface ConnectOptions {
  /** The data dir; `$SMOL_HOME` or the default when omitted. */
  home?: string;
  /** Start the engine when none answers (default true). */
  start?: boolean;
  /** How long to wait for a starting engine (default 60 s: a slow machine takes a while to load Node). */
  timeoutMs?: number;
}

async function health(client: ApiClient): Promise<Health | null> {
  try {
    return await client.call('health');
  } catch {
    return null;
  }
}

/** A client of the data dir's engine, started in the background first when none runs. */
export async function connectEngine(options: ConnectOptions = {}): Promise<ApiClient> {
  const home = path.resolve(options.home ?? smolHomeDir());
  const paths = enginePaths(home);
  const client = new ApiClient({ socketPath: paths.socket });
  if (await health(client)) return client;
  if (options.start === false) throw new Error(`no engine is running for ${home} (start one with: smol engine)`);
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const log = openSync(paths.log, 'a');
  const child = spawn(process.execPath, [path.join(packageRoot, 'bin', 'smol.js'), 'engine', '--home', home], {
    detached: true,
    stdio: ['ignore', log, log],
    env: { ...process.env, SMOL_HOME: home },
  });
  closeSync(log);
  let exited: string | null = null;
  child.once('exit', (code, signal) => (exited = signal ? `signal ${signal}` : `exit code ${code}`));
  child.unref();
  const timeoutMs = options.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await health(client)) return client;
    // Another client's engine may have won the lock (exit code 3): it answers soon.
    if (exited && exited !== 'exit code 3') {
      // Its last words (the CLI's `smol: …` line) say why, e.g. a store it refuses to start on.
      const why = lastLine(paths.log, /^smol: (.*)$/);
      throw new Error(`the engine for ${home} failed to start (${why ?? exited}); see ${paths.log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const holder = exited === 'exit code 3' ? lockHolder(paths.lock) : null;
  throw new Error(
    `the engine for ${home} did not answer within ${timeoutMs / 1000} s` +
      (holder ? `; the engine lock names pid ${holder}, which holds the data dir without answering` : '') +
      `; see ${paths.log}`,
  );
}

function lockHolder(lockFile: string): string | null {
  try {
    return readFileSync(lockFile, 'utf8').trim() || null;
  } catch {
    return null;
  }
}

function lastLine(file: string, pattern: RegExp): string | null {
  try {
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n').slice(-20).reverse();
    for (const line of lines) {
      const match = pattern.exec(line);
      if (match) return match[1]!;
    }
  } catch {
    // no log
  }
  return null;
}
