// The engines file (src/api/client-config.ts) with several writers at once: each change is made to the file as it is
// under its lock, so none is lost (before the lock, the last of two writers dropped the other's engines).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ClientConfig } from './client-config.js';
import { withFileLockSync } from './file-lock.js';

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'smol-client-config-'));
  file = path.join(dir, 'config', 'engines.json');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A process that loads the file once, as the engine does, and then adds `count` engines and pins to it. */
function writer(name: string, count: number): Promise<number | null> {
  // The built module (npm run build:ts), as the CLI and the engine run it.
  const module = path.join(__dirname, '..', '..', 'dist', 'src', 'api', 'client-config.js');
  const script = `
    const { ClientConfig } = await import(${JSON.stringify(module)});
    const config = ClientConfig.load(${JSON.stringify(file)});
    for (let i = 0; i < ${count}; i++) {
      config.addEngine('${name}-' + i, 'https://${name}-' + i + '.test:7000', 't');
      config.set('${name}-' + i + '.test:7000', 'AB:CD');
    }`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return new Promise((resolve) => child.on('exit', (code) => resolve(code)));
}

describe('the engines file', () => {
  it('keeps every engine and pin that four processes add at once', async () => {
    const codes = await Promise.all(['a', 'b', 'c', 'd'].map((name) => writer(name, 25)));
    expect(codes).toEqual([0, 0, 0, 0]);
    const config = ClientConfig.load(file);
    expect(Object.keys(config.engines)).toHaveLength(100);
    for (const name of ['a', 'b', 'c', 'd'])
      for (let i = 0; i < 25; i++) expect(config.get(`${name}-${i}.test:7000`)?.fingerprint).toBe('AB:CD');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(existsSync(`${file}.lock`)).toBe(false);
  }, 60_000);

  it('applies a change to what another process wrote since this one read the file', () => {
    const engine = ClientConfig.load(file);
    ClientConfig.load(file).addEngine('from-the-cli', 'https://cli.test:7000', 't1');
    engine.addEngine('from-the-app', 'https://app.test:7000', 't2');
    expect(Object.keys(ClientConfig.load(file).engines).sort()).toEqual(['from-the-app', 'from-the-cli']);
    expect(engine.removeEngine('from-the-cli')).toBe(true);
    expect(Object.keys(ClientConfig.load(file).engines)).toEqual(['from-the-app']);
    expect(engine.removeEngine('from-the-cli')).toBe(false);
  });

  it('takes over a lock whose process is gone, and names the one that holds it when it lives', () => {
    ClientConfig.load(file).addEngine('one', 'https://one.test:7000', 't');
    writeFileSync(`${file}.lock`, '999999999\n'); // no such pid
    ClientConfig.load(file).addEngine('two', 'https://two.test:7000', 't');
    expect(Object.keys(ClientConfig.load(file).engines).sort()).toEqual(['one', 'two']);

    writeFileSync(`${file}.lock`, `${process.ppid}\n`); // alive: waited for, then refused
    expect(() => ClientConfig.load(file).addEngine('three', 'https://three.test:7000', 't')).toThrow(
      `${file} is being changed by process ${process.ppid} (${file}.lock); try again, or remove ${file}.lock if it is not`,
    );
    expect(Object.keys(ClientConfig.load(file).engines).sort()).toEqual(['one', 'two']);
    expect(readFileSync(`${file}.lock`, 'utf8')).toBe(`${process.ppid}\n`);
  }, 20_000);

  it('releases the lock when the change throws', () => {
    const target = path.join(dir, 'x.json');
    expect(() =>
      withFileLockSync(target, () => {
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(existsSync(`${target}.lock`)).toBe(false);
  });
});
