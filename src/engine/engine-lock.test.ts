// The engine's data-dir lock (docs/engine.md, "Processes"): one engine per SMOL_HOME, and a lock left by an engine
// that died (even one still a zombie) is taken over. Real processes, real files.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pidAlive, takeLock } from './engine-process.js';

const dirs: string[] = [];
function lockFile(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'smol-lock-'));
  dirs.push(dir);
  return path.join(dir, 'engine.lock');
}
afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A pid that belonged to a process which has exited and been reaped. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

describe('the engine lock', () => {
  it('is taken when free, refused while its holder lives, and released', async () => {
    const file = lockFile();
    const first = takeLock(file);
    expect(first.ok).toBe(true);
    expect(readFileSync(file, 'utf8').trim()).toBe(String(process.pid));
    if (first.ok) first.release();
    expect(existsSync(file)).toBe(false);
    const other = spawn('sleep', ['60']);
    await new Promise((resolve) => other.once('spawn', resolve));
    try {
      writeFileSync(file, `${other.pid}\n`);
      expect(takeLock(file)).toEqual({ ok: false, holder: other.pid });
    } finally {
      other.kill('SIGKILL');
    }
  });

  it('takes over a lock that names this very process (a restarted container reuses pids)', () => {
    const file = lockFile();
    writeFileSync(file, `${process.pid}\n`);
    expect(takeLock(file).ok).toBe(true);
  });

  it('takes over a lock whose engine is gone', () => {
    const file = lockFile();
    writeFileSync(file, `${deadPid()}\n`);
    const taken = takeLock(file);
    expect(taken.ok).toBe(true);
    expect(readFileSync(file, 'utf8').trim()).toBe(String(process.pid));
  });

  it('counts a killed engine that nobody has reaped yet as gone', async () => {
    const child = spawn('sleep', ['60']);
    await new Promise((resolve) => child.once('spawn', resolve));
    const pid = child.pid!;
    expect(pidAlive(pid)).toBe(true);
    // Not reaped until Node sees the exit: kill it and read its state at once, while it is still a zombie.
    process.kill(pid, 'SIGKILL');
    spawnSync('sleep', ['0.2']); // blocks the event loop, so Node cannot reap it meanwhile
    expect(readFileSync(`/proc/${pid}/stat`, 'latin1')).toMatch(/\) Z /);
    expect(pidAlive(pid)).toBe(false);
    const file = lockFile();
    writeFileSync(file, `${pid}\n`);
    expect(takeLock(file).ok).toBe(true);
  });
});
