// The client's own file of remote engines (docs/remote.md, "Connecting"): engines added by name (`smol engine add
// NAME URL --token T`) and the certificate fingerprints pinned on first use, by host:port, as SSH's known_hosts.
// `$SMOL_CLIENT_CONFIG`, else `$XDG_CONFIG_HOME/smol-studio/engines.json`, else `~/.config/smol-studio/engines.json`,
// mode 0600 (it holds tokens). The CLI and the TypeScript SDK share it; the Python SDK reads the same file.
import { mkdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writePrivate } from '../engine/serve-identity.js';
import { withFileLockSync } from './file-lock.js';
import type { PinStore } from './pinned-tls.js';

export interface RemoteEngine {
  url: string;
  token: string;
  added: string;
}

interface ConfigFile {
  engines: Record<string, RemoteEngine>;
  pins: Record<string, { fingerprint: string; since: string }>;
}

export function clientConfigFile(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SMOL_CLIENT_CONFIG) return path.resolve(env.SMOL_CLIENT_CONFIG);
  const xdg = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : undefined;
  return path.join(xdg ?? path.join(os.homedir(), '.config'), 'smol-studio', 'engines.json');
}

/** `host:port` of an engine URL (the default port filled in): what a pin is kept under. */
export function pinKey(url: string): string {
  const parsed = new URL(url);
  return `${parsed.hostname}:${parsed.port || (parsed.protocol === 'https:' ? '443' : '80')}`;
}

export class ClientConfig implements PinStore {
  private constructor(
    readonly file: string,
    private data: ConfigFile,
  ) {}

  static load(file = clientConfigFile()): ClientConfig {
    return new ClientConfig(file, ClientConfig.#read(file));
  }

  static #read(file: string): ConfigFile {
    try {
      const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<ConfigFile>;
      return { engines: parsed.engines ?? {}, pins: parsed.pins ?? {} };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new Error(`${file}: cannot read the engines file (${(error as Error).message})`);
      }
      return { engines: {}, pins: {} };
    }
  }

  /**
   * Applies `change` to the file as it is now, not as it was when this object read it, and writes it back, under the
   * file's lock: another process (the CLI, the engine for the app) may have added an engine or a pin meanwhile.
   */
  #update(change: (data: ConfigFile) => void): void {
    mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
    withFileLockSync(this.file, () => {
      const data = ClientConfig.#read(this.file);
      change(data);
      writePrivate(this.file, `${JSON.stringify(data, null, 2)}\n`);
      this.data = data;
    });
  }

  get engines(): Readonly<Record<string, RemoteEngine>> {
    return this.data.engines;
  }

  addEngine(name: string, url: string, token: string): void {
    const added = new Date().toISOString();
    this.#update((data) => {
      data.engines[name] = { url, token, added };
    });
  }

  removeEngine(name: string): boolean {
    let removed = false;
    this.#update((data) => {
      const engine = data.engines[name];
      if (!engine) return;
      delete data.engines[name];
      const key = pinKey(engine.url);
      // The pin goes too, unless another name reaches the same address.
      if (!Object.values(data.engines).some((e) => pinKey(e.url) === key)) delete data.pins[key];
      removed = true;
    });
    return removed;
  }

  get(where: string): { fingerprint: string; since: string } | null {
    return this.data.pins[where] ?? null;
  }

  set(where: string, fingerprint: string): void {
    const since = new Date().toISOString();
    this.#update((data) => {
      data.pins[where] = { fingerprint, since };
    });
  }

  forget(where: string): void {
    this.#update((data) => {
      delete data.pins[where];
    });
  }
}
