// `smol store check [--repair]`, as `git fsck` checks a repository (docs/engine.md, "Checking the store"): every
// snapshot's manifest and files, its memory layer chain and disk layer chain, who owns each layer, and every episode
// record, each problem named with its path. It only reads; repairStore() moves what is broken to a quarantine folder.
// The engine runs the quick form (no checksums) at start-up and refuses a store it cannot trust.
import { lstat, readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { SnapshotId } from '../api/schema.js';
import { isAtomicTempFile } from './atomic-file.js';
import { DISKS_DIR, IMAGES_DIR, LAYER_NAME, readLayerHeader } from './disk-layers.js';
import { EpisodeRecord } from './episode-registry.js';
import { MANIFEST_FILE, missingVmmFiles, readManifest, type Manifest } from './snapshot-manifest.js';

/** What the full check asks of the VMM (the native module): each snapshot and disk chain opened as a restore would. */
export interface StoreCheckNative {
  snapshotInfo(dir: string): Promise<{ id: string; parentDir: string | null; memoryBytes: number; cpus: number }>;
  diskInfo(file: string): Promise<{ base: string; layers: { path: string; frozen: boolean }[] }>;
}

/**
 * - `broken`: cannot be restored or loaded (repair quarantines it, and everything that needs it)
 * - `dangling`: names something that is gone, but still works (a tree edge, a VM's place in the tree)
 * - `leftover`: what an interrupted write left; the next engine start removes it
 * - `orphan`: nothing needs it; the next engine start (or repair) takes it away
 * - `set-aside`: an engine start found it unreadable and moved it aside (`*.corrupt`); repair quarantines it
 */
export type ProblemKind = 'broken' | 'dangling' | 'leftover' | 'orphan' | 'set-aside';

export interface StoreProblem {
  kind: ProblemKind;
  /** The file or directory, relative to SMOL_HOME. */
  path: string;
  problem: string;
  /** For a broken snapshot: its id (what repair moves). */
  snapshot?: string;
  /** For a broken episode record: its id. */
  episode?: string;
  /** A disk layer two snapshots claim: repair leaves it where it is. */
  sharedLayer?: string;
}

export interface StoreReport {
  home: string;
  form: 'quick' | 'full';
  snapshots: number;
  layers: number;
  episodes: number;
  problems: StoreProblem[];
}

/** The VMM opens chains of at most this many layers (docs/disks.md). */
const MAX_CHAIN = 64;

export async function checkStore(
  home: string,
  options: { native?: StoreCheckNative; engineRunning?: boolean } = {},
): Promise<StoreReport> {
  const problems: StoreProblem[] = [];
  const problem = (p: StoreProblem) => problems.push(p);
  const snapshotsDir = path.join(home, 'snapshots');
  const disksDir = path.join(home, DISKS_DIR);
  const manifests = new Map<string, Manifest>();
  const broken = new Set<string>();

  // Each snapshot directory on its own.
  for (const name of await listDir(snapshotsDir)) {
    const rel = `snapshots/${name}`;
    const full = path.join(snapshotsDir, name);
    if (name.includes('.partial-') || isAtomicTempFile(name)) {
      problem({
        kind: 'leftover',
        path: rel,
        problem: 'an unfinished snapshot write (the engine removes it at start)',
      });
      continue;
    }
    if (/\.corrupt(-\d+)?$/.test(name)) {
      problem({ kind: 'set-aside', path: rel, problem: 'set aside by an engine start as unreadable' });
      continue;
    }
    if (!SnapshotId.safeParse(name).success || !(await lstat(full)).isDirectory()) continue;
    const files = await readdir(full);
    if (!files.includes(MANIFEST_FILE)) {
      problem({
        kind: 'leftover',
        path: rel,
        problem: 'no manifest: never published (the engine removes it at start)',
      });
      continue;
    }
    const read = await readManifest(full, name);
    const bad = (what: string) => (
      broken.add(name),
      problem({ kind: 'broken', path: rel, problem: what, snapshot: name })
    );
    if ('problem' in read) {
      bad(read.problem);
      continue;
    }
    manifests.set(name, read.manifest);
    const missing = await missingVmmFiles(full);
    if (missing.length) {
      bad(`its ${missing.join(' and ')} ${missing.length > 1 ? 'files are' : 'file is'} missing`);
      continue;
    }
  }

  // The full form opens each snapshot as a restore would (the VMM checks its state's checksum and its memory layer,
  // and its parents'), parents first: one whose layer parent is broken is reported below as needing it.
  const unchecked = new Set<string>();
  for (const id of options.native ? parentsFirst(manifests) : []) {
    const m = manifests.get(id)!;
    if (broken.has(id)) continue;
    const parent = m.layerParent;
    if (parent && (!manifests.has(parent) || broken.has(parent) || unchecked.has(parent))) {
      unchecked.add(id); // its parent's problem is its own: said below (a missing parent, or one that is broken)
      continue;
    }
    const bad = (what: string) => (
      broken.add(id),
      problem({ kind: 'broken', path: `snapshots/${id}`, problem: what, snapshot: id })
    );
    try {
      const info = await options.native!.snapshotInfo(path.join(snapshotsDir, id));
      const layerParent = info.parentDir ? path.basename(info.parentDir) : null;
      if (info.memoryBytes !== m.memoryBytes)
        bad(`its state holds ${info.memoryBytes} bytes of memory; its manifest says ${m.memoryBytes}`);
      else if (info.cpus !== m.cpus) bad(`its state has ${info.cpus} vCPUs; its manifest says ${m.cpus}`);
      else if (layerParent !== m.layerParent)
        bad(`its memory layer is a diff against ${layerParent ?? 'nothing'}; its manifest says ${m.layerParent}`);
    } catch (error) {
      bad(firstLine(error).replace(`${path.join(snapshotsDir, id)}/`, ''));
    }
  }

  // Edges between snapshots, and the disk layers each owns.
  const owner = new Map<string, string>();
  const reached = new Set<string>();
  for (const [id, m] of manifests) {
    const rel = `snapshots/${id}`;
    const needs = (what: string, other: string | null | undefined) => {
      if (!other || manifests.has(other)) return;
      broken.add(id);
      problem({ kind: 'broken', path: rel, problem: `its ${what} ${other} is missing`, snapshot: id });
    };
    needs('layer parent', m.layerParent);
    needs('disk parent', m.diskParent);
    if (m.parent && !manifests.has(m.parent))
      problem({ kind: 'dangling', path: rel, problem: `its parent ${m.parent} is missing (shown as a root)` });
    for (const [i, layer] of (m.diskLayers ?? []).entries()) {
      const file = path.join(disksDir, layer);
      const claimed = owner.get(layer);
      if (claimed) {
        // The later claimant is the suspect; the layer stays with the first (repair never moves a shared layer).
        broken.add(id);
        const what = `owned by both ${claimed} and ${id}`;
        problem({ kind: 'broken', path: `${DISKS_DIR}/${layer}`, problem: what, snapshot: id, sharedLayer: layer });
        continue;
      }
      owner.set(layer, id);
      const header = await readLayerHeader(file);
      const bad = (what: string) => {
        broken.add(id);
        problem({ kind: 'broken', path: `${DISKS_DIR}/${layer}`, problem: `${id}'s disk layer ${what}`, snapshot: id });
      };
      if (!header) {
        bad((await lstat(file).catch(() => null)) ? 'has no readable layer header' : 'is missing');
        continue;
      }
      if (!header.frozen) bad('is not frozen (a snapshot’s layers never change)');
      // The chain below: the full form opens it as a VM would (every header and checksum); the quick form walks it.
      const chain = await walkChain(file, disksDir, options.native && i === 0 ? options.native : undefined);
      for (const name of chain.layers) reached.add(name);
      if (chain.problem) bad(chain.problem);
    }
  }

  // What needs a broken snapshot is broken too: its memory or disk chain goes through it.
  for (let grew = true; grew;) {
    grew = false;
    for (const [id, m] of manifests) {
      if (broken.has(id)) continue;
      const through = [m.layerParent, m.diskParent].find((other) => other && broken.has(other));
      if (!through) continue;
      broken.add(id);
      grew = true;
      problem({
        kind: 'broken',
        path: `snapshots/${id}`,
        problem: `it needs ${through}, which is broken`,
        snapshot: id,
      });
    }
  }

  // A deleted snapshot nobody can restore: what is wrong with it only keeps garbage collection from finishing.
  for (const p of problems) {
    if (p.kind !== 'broken' || !p.snapshot || !manifests.get(p.snapshot)?.deleted) continue;
    p.kind = 'orphan';
    p.problem = `deleted, and ${p.problem}`;
  }

  // Layers nothing owns or needs. While an engine runs, its live VMs write layers no snapshot owns yet.
  const layerFiles = (await listDir(disksDir)).filter((name) => LAYER_NAME.test(name));
  if (!options.engineRunning) {
    for (const name of layerFiles) {
      if (owner.has(name) || reached.has(name)) continue;
      problem({ kind: 'orphan', path: `${DISKS_DIR}/${name}`, problem: 'a disk layer no snapshot owns or needs' });
    }
  }

  // Episode records: each must parse, and what its VMs resume from must exist.
  const episodeFiles = (await listDir(path.join(home, 'episodes'))).filter((n) => /^ep-[a-z2-7]{10}\.json$/.test(n));
  for (const name of episodeFiles) {
    const rel = `episodes/${name}`;
    const id = name.slice(0, -'.json'.length);
    let record: EpisodeRecord;
    try {
      record = EpisodeRecord.parse(JSON.parse(await readFile(path.join(home, rel), 'utf8')));
    } catch (error) {
      const what = error instanceof SyntaxError ? 'is not JSON' : 'is not an episode record';
      problem({ kind: 'broken', path: rel, problem: `${what}: ${firstLine(error)}`, episode: id });
      continue;
    }
    const gone = (ref: string | null) => ref !== null && (!manifests.has(ref) || broken.has(ref));
    if (gone(record.base)) {
      problem({ kind: 'dangling', path: rel, problem: `its base snapshot ${record.base} is gone (reset will fail)` });
    }
    for (const vm of record.vms) {
      if (vm.state === 'suspended' && gone(vm.suspendedAt)) {
        problem({
          kind: 'dangling',
          path: rel,
          problem: `${vm.id} (${vm.name}) resumes from ${vm.suspendedAt}, which is gone (starting it will fail)`,
        });
      } else if (gone(vm.snapshot)) {
        problem({ kind: 'dangling', path: rel, problem: `${vm.id} (${vm.name}) is at ${vm.snapshot}, which is gone` });
      }
    }
  }

  return {
    home,
    form: options.native ? 'full' : 'quick',
    snapshots: manifests.size,
    layers: layerFiles.length,
    episodes: episodeFiles.length,
    problems,
  };
}

/** The layers below `file` in `disksDir` (nearest first) and what is wrong with the chain, if anything. */
async function walkChain(
  file: string,
  disksDir: string,
  native: StoreCheckNative | undefined,
): Promise<{ layers: string[]; problem?: string }> {
  const layers: string[] = [];
  if (native) {
    try {
      const info = await native.diskInfo(file);
      for (const layer of info.layers.slice(1)) {
        if (path.dirname(layer.path) === disksDir) layers.push(path.basename(layer.path));
      }
      if (info.layers.length > MAX_CHAIN) return { layers, problem: `sits on a chain of ${info.layers.length} layers` };
      return { layers };
    } catch (error) {
      return { layers, problem: `cannot be opened: ${firstLine(error)}` };
    }
  }
  for (let below = (await readLayerHeader(file))?.below; below;) {
    if (path.dirname(below) !== disksDir) {
      const base = await lstat(below).catch(() => null);
      if (!base?.isFile()) return { layers, problem: `sits on ${below}, which is missing` };
      const images = path.join(path.dirname(disksDir), IMAGES_DIR);
      if (path.dirname(below) !== images) return { layers, problem: `sits on ${below}, outside the store's images/` };
      return { layers };
    }
    const name = path.basename(below);
    if (layers.includes(name) || layers.length > MAX_CHAIN) return { layers, problem: 'sits on a chain with a loop' };
    layers.push(name);
    const header = await readLayerHeader(below);
    if (!header) return { layers, problem: `sits on ${DISKS_DIR}/${name}, which is missing or unreadable` };
    below = header.below;
  }
  return { layers };
}

/** Snapshot ids ordered so that each comes after its layer parent (those whose parent is missing come first). */
function parentsFirst(manifests: Map<string, Manifest>): string[] {
  const order: string[] = [];
  const placed = new Set<string>();
  const place = (id: string, depth: number) => {
    if (placed.has(id) || depth > manifests.size) return;
    const parent = manifests.get(id)?.layerParent;
    if (parent && manifests.has(parent)) place(parent, depth + 1);
    placed.add(id);
    order.push(id);
  };
  for (const id of [...manifests.keys()].sort()) place(id, 0);
  return order;
}

async function listDir(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!;
}

/** The problems that make a store untrustworthy for an engine to start on: what repair would quarantine. */
export function untrusted(report: StoreReport): StoreProblem[] {
  return report.problems.filter((p) => p.kind === 'broken');
}

export interface RepairResult {
  /** Where what was moved now is (SMOL_HOME/quarantine/<time>), or null when nothing needed moving. */
  quarantine: string | null;
  /** What is no longer there to restore or load: snapshots (with their names) and episode records. */
  lost: string[];
  /** Each move and removal, as `<path> -> <where> : <why>`. */
  actions: string[];
}

/**
 * Moves what `report` found broken, set aside or orphaned into SMOL_HOME/quarantine/<time>/ (nothing is deleted:
 * a person may still want it), with a REPORT.txt saying why each thing is there, and removes interrupted writes.
 * Only while no engine runs (the caller checks): an engine holds its own view of the store.
 */
export async function repairStore(report: StoreReport): Promise<RepairResult> {
  const { mkdir, rename, rm, writeFile } = await import('node:fs/promises');
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const quarantine = path.join(report.home, 'quarantine', stamp);
  const result: RepairResult = { quarantine: null, lost: [], actions: [] };
  const moved = new Set<string>();
  const shared = new Set(report.problems.flatMap((p) => (p.sharedLayer ? [p.sharedLayer] : [])));
  const move = async (rel: string, why: string) => {
    if (moved.has(rel)) return;
    const from = path.join(report.home, rel);
    if (!(await lstat(from).catch(() => null))) return;
    const to = path.join(quarantine, rel);
    await mkdir(path.dirname(to), { recursive: true });
    await rename(from, to);
    moved.add(rel);
    result.quarantine = quarantine;
    result.actions.push(`${rel} -> quarantine/${stamp}/${rel} : ${why}`);
  };
  for (const p of report.problems) {
    if (p.kind === 'leftover') {
      await rm(path.join(report.home, p.path), { recursive: true, force: true });
      result.actions.push(`${p.path} removed : ${p.problem}`);
    } else if (p.kind === 'orphan' || p.kind === 'set-aside') {
      await move(p.path, p.problem);
    } else if (p.kind === 'broken' && p.snapshot) {
      const dir = `snapshots/${p.snapshot}`;
      const manifest = await readManifest(path.join(report.home, dir), p.snapshot).catch(() => null);
      const m = manifest && 'manifest' in manifest ? manifest.manifest : null;
      if (!moved.has(dir))
        result.lost.push(m ? `snapshot ${p.snapshot} (${m.name}, ${m.episode ?? 'a base'})` : `snapshot ${p.snapshot}`);
      await move(dir, p.problem);
      for (const layer of m?.diskLayers ?? []) {
        if (!shared.has(layer)) await move(`${DISKS_DIR}/${layer}`, `owned by ${p.snapshot}, which is broken`);
      }
    } else if (p.kind === 'broken' && p.episode) {
      result.lost.push(`episode ${p.episode}`);
      await move(p.path, p.problem);
    }
  }
  if (result.quarantine) {
    const lines = [`smol store check --repair, ${new Date().toISOString()}`, '', ...result.actions, ''];
    await writeFile(path.join(quarantine, 'REPORT.txt'), lines.join('\n'));
  }
  return result;
}
