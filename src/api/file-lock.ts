// A lock beside a small file that several processes read, change and write back (the engines file: `smol engine
// add` in a shell while the app adds one through the engine). Without it, two such writers each write what they read
// plus their own change, and the one that writes last drops the other's. The lock is FILE.lock, the engine's own
// pid lock (takeLock: O_EXCL, its owner's pid, a dead owner's lock taken over under a guard); one held by a living
// process is waited for, briefly, as these critical sections last a millisecond.
import { takeLock } from '../engine/pid-lock.js';

const WAIT_MS = 5_000;
const pause = new Int32Array(new SharedArrayBuffer(4));

/** Runs `fn` holding `FILE.lock`; throws naming the lock and its owner if it cannot be had within 5 s. */
export function withFileLockSync<T>(file: string, fn: () => T): T {
  const lock = `${file}.lock`;
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const taken = takeLock(lock);
    if (taken.ok) {
      try {
        return fn();
      } finally {
        taken.release();
      }
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${file} is being changed by process ${taken.holder} (${lock}); try again, or remove ${lock} if it is not`,
      );
    }
    Atomics.wait(pause, 0, 0, 5);
  }
}
