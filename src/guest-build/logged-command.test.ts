import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runLogged } from './logged-command.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'smol-logged-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('build commands', () => {
  it('hand over their output line by line and keep all of it in the log', async () => {
    const log = path.join(dir, 'ok.log');
    const lines: string[] = [];
    await runLogged('sh', ['-c', 'echo "  CC      kernel/fork.o"; echo done'], {
      cwd: dir,
      log,
      onLine: (l) => lines.push(l),
    });
    expect(lines).toEqual(['  CC      kernel/fork.o', 'done']);
    expect(readFileSync(log, 'utf8')).toContain('  CC      kernel/fork.o\ndone\n');
  });

  it('a failure names the command, its status, its last lines and the log', async () => {
    const log = path.join(dir, 'fail.log');
    const run = runLogged('sh', ['-c', 'echo building; echo "error: no rule" >&2; exit 3'], { cwd: dir, log });
    await expect(run).rejects.toThrow(
      `sh -c echo building; echo "error: no rule" >&2; exit 3 failed with status 3; its last lines:\n` +
        `  building\n  error: no rule\nfull log: ${log}`,
    );
  });

  it('an abort stops the command', async () => {
    const abort = new AbortController();
    const run = runLogged('sleep', ['30'], { cwd: dir, log: path.join(dir, 'abort.log'), signal: abort.signal });
    setTimeout(() => abort.abort(), 50);
    await expect(run).rejects.toThrow('interrupted');
  });

  it('an abort of a command run as a process group stops its children too', async () => {
    const abort = new AbortController();
    const pids: number[] = [];
    // The shell waits for both; SIGTERM to the shell alone would leave them running.
    const script = `sleep 30 & echo $!; sh -c 'echo $$; while :; do sleep 1; done' & wait`;
    const run = runLogged('sh', ['-c', script], {
      cwd: dir,
      log: path.join(dir, 'group.log'),
      signal: abort.signal,
      processGroup: true,
      onLine: (line) => {
        pids.push(Number(line));
        if (pids.length === 2) abort.abort();
      },
    });
    await expect(run).rejects.toThrow('interrupted');
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    await expect.poll(() => pids.filter(alive), { timeout: 5_000 }).toEqual([]);
  });
});
