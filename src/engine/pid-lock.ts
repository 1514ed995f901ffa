// A lock file holding its owner's pid (the data dir's engine lock, FILE.lock beside the engines file, the making of the
// data dir's certificate): created with O_EXCL; a dead owner's lock is taken over under a guard.
import { closeSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { pidAlive } from '../pid-alive.js';

/**
 * Takes the data dir's lock: a file created with O_EXCL holding our pid. A lock whose process is gone is taken
 * over; one held by a live process means another engine serves this data dir (returns its pid). Taking over is
 * itself guarded by an O_EXCL file, so two starters that both find a stale lock cannot both end up holding it.
 */
export function takeLock(lockFile: string): { ok: true; release: () => void } | { ok: false; holder: number } {
  const guard = `${lockFile}.takeover`;
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      const fd = openSync(lockFile, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return {
        ok: true,
        release: () => {
          try {
            if (Number(readFileSync(lockFile, 'utf8')) === process.pid) unlinkSync(lockFile);
          } catch {
            // already gone
          }
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    // Our own pid in it is stale too: a container's engine is often pid 1 after every restart.
    const holder = readPid(lockFile);
    if (holder !== null && holder !== process.pid && pidAlive(holder)) return { ok: false, holder };
    // Stale (its engine died), or removed since our open: remove it under the guard, then try again.
    try {
      const fd = openSync(guard, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const guardHolder = readPid(guard);
      if (guardHolder !== null && !pidAlive(guardHolder)) rmQuiet(guard); // its starter died mid-takeover
      sleepSync(20);
      continue;
    }
    try {
      const again = readPid(lockFile);
      // No pid in it: a starter between its create and its write, or one that died there (then the file ages).
      if (again === null ? ageMs(lockFile) > 2000 : again === process.pid || !pidAlive(again)) rmQuiet(lockFile);
    } finally {
      rmQuiet(guard);
    }
  }
  throw new Error(`cannot take the engine lock ${lockFile}`);
}

function readPid(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function ageMs(file: string): number {
  try {
    return Date.now() - statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

function rmQuiet(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // gone already
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
