// Start-up recovery of SMOL_HOME/snapshots/ (docs/engine.md, "Snapshot store"): what an engine or VMM killed
// mid-write leaves behind is removed or moved aside, each action logged with its reason, and the published snapshots
// are loaded. Nothing found here crashes the engine.
import { lstat, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { SnapshotId } from '../api/schema.js';
import { isAtomicTempFile, moveAside } from './atomic-file.js';
import {
  MANIFEST_FILE,
  missingVmmFiles,
  readManifest,
  removeSnapshotDir,
  storedSnapshot,
  type StoredSnapshot,
} from './snapshot-manifest.js';

/** Cleans `dir` (the snapshots directory) and returns its published snapshots by id. */
export async function recoverSnapshots(dir: string, log: (line: string) => void): Promise<Map<string, StoredSnapshot>> {
  const found = new Map<string, StoredSnapshot>();
  for (const name of (await readdir(dir)).sort()) {
    const full = path.join(dir, name);
    if (name.includes('.partial-')) {
      await removeSnapshotDir(full);
      log(`store: removed ${name} : the VMM's unfinished snapshot (a checkpoint was interrupted)`);
    } else if (isAtomicTempFile(name)) {
      await rm(full, { recursive: true, force: true });
      log(`store: removed ${name} : an unfinished write`);
    } else if (SnapshotId.safeParse(name).success && (await lstat(full)).isDirectory()) {
      const snapshot = await recoverSnapshot(name, full, log);
      if (snapshot) found.set(name, snapshot);
    }
    // anything else (`*.corrupt`, files a person put here) is left alone
  }
  for (const { manifest: m } of found.values()) {
    if (m.layerParent && !found.has(m.layerParent)) {
      log(`store: ${m.id} : its layer parent ${m.layerParent} is missing (restoring it will fail)`);
    }
    if (m.parent && !found.has(m.parent)) log(`store: ${m.id} : its parent ${m.parent} is missing; shown as a root`);
  }
  return found;
}

async function recoverSnapshot(
  id: string,
  dir: string,
  log: (line: string) => void,
): Promise<StoredSnapshot | undefined> {
  const names = await readdir(dir);
  for (const name of names.filter(isAtomicTempFile)) {
    await rm(path.join(dir, name), { force: true });
    log(`store: removed ${id}/${name} : an unfinished manifest write`);
  }
  if (!names.includes(MANIFEST_FILE)) {
    await removeSnapshotDir(dir);
    log(`store: removed ${id} : no manifest (half-written snapshot)`);
    return undefined;
  }
  const read = await readManifest(dir, id);
  if ('problem' in read) return setAside(id, dir, read.problem, log);
  const missing = await missingVmmFiles(dir);
  const plural = missing.length > 1 ? 'files are' : 'file is';
  if (missing.length) return setAside(id, dir, `its ${missing.join(' and ')} ${plural} missing`, log);
  return storedSnapshot(dir, read.manifest);
}

function setAside(id: string, dir: string, reason: string, log: (line: string) => void): undefined {
  const target = moveAside(dir);
  log(`store: moved ${id} aside to ${path.basename(target)} : ${reason}`);
  return undefined;
}
