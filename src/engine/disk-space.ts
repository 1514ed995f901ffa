// Free space in SMOL_HOME and the reserve the engine keeps (docs/engine.md, "Disk reserve"). Below the reserve the
// engine refuses work that writes new snapshots (checkpoints, forks): a full file system would fail them halfway,
// and an episode that cannot checkpoint any more should be told why before it tries. The reserve is
// max(256 MiB, 2% of the file system) unless SMOL_DISK_RESERVE says otherwise: bytes (`536870912`), a size
// (`512MiB`, `2GiB`) or a share of the file system (`5%`); `0` turns it off.
import { statfsSync } from 'node:fs';

const MiB = 2 ** 20;
const DEFAULT_MIN = 256 * MiB;
const DEFAULT_SHARE = 0.02;

export interface DiskSpace {
  freeBytes: number;
  totalBytes: number;
  reserveBytes: number;
}

/** The reserve on a file system of `totalBytes`, as `setting` (SMOL_DISK_RESERVE) says; throws naming a bad one. */
export function diskReserve(totalBytes: number, setting = process.env.SMOL_DISK_RESERVE): number {
  if (setting === undefined || setting.trim() === '')
    return Math.max(DEFAULT_MIN, Math.floor(totalBytes * DEFAULT_SHARE));
  const match = /^\s*(\d+(?:\.\d+)?)\s*(%|B|KiB|MiB|GiB|TiB)?\s*$/i.exec(setting);
  if (!match) {
    throw new Error(
      `SMOL_DISK_RESERVE=${JSON.stringify(setting)} is not a size: give bytes, a size such as 512MiB or 2GiB, or a share such as 5%`,
    );
  }
  const value = Number(match[1]);
  const unit = (match[2] ?? 'B').toLowerCase();
  if (unit === '%') {
    if (value > 100) throw new Error(`SMOL_DISK_RESERVE=${setting} is more than the whole file system`);
    return Math.floor((totalBytes * value) / 100);
  }
  const scale = { b: 1, kib: 2 ** 10, mib: MiB, gib: 2 ** 30, tib: 2 ** 40 }[unit]!;
  return Math.floor(value * scale);
}

/** Free (for this user) and total bytes of the file system that holds `dir`, and the reserve kept on it. */
export function diskSpace(dir: string): DiskSpace {
  const { bavail, blocks, bsize } = statfsSync(dir);
  const totalBytes = blocks * bsize;
  return { freeBytes: bavail * bsize, totalBytes, reserveBytes: diskReserve(totalBytes) };
}

/** 1536 MiB, 12.5 GiB, 300 KiB: a size for a message. */
export function formatBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} bytes` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/** What to remove to make room, for messages. */
export const MAKE_ROOM =
  'remove snapshots (smol rm SNAPSHOT, then smol gc), episodes (smol rm EPISODE) or images (smol image rm)';

/**
 * Throws an ENOSPC error (HTTP 507) when `dir`'s file system has no more than the reserve free: `what` is refused,
 * and the message says how much is free, the reserve and what to remove.
 */
export function requireDiskReserve(dir: string, what: string): void {
  const { freeBytes, reserveBytes } = diskSpace(dir);
  if (reserveBytes === 0 || freeBytes > reserveBytes) return;
  const message =
    `no space left on device for ${what}: ${formatBytes(freeBytes)} free in ${dir}, at or below the ` +
    `${formatBytes(reserveBytes)} the engine keeps in reserve (SMOL_DISK_RESERVE); ${MAKE_ROOM}`;
  throw Object.assign(new Error(message), { code: 'ENOSPC' });
}

/**
 * Throws an ENOSPC error (HTTP 507) when writing `bytes` more into `dir`'s file system would leave no more than the
 * reserve free (or would not fit at all): `what` is refused before it writes anything, and the message names what it
 * needs, what is free, the reserve and what to remove. An image pull checks this before its downloads.
 */
export function requireRoomFor(dir: string, bytes: number, what: string): void {
  const { freeBytes, reserveBytes } = diskSpace(dir);
  if (freeBytes - bytes > reserveBytes) return;
  const message =
    `no space left on device for ${what}: it needs ${formatBytes(bytes)}, ${formatBytes(freeBytes)} free in ${dir}` +
    (reserveBytes > 0 ? `, and the engine keeps ${formatBytes(reserveBytes)} in reserve (SMOL_DISK_RESERVE)` : '') +
    `; ${MAKE_ROOM}, or smol image prune`;
  throw Object.assign(new Error(message), { code: 'ENOSPC' });
}
