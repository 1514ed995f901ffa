// Removing a chroot tree safely. While mmdebstrap runs, the tree under the cache has the host's /proc, /sys, /dev/pts
// and a /dev/shm mounted in it; mmdebstrap unmounts them when it ends, but not when it is killed outright. A
// recursive delete that walked into one of them would delete the host's files (or fail half-way), so every mount at
// or under the tree is detached first, and the tree is left alone if one will not go.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import path from 'node:path';

/** A path as /proc/self/mountinfo writes it: space, tab, newline and backslash as octal escapes. */
function decodeMountPath(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** Mount points at or under `dir` (an absolute, canonical path) in mountinfo's text, deepest first. */
export function mountPointsUnder(mountinfo: string, dir: string): string[] {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  const points = new Set<string>();
  for (const line of mountinfo.split('\n')) {
    const field = line.split(' ')[4]; // id, parent id, major:minor, root, mount point, …
    if (field === undefined) continue;
    const point = decodeMountPath(field);
    if (point === dir || point.startsWith(prefix)) points.add(point);
  }
  // Deepest first: /x/tree/dev/pts before /x/tree/dev. A later mount over the same point is listed once, so
  // unmounting repeats until none is left.
  return [...points].sort((a, b) => b.split('/').length - a.split('/').length || b.localeCompare(a));
}

const readMountinfo = () => readFileSync('/proc/self/mountinfo', 'utf8');

/** Detaches every file system mounted at or under `dir`; throws naming one that stays. */
export function unmountUnder(dir: string, mountinfo: () => string = readMountinfo): void {
  if (!existsSync(dir)) return;
  const real = realpathSync(dir);
  for (let round = 0; round < 8; round++) {
    const points = mountPointsUnder(mountinfo(), real);
    if (points.length === 0) return;
    // --lazy: a process that still has a file open there (a hook left running) does not keep the mount in the tree.
    for (const point of points) spawnSync('umount', ['--lazy', point], { stdio: 'ignore' });
  }
  const left = mountPointsUnder(mountinfo(), real);
  if (left.length > 0) {
    throw new Error(`${left[0]} is still mounted; unmount it (umount -l ${left[0]}), then remove ${dir}`);
  }
}

/** Removes a chroot tree (or a directory holding one): its mounts first, then the files. */
export function removeChrootTree(dir: string): void {
  unmountUnder(dir);
  rmSync(path.resolve(dir), { recursive: true, force: true });
}
