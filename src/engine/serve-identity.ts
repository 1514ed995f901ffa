// What keeps a page of `smol serve` working across engine restarts (docs/engine.md, "API", and docs/security.md):
// the TCP listeners' token, kept in SMOL_HOME/serve-token (mode 0600) and the same for every engine of the data dir
// until `smol serve --rotate-token` replaces it, and the port each host address was last served on
// (SMOL_HOME/serve.json), which a listener asked for "any port" takes again when it is free. A page opened on the old
// engine's URL then finds the new engine at the same origin with the token it holds.
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';

/** 24 random bytes, base64url: 32 characters. */
const TOKEN_FORM = /^[A-Za-z0-9_-]{32,}$/;

export const SERVE_TOKEN_FILE = 'serve-token';
export const SERVE_PORTS_FILE = 'serve.json';

/** Writes `file` whole or not at all, readable by its owner only. */
export function writePrivate(file: string, text: string): void {
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(tmp, file);
  } catch (error) {
    rmSync(tmp, { force: true });
    throw error;
  }
}

export interface ServeIdentityOptions {
  home: string;
  log: (line: string) => void;
}

export class ServeIdentity {
  #token: string | null = null;
  readonly #tokenFile: string;
  readonly #portsFile: string;

  constructor(private readonly options: ServeIdentityOptions) {
    this.#tokenFile = path.join(options.home, SERVE_TOKEN_FILE);
    this.#portsFile = path.join(options.home, SERVE_PORTS_FILE);
  }

  /**
   * The data dir's token: read from serve-token, or made there on first use. A file others could read (group or
   * world bits in its mode) or that does not hold a token is replaced by a new one: its token may have been seen.
   */
  get token(): string {
    if (this.#token) return this.#token;
    let kept: string | null = null;
    try {
      const mode = statSync(this.#tokenFile).mode & 0o777;
      const text = readFileSync(this.#tokenFile, 'utf8').trim();
      if (mode & 0o077) this.options.log(`engine: ${this.#tokenFile} had mode ${mode.toString(8)}: a new token`);
      else if (!TOKEN_FORM.test(text)) this.options.log(`engine: ${this.#tokenFile} holds no token: a new one`);
      else kept = text;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    return (this.#token = kept ?? this.rotate());
  }

  /** A new token, written to serve-token: the old one opens nothing from now on (the caller updates listeners). */
  rotate(): string {
    const token = randomBytes(24).toString('base64url');
    writePrivate(this.#tokenFile, `${token}\n`);
    this.#token = token;
    return token;
  }

  #ports(): Record<string, number> {
    try {
      const parsed = JSON.parse(readFileSync(this.#portsFile, 'utf8')) as { ports?: unknown };
      const ports = parsed.ports && typeof parsed.ports === 'object' ? (parsed.ports as Record<string, unknown>) : {};
      return Object.fromEntries(
        Object.entries(ports).filter((e): e is [string, number] => Number.isInteger(e[1]) && (e[1] as number) > 0),
      );
    } catch {
      return {}; // none yet, or unreadable: any port, remembered anew
    }
  }

  /** The port `host` was last served on, if any. */
  preferredPort(host: string): number | null {
    return this.#ports()[host] ?? null;
  }

  remember(host: string, port: number): void {
    const ports = this.#ports();
    if (ports[host] === port) return;
    writePrivate(this.#portsFile, `${JSON.stringify({ ports: { ...ports, [host]: port } })}\n`);
  }
}
