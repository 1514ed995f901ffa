// Temporary build trees under the guest cache. Each records the pid of the build that owns it, so a later build can
// remove trees whose owner died without cleaning up (SIGKILL, OOM, power loss): a kernel tree is about 1.5 GB.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const OWNER_FILE = 'owner.pid';
/** A tree without an owner file is only that young while mkdtemp and the owner write are in flight. */
const UNOWNED_GRACE_MS = 60 * 60 * 1000;

export function createBuildDir(guestDir: string, prefix: string): string {
  const dir = mkdtempSync(path.join(guestDir, prefix));
  writeFileSync(path.join(dir, OWNER_FILE), `${process.pid}\n`);
  return dir;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by someone else
  }
}

function isAbandoned(dir: string, now: number): boolean {
  try {
    const pid = Number(readFileSync(path.join(dir, OWNER_FILE), 'utf8').trim());
    return !Number.isSafeInteger(pid) || pid <= 0 || !isAlive(pid);
  } catch {
    try {
      return now - statSync(dir).mtimeMs > UNOWNED_GRACE_MS;
    } catch {
      return false; // removed meanwhile
    }
  }
}

const removeTree = (dir: string) => rmSync(dir, { recursive: true, force: true });

/**
 * Removes `<prefix>*` trees whose build is no longer running; returns their names. `remove` does the removing: a
 * chroot tree (debian-image.ts) may still have file systems mounted in it, which must be unmounted first.
 */
export function removeAbandonedBuildDirs(
  guestDir: string,
  prefix: string,
  now = Date.now(),
  remove: (dir: string) => void = removeTree,
): string[] {
  const removed: string[] = [];
  for (const name of readdirSync(guestDir).filter((n) => n.startsWith(prefix))) {
    const dir = path.join(guestDir, name);
    if (!isAbandoned(dir, now)) continue;
    remove(dir);
    removed.push(name);
  }
  return removed;
}
