import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SERVE_TOKEN_FILE, ServeIdentity } from './serve-identity.js';

describe('the token and port that smol serve keeps across engines', () => {
  let home: string;
  const log: string[] = [];
  const identity = () => new ServeIdentity({ home, log: (line) => log.push(line) });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it('keeps one token in SMOL_HOME/serve-token, readable by its owner only, until it is rotated', () => {
    home = mkdtempSync(path.join(tmpdir(), 'smol-serve-id-'));
    const token = identity().token;
    expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    const file = path.join(home, SERVE_TOKEN_FILE);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(identity().token).toBe(token); // the next engine's
    const rotated = identity().rotate();
    expect(rotated).not.toBe(token);
    expect(identity().token).toBe(rotated);
    expect(readFileSync(file, 'utf8').trim()).toBe(rotated);
  });

  it('replaces a token file others could read, or one that holds no token', () => {
    home = mkdtempSync(path.join(tmpdir(), 'smol-serve-id-'));
    const file = path.join(home, SERVE_TOKEN_FILE);
    const token = identity().token;
    chmodSync(file, 0o644);
    const replaced = identity().token;
    expect(replaced).not.toBe(token);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(log.at(-1)).toMatch(/had mode 644: a new token/);
    writeFileSync(file, 'short\n', { mode: 0o600 });
    expect(identity().token).not.toBe('short');
    expect(log.at(-1)).toMatch(/holds no token/);
  });

  it('remembers the port each host address was served on', () => {
    home = mkdtempSync(path.join(tmpdir(), 'smol-serve-id-'));
    expect(identity().preferredPort('127.0.0.1')).toBeNull();
    identity().remember('127.0.0.1', 41235);
    identity().remember('0.0.0.0', 8080);
    expect(identity().preferredPort('127.0.0.1')).toBe(41235);
    expect(identity().preferredPort('0.0.0.0')).toBe(8080);
    writeFileSync(path.join(home, 'serve.json'), '{ not json');
    expect(identity().preferredPort('127.0.0.1')).toBeNull();
  });
});
