// Named tokens for the TCP listeners (docs/remote.md, "Tokens"): `smol token create NAME [--read-only]` makes one,
// shown once; the data dir keeps only its SHA-256 in SMOL_HOME/tokens.json (mode 0600), with its scope, when it was
// made and when it was last used. `smol token rm` revokes it at once: the next request with it gets 401 and every
// stream it opened is closed (the API server listens for `onRevoke`). The data dir's serve-token stays beside these
// as the local full token (serve-identity.ts).
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ApiFailure } from '../api/engine-api.js';
import type { CreatedToken, TokenInfo, TokenScope } from '../api/schema.js';
import { writePrivate } from './serve-identity.js';

export const TOKENS_FILE = 'tokens.json';

/** The form of a named token: `smol_` and 32 random bytes, base64url (so a leaked one is easy to search for). */
const PREFIX = 'smol_';
/** lastUsed is kept to the minute: a busy client does not rewrite the file on every request. */
const LAST_USED_GRAIN_MS = 60_000;

interface StoredToken extends TokenInfo {
  sha256: string;
}

const digest = (token: string) => createHash('sha256').update(token).digest('hex');

export class ApiTokens {
  readonly #file: string;
  /** By the hex SHA-256 of the secret: a lookup by the digest of a 256-bit random secret leaks nothing by its time. */
  readonly #byDigest = new Map<string, StoredToken>();
  readonly #revoked = new Set<(name: string) => void>();

  constructor(
    home: string,
    private readonly log: (line: string) => void,
  ) {
    this.#file = path.join(home, TOKENS_FILE);
    for (const token of this.#read()) this.#byDigest.set(token.sha256, token);
  }

  #read(): StoredToken[] {
    let text: string;
    try {
      text = readFileSync(this.#file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    try {
      const parsed = JSON.parse(text) as { tokens?: StoredToken[] };
      return (parsed.tokens ?? []).filter((t) => typeof t.sha256 === 'string' && typeof t.name === 'string');
    } catch (error) {
      // Refusing every named token is the safe reading of a file we cannot read; the serve-token still works.
      this.log(`engine: ${this.#file} does not parse (${(error as Error).message}): no named token is accepted`);
      return [];
    }
  }

  #write(): void {
    writePrivate(this.#file, `${JSON.stringify({ tokens: [...this.#byDigest.values()] }, null, 1)}\n`);
  }

  list(): TokenInfo[] {
    return [...this.#byDigest.values()]
      .map(({ name, scope, created, lastUsed }) => ({ name, scope, created, lastUsed }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  create(name: string, scope: TokenScope): CreatedToken {
    if (this.list().some((t) => t.name === name)) {
      throw new ApiFailure(409, `a token named ${name} exists (smol token rm ${name} first)`);
    }
    const token = `${PREFIX}${randomBytes(32).toString('base64url')}`;
    const stored: StoredToken = {
      name,
      scope,
      created: new Date().toISOString(),
      lastUsed: null,
      sha256: digest(token),
    };
    this.#byDigest.set(stored.sha256, stored);
    this.#write();
    this.log(`engine: token ${name} (${scope}) created`);
    const { sha256: _, ...info } = stored;
    return { ...info, token };
  }

  remove(name: string): void {
    const found = [...this.#byDigest.values()].find((t) => t.name === name);
    if (!found) throw new ApiFailure(404, `no token named ${name}`);
    this.#byDigest.delete(found.sha256);
    this.#write();
    this.log(`engine: token ${name} revoked`);
    for (const listener of this.#revoked) listener(name);
  }

  /** Who presents `token`: its name and scope, or null when it is not a named token of this data dir. */
  check(token: string): { name: string; scope: TokenScope } | null {
    if (!token.startsWith(PREFIX)) return null;
    const found = this.#byDigest.get(digest(token));
    if (!found) return null;
    const now = Date.now();
    if (found.lastUsed === null || now - Date.parse(found.lastUsed) >= LAST_USED_GRAIN_MS) {
      found.lastUsed = new Date(now).toISOString();
      try {
        this.#write();
      } catch (error) {
        this.log(`engine: cannot record when token ${found.name} was used: ${(error as Error).message}`);
      }
    }
    return { name: found.name, scope: found.scope };
  }

  /** Calls `listener` with a token's name when it is revoked; returns the unsubscribe. */
  onRevoke(listener: (name: string) => void): () => void {
    this.#revoked.add(listener);
    return () => this.#revoked.delete(listener);
  }
}
