// Files that are either wholly old or wholly new after a crash: written beside their final name, flushed, renamed
// over it, and the directory flushed so the rename itself survives a power cut (docs/engine.md, "Snapshot store");
// and what to do with what a crash leaves: temporaries removed, unreadable files moved aside.
import { randomBytes } from 'node:crypto';
import { existsSync, renameSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import path from 'node:path';

/** Temporary files are `<name>.tmp-<pid>-<random>`; one left by a crash is garbage (see isAtomicTempFile). */
const TEMP_MARK = '.tmp-';

/** Writes `file` atomically: `file.tmp-<pid>-<random>`, fsync, rename over `file`, fsync the directory. */
export async function writeFileAtomic(file: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${file}${TEMP_MARK}${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    const handle = await open(tmp, 'wx', 0o644);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, file);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
  await syncDirectory(path.dirname(file));
}

/** Flushes a directory's entries (a rename, create or unlink in it) to disk. */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Whether a file name is one of writeFileAtomic's temporaries (left behind only when the process died mid-write). */
export function isAtomicTempFile(name: string): boolean {
  return /\.tmp-\d+-[0-9a-f]+$/.test(name);
}

/** Renames a file or directory that cannot be read to `<path>.corrupt` (or `.corrupt-2`, …): kept for a person. */
export function moveAside(file: string): string {
  for (let n = 1; ; n++) {
    const target = `${file}.corrupt${n === 1 ? '' : `-${n}`}`;
    if (existsSync(target)) continue;
    renameSync(file, target);
    return target;
  }
}
