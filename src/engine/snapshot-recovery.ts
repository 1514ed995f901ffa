// Start-up recovery of SMOL_HOME/snapshots/ (docs/engine.md, "Snapshot store"): what an engine or VMM killed
// mid-write leaves behind is removed or moved aside, each action logged with its reason, and the published snapshots
// are loaded. Nothing found here crashes the engine.
import { lstat, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { SnapshotId } from '../api/schema.js';
import { isAtomicTempFile, moveAside } from './atomic-file.js';
import { LAYER_NAME, layersBelow, readLayerHeader } from './disk-layers.js';
import {
  MANIFEST_FILE,
  missingVmmFiles,
  readManifest,
  removeSnapshotDir,
  storedSnapshot,
  type StoredSnapshot,
} from './snapshot-manifest.js';

/**
 * Cleans `dir` (the snapshots directory) and returns its published snapshots by id; `disksDir` holds their disk
 * layers (sweepDiskLayers cleans it, after this).
 */
export async function recoverSnapshots(
  dir: string,
  disksDir: string,
  log: (line: string) => void,
): Promise<Map<string, StoredSnapshot>> {
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
      const snapshot = await recoverSnapshot(name, full, disksDir, log);
      if (snapshot) found.set(name, snapshot);
    }
    // anything else (`*.corrupt`, files a person put here) is left alone
  }
  for (const { manifest: m } of found.values()) {
    if (m.layerParent && !found.has(m.layerParent)) {
      log(`store: ${m.id} : its layer parent ${m.layerParent} is missing (restoring it will fail)`);
    }
    if (m.parent && !found.has(m.parent)) log(`store: ${m.id} : its parent ${m.parent} is missing; shown as a root`);
    for (const name of m.diskLayers ?? []) {
      if (!(await lstat(path.join(disksDir, name)).catch(() => null))) {
        log(`store: ${m.id} : its disk layer ${name} is missing (restoring it will fail)`);
      }
    }
  }
  return found;
}

async function recoverSnapshot(
  id: string,
  dir: string,
  disksDir: string,
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
  return storedSnapshot(dir, read.manifest, disksDir);
}

function setAside(id: string, dir: string, reason: string, log: (line: string) => void): undefined {
  const target = moveAside(dir);
  log(`store: moved ${id} aside to ${path.basename(target)} : ${reason}`);
  return undefined;
}

/**
 * Cleans `disksDir` at start-up, when no VM is running: removes each layer that no snapshot's disk chain needs (the
 * snapshots' own layers and every layer below them). A writable one was the top of a VM that ended with the
 * previous engine (its state after the last checkpoint died with its memory); an unreadable one was being created. A
 * frozen one comes from a checkpoint that was never published; it is kept, and said so, while a snapshot directory
 * set aside as corrupt (`*.corrupt`) might be the one that names it.
 */
export async function sweepDiskLayers(
  disksDir: string,
  snapshotsDir: string,
  snapshots: Iterable<StoredSnapshot>,
  log: (line: string) => void,
): Promise<void> {
  const needed = new Set<string>();
  for (const { manifest } of snapshots) {
    for (const own of manifest.diskLayers ?? []) {
      if (needed.has(own)) continue;
      needed.add(own);
      for await (const name of layersBelow(path.join(disksDir, own), disksDir)) {
        if (needed.has(name)) break;
        needed.add(name);
      }
    }
  }
  const setAside = (await readdir(snapshotsDir)).some((name) => /\.corrupt(-\d+)?$/.test(name));
  for (const name of (await readdir(disksDir)).sort()) {
    if (!LAYER_NAME.test(name) || needed.has(name)) continue;
    const file = path.join(disksDir, name);
    const header = await readLayerHeader(file);
    if (header?.frozen && setAside) {
      log(`store: kept disk layer ${name} : frozen, and no snapshot names it (a set-aside snapshot may)`);
      continue;
    }
    await rm(file, { force: true });
    const why = !header
      ? 'an unfinished layer'
      : header.frozen
        ? 'frozen by a checkpoint that was never published'
        : 'the writable layer of a VM that ended with the last engine';
    log(`store: removed disk layer ${name} : ${why}`);
  }
}
