// Finding the engine of a data dir, and starting it when nothing answers (docs/engine.md, "Processes"); or a remote
// engine by its URL and a token, or by the name it was added under (docs/remote.md, "Connecting").
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ApiClient, ApiClientError } from '../../src/api/api-client.js';
import { ClientConfig, pinKey } from '../../src/api/client-config.js';
import type { PinStore } from '../../src/api/pinned-tls.js';
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
  /**
   * A remote engine instead: its URL (`https://host:port`, as smol serve prints it; a `?token=` in it is taken as
   * the token) or the name it was added under (`smol engine add`). `$SMOL_ENGINE` when neither this nor `home` is
   * given.
   */
  engine?: string;
  /** The same as `engine`, for a URL. */
  url?: string;
  /** The remote engine's token (else the URL's `?token=`, the added engine's, or `$SMOL_TOKEN`). */
  token?: string;
  /** Its certificate's SHA-256 fingerprint: only that certificate is accepted. */
  fingerprint?: string;
  /** Else the pins trusted on first use: the client's engines file (client-config.ts) unless another is given. */
  pins?: PinStore;
}

/** A client of a remote engine, checked to answer: a wrong token or a changed certificate is refused here. */
async function connectRemote(options: ConnectOptions, ref: string): Promise<ApiClient> {
  const config = options.pins === undefined || !/^https?:\/\//.test(ref) ? ClientConfig.load() : null;
  let url: URL;
  let token = options.token;
  let name: string | undefined;
  if (/^https?:\/\//.test(ref)) {
    url = new URL(ref);
    token ??= url.searchParams.get('token') ?? process.env.SMOL_TOKEN;
  } else {
    const added = config?.engines[ref];
    if (!added) {
      throw new Error(
        `no engine named ${ref} (smol engine ls lists them; smol engine add ${ref} URL --token T adds it)`,
      );
    }
    name = ref;
    url = new URL(added.url);
    token ??= added.token;
  }
  url.search = '';
  url.pathname = '/';
  if (!token) throw new Error(`no token for the engine at ${url.origin} (--token, ?token= in the URL, or SMOL_TOKEN)`);
  const client = new ApiClient({
    url: url.toString(),
    token,
    fingerprint: options.fingerprint ?? null,
    pins: options.pins ?? config,
    trustName: name ?? pinKey(url.toString()),
  });
  try {
    await client.call('health');
  } catch (error) {
    client.close();
    const why =
      error instanceof ApiClientError && error.status === 401
        ? `refused the token: ${error.message}`
        : (error as Error).message;
    throw Object.assign(new Error(`the engine at ${url.origin}${name ? ` (${name})` : ''}: ${why}`), {
      code: (error as { code?: string }).code,
      status: error instanceof ApiClientError ? error.status : undefined,
    });
  }
  return client;
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
  const remote =
    options.url ?? options.engine ?? (options.home === undefined ? process.env.SMOL_ENGINE || undefined : undefined);
  if (remote) return connectRemote(options, remote);
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
