// Whether a process lives, for the engine's lock, stale cgroups, partial images' writers and the torture harness.
import { readFileSync } from 'node:fs';

/**
 * Whether `pid` is a live process. A zombie counts as gone: an engine killed with SIGKILL stays one until its
 * parent (often an init that reaps late, or never) collects it, and its lock must not outlive it that long.
 */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true; // no /proc: trust kill(0)
  }
}
