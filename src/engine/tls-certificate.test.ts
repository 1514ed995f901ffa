// The data dir's own certificate (docs/remote.md, "TLS") made once when several first `smol serve --tls` start at
// once: processes of the built module (dist/, as the engine runs it) race on one fresh data dir.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCertificate } from './tls-certificate.js';

const module = path.join(__dirname, '..', '..', 'dist', 'src', 'engine', 'tls-certificate.js');
const homes: string[] = [];
afterAll(() => homes.forEach((home) => rmSync(home, { recursive: true, force: true })));

/** One process asking (at the time `at`, in ms since the epoch) for the data dir's certificate: its fingerprint and whether it made it. */
async function ask(home: string, at = 0): Promise<{ fingerprint: string; made: boolean }> {
  // Each process loads the module, then waits for the common moment `at`, so that they ask together.
  const script = `const { dataDirCertificate } = await import(${JSON.stringify(module)});
    await new Promise((resolve) => setTimeout(resolve, ${at} - Date.now()));
    const c = await dataDirCertificate(${JSON.stringify(home)}, '127.0.0.1');
    console.log(JSON.stringify({ fingerprint: c.fingerprint, made: c.made }));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
  return JSON.parse(stdout) as { fingerprint: string; made: boolean };
}

describe("the data dir's certificate", () => {
  it('is made once when four processes ask at once, and all of them get it', async () => {
    const home = mkdtempSync(path.join(tmpdir(), 'smol-tls-'));
    homes.push(home);
    const at = Date.now() + 1500;
    const answers = await Promise.all([1, 2, 3, 4].map(() => ask(home, at)));
    expect(answers.filter((a) => a.made)).toHaveLength(1);
    expect(new Set(answers.map((a) => a.fingerprint)).size).toBe(1);
    const dir = path.join(home, 'tls');
    const kept = loadCertificate(path.join(dir, 'cert.pem'), path.join(dir, 'key.pem')); // the key is the cert's
    expect(kept.fingerprint).toBe(answers[0]!.fingerprint);
    expect(readdirSync(dir).sort()).toEqual(['cert.pem', 'key.pem']); // no lock, no temporary directory left
    expect(await ask(home)).toEqual({ fingerprint: kept.fingerprint, made: false });
  }, 60_000);
});
