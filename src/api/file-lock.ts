// A lock beside a small file that several processes read, change and write back (the engines file: `smol engine
// add` in a shell while the app adds one through the engine). Without it, two such writers each write what they read
// plus their own change, and the one that writes last drops the other's. The lock is FILE.lock, made with O_EXCL and
// holding its owner's pid, as git's index.lock: a lock whose owner is gone (killed before it removed it) is taken
// over; one held by a living process is waited for, briefly, as these critical sections last a millisecond.
import { closeSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';

const WAIT_MS = 5_000;
const STALE_MS = 30_000;
const pause = new Int32Array(new SharedArrayBuffer(4));

function ownerAlive(lock: string): boolean {
  let pid = NaN;
  try {
    pid = Number(readFileSync(lock, 'utf8').trim());
    if (Date.now() - statSync(lock).mtimeMs > STALE_MS) return false;
  } catch {
    return true; // gone or being written this instant: try again
  }
  if (!Number.isInteger(pid) || pid <= 0) return true; // its owner has not written its pid yet
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs `fn` holding `FILE.lock`; throws naming the lock and its owner if it cannot be had within 5 s. */
export function withFileLockSync<T>(file: string, fn: () => T): T {
  const lock = `${file}.lock`;
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    let fd: number;
    try {
      fd = openSync(lock, 'wx', 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      if (!ownerAlive(lock)) {
        rmSync(lock, { force: true });
        continue;
      }
      if (Date.now() > deadline) {
        let owner = 'another process';
        try {
          owner = `process ${readFileSync(lock, 'utf8').trim()}`;
        } catch {
          /* it went meanwhile */
        }
        throw new Error(`${file} is being changed by ${owner} (${lock}); try again, or remove ${lock} if it is not`);
      }
      Atomics.wait(pause, 0, 0, 5);
      continue;
    }
    try {
      writeSync(fd, `${process.pid}\n`);
    } finally {
      closeSync(fd);
    }
    try {
      return fn();
    } finally {
      rmSync(lock, { force: true });
    }
  }
}
