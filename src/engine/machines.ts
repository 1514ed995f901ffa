// Portable machines (docs/smolmachine.md): a snapshot of the store, its memory layer chain and a bare kernel's boot
// files packed into one .smolmachine file, and such a file checked and unpacked into the store. The engine's
// packMachine/openMachine (engine.ts) call these; nothing here touches a VM.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { chmod, lstat, mkdir, readdir, readFile, rename, rm, stat, statfs, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ApiFailure } from '../api/engine-api.js';
import type { InspectMachineResponse } from '../api/machine-schema.js';
import { parseSmolfile } from '../smolfile/smolfile.js';
import { readManifest, type Manifest } from './snapshot-manifest.js';
import type { SnapshotStore } from './snapshot-store.js';
import {
  MACHINE_FORMAT,
  missingCpuFlags,
  parseCpuinfo,
  type MachineManifest,
  type PackedDisk,
} from './smolmachine-format.js';
import { relocateLayer, relocateState, stateDisks, type StateDisk } from './disk-relocation.js';
import { IMAGES_DIR, LAYER_NAME, newLayerName, readLayerHeader, type LayerHeader } from './disk-layers.js';
import { createMachine, openMachine, type Progress } from './smolmachine-file.js';
import { crashPoint } from './crash-points.js';

export interface PackInput {
  store: SnapshotStore;
  snapshot: string;
  smolfile: { path: string; text: string };
  screen: string | null;
  version: string;
  /** What was packed, as the user named it (a VM or a snapshot). */
  from: string;
  out: string;
  onProgress?: Progress;
}

/** The snapshot's memory layer chain, full layer first, each with its directory in the store. */
async function chainOf(store: SnapshotStore, id: string): Promise<Array<{ manifest: Manifest; dir: string }>> {
  const chain: Array<{ manifest: Manifest; dir: string }> = [];
  for (let next: string | null = id; next;) {
    const dir = store.dirFor(next);
    const read = await readManifest(dir, next);
    if ('problem' in read) throw new ApiFailure(409, `cannot pack ${id}: snapshot ${next}: ${read.problem}`);
    chain.unshift({ manifest: read.manifest, dir });
    next = read.manifest.layerParent;
    if (chain.length > 64) throw new ApiFailure(409, `cannot pack ${id}: its memory chain is deeper than 64`);
  }
  return chain;
}

export function hostCpu(): { vendor: string; model: string; flags: string[] } {
  return parseCpuinfo(readFileSync('/proc/cpuinfo', 'utf8'));
}

/**
 * Every file the chain's disks restore from: for each disk each state names, its frozen layer and the layers below
 * it (their headers name them), down to the raw image at the bottom. Layers live in the store's disks directory;
 * whatever is not a layer there is the image.
 */
async function diskFilesOf(store: SnapshotStore, chain: Array<{ dir: string }>): Promise<DiskFile[]> {
  const files = new Map<string, DiskFile>();
  const names = new Set<string>();
  const unique = (name: string) => {
    let candidate = name;
    for (let n = 2; names.has(candidate); n++) candidate = `${n}-${name}`;
    names.add(candidate);
    return candidate;
  };
  for (const { dir } of chain) {
    const statePath = path.join(dir, 'state');
    for (const disk of stateDisks(await readFile(statePath), statePath)) {
      for (let at: string | null = disk.path; at && !files.has(at);) {
        const isLayer: boolean = path.dirname(at) === store.disksDir && LAYER_NAME.test(path.basename(at));
        const header: LayerHeader | null = isLayer ? await readLayerHeader(at) : null;
        if (isLayer && !header) throw new ApiFailure(409, `cannot pack: disk layer ${at} is missing or damaged`);
        if (!isLayer && !(await stat(at).catch(() => null))) {
          throw new ApiFailure(409, `cannot pack: disk image ${at} is missing`);
        }
        const below: string | null = header?.below ?? null;
        files.set(at, {
          kind: isLayer ? 'layer' : 'image',
          name: unique(path.basename(at)),
          was: at,
          belowPath: below,
        });
        at = below;
      }
    }
  }
  return [...files.values()].map((f) => ({ ...f, below: f.belowPath ? files.get(f.belowPath)!.name : null }));
}

interface DiskFile {
  kind: 'image' | 'layer';
  name: string;
  was: string;
  belowPath: string | null;
  below?: string | null;
}

/** Packs `input.snapshot` into `input.out`; returns the file's size and manifest. */
export async function packSnapshot(input: PackInput): Promise<{ bytes: number; manifest: MachineManifest }> {
  const chain = await chainOf(input.store, input.snapshot);
  const disks = await diskFilesOf(input.store, chain);
  const parsed = parseSmolfile(input.smolfile.text, { path: input.smolfile.path });
  const bare = parsed.smolfile && !parsed.smolfile.image ? parsed.smolfile : null;
  const bootFiles: Array<{ role: 'kernel' | 'initrd'; path: string }> = [];
  if (bare?.kernel) bootFiles.push({ role: 'kernel', path: bare.kernel });
  if (bare?.initrd) bootFiles.push({ role: 'initrd', path: bare.initrd });
  const files = [
    ...chain.flatMap((s) => [path.join(s.dir, 'state'), path.join(s.dir, 'memory')]),
    ...bootFiles.map((b) => b.path),
    ...disks.map((d) => d.was),
  ];
  let total = 0;
  for (const file of files) total += (await stat(file)).size;
  const out = path.resolve(input.out);
  const writer = await createMachine(out, total, input.onProgress);
  try {
    const snapshots = [];
    for (const { manifest, dir } of chain) {
      const state = await writer.addFile(path.join(dir, 'state'));
      const memory = await writer.addFile(path.join(dir, 'memory'));
      crashPoint('pack:writing');
      snapshots.push({ manifest, state, memory });
    }
    const packedDisks = [];
    for (const d of disks) {
      packedDisks.push({
        kind: d.kind,
        name: d.name,
        was: d.was,
        below: d.below ?? null,
        file: await writer.addFile(d.was),
      });
    }
    const boot = [];
    for (const b of bootFiles)
      boot.push({ role: b.role, name: safeName(path.basename(b.path)), file: await writer.addFile(b.path) });
    const cpu = hostCpu();
    return await writer.finish({
      format: MACHINE_FORMAT,
      made: {
        smol: input.version,
        host: os.hostname(),
        platform: `${os.type()} ${os.release()} ${os.arch()}`,
        at: new Date().toISOString(),
        from: input.from,
      },
      cpu: { source: '/proc/cpuinfo', ...cpu },
      smolfile: { name: path.basename(input.smolfile.path), text: input.smolfile.text },
      snapshot: input.snapshot,
      snapshots,
      disks: packedDisks,
      boot,
      console: input.screen === null ? null : { screen: input.screen },
    });
  } catch (error) {
    await writer.abort();
    throw error;
  }
}

function safeName(name: string): string {
  const cleaned = name.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^[^A-Za-z0-9]+/, '');
  return (cleaned || 'boot').slice(0, 100);
}

export interface Unpacked {
  manifest: MachineManifest;
  /** The packed snapshot's id (the machine's snapshots keep their ids: their state files name parents by them). */
  snapshot: string;
  /** Snapshots to publish, oldest first: the directory each was unpacked into (under `temp`). */
  snapshots: Array<{ manifest: Manifest; dir: string }>;
  /** Where the Smolfile and boot files were unpacked (a directory to move to its place). */
  bootDir: string;
  /** Disk files unpacked under `temp` and where each goes in the store (placeMachineDisks). */
  disks: Array<{ from: string; to: string }>;
  temp: string;
}

/**
 * Where each disk file of the machine goes in this store: an image to SMOL_HOME/images under its name (one there
 * already with the same size is the same image: images are named by their content's hash), a layer to
 * SMOL_HOME/disks under its name, or a new one if that is taken.
 */
async function diskTargets(home: string, store: SnapshotStore, disks: PackedDisk[], reused: Map<string, string>) {
  const targets = new Map<string, { to: string; reuse: boolean }>();
  for (const d of disks) {
    const there = reused.get(d.was);
    if (there) {
      targets.set(d.name, { to: there, reuse: true });
      continue;
    }
    if (d.kind === 'image') {
      const to = path.join(home, IMAGES_DIR, d.name);
      const there = await stat(to).catch(() => null);
      if (!there) targets.set(d.name, { to, reuse: false });
      else if (there.size === d.file.size) targets.set(d.name, { to, reuse: true });
      else
        targets.set(d.name, {
          to: path.join(home, IMAGES_DIR, `${randomBytes(4).toString('hex')}-${d.name}`),
          reuse: false,
        });
      continue;
    }
    let to = path.join(store.disksDir, d.name);
    while (await stat(to).catch(() => null)) to = path.join(store.disksDir, newLayerName());
    targets.set(d.name, { to, reuse: false });
  }
  return targets;
}

/**
 * The packed snapshots this store has under the same ids. Each must be the same snapshot: its state byte for byte
 * but for the paths of its disks (opened into this store, they were relocated), else the file is refused. For each,
 * every disk's chain is walked down in the file and in this store side by side, so the packed disk files map to the
 * store's own: `paths` (packed path → this store's file) and `owners` (this store's file → the reused snapshot
 * that first reaches it, oldest first: its owner among them).
 */
async function reusedSnapshots(
  m: MachineManifest,
  machine: Awaited<ReturnType<typeof openMachine>>,
  store: SnapshotStore,
  disks: PackedDisk[],
  temp: string,
  file: string,
) {
  const ids = new Set<string>();
  const paths = new Map<string, string>();
  const owners = new Map<string, string>();
  const byWas = new Map(disks.map((d) => [d.was, d]));
  const byName = new Map(disks.map((d) => [d.name, d]));
  const nowhere = () => '/';
  for (const { manifest: s, state } of m.snapshots) {
    if (!store.get(s.id)) continue;
    const check = path.join(temp, `${s.id}.state`);
    await machine.extractFile(state, check, `${s.id} state`);
    const mine = await readFile(check);
    await rm(check);
    const theirs = await readFile(path.join(store.dirFor(s.id), 'state')).catch(() => null);
    const same = (() => {
      try {
        return theirs !== null && relocateState(mine, nowhere).equals(relocateState(theirs, nowhere));
      } catch {
        return false;
      }
    })();
    if (!same) throw new ApiFailure(409, `${file}: this store has a different snapshot with the id ${s.id}`);
    ids.add(s.id);
    const here = new Map(stateDisks(theirs!).map((d) => [d.device, d.path]));
    for (const packed of stateDisks(mine)) {
      let entry = byWas.get(packed.path);
      let at = here.get(packed.device) ?? null;
      while (entry && at && !paths.has(entry.was)) {
        paths.set(entry.was, at);
        if (entry.kind === 'image') break;
        if (!owners.has(at)) owners.set(at, s.id);
        entry = byName.get(entry.below ?? '');
        at = (await readLayerHeader(at))?.below ?? null;
      }
    }
  }
  return { ids, paths, owners };
}

/**
 * Each imported snapshot's disk fields, oldest first, as the store would have given them (snapshot-store.ts,
 * `#diskFields`): the layers of its disks that no snapshot below it owns, and the owner of the first one below that
 * is owned (its disk parent, followed on the root disk).
 */
function diskFieldsOf(
  snapshots: Array<{ manifest: Manifest; disks: StateDisk[] }>,
  belowOf: Map<string, string | null>,
  reusedOwners: Map<string, string>,
): Map<string, Pick<Manifest, 'diskLayers' | 'diskParent'>> {
  const owner = new Map(reusedOwners);
  const fields = new Map<string, Pick<Manifest, 'diskLayers' | 'diskParent'>>();
  for (const { manifest, disks } of snapshots) {
    const layers: string[] = [];
    let diskParent: string | null = null;
    for (const disk of disks) {
      if (!disk.writable) continue;
      for (let at: string | null = disk.path; at && (belowOf.has(at) || owner.has(at)); at = belowOf.get(at) ?? null) {
        const owned = owner.get(at);
        if (owned) {
          if (disk.device === 'virtio-blk') diskParent = owned;
          break;
        }
        owner.set(at, manifest.id);
        layers.push(path.basename(at));
      }
    }
    fields.set(manifest.id, layers.length ? { diskLayers: layers, diskParent } : {});
  }
  return fields;
}

/**
 * What `file` holds, checked as far as it can be without unpacking (docs/smolmachine.md, "What is checked"): the
 * digest, the manifest, the state and memory headers; and the CPU features this host lacks. Writes nothing.
 */
export async function inspectMachineFile(file: string): Promise<InspectMachineResponse> {
  const machine = await openMachine(file).catch((error: Error) => {
    throw new ApiFailure(400, error.message);
  });
  try {
    await machine.checkSnapshotHeaders().catch((error: Error) => {
      throw new ApiFailure(400, error.message);
    });
    const m = machine.manifest;
    const top = m.snapshots[m.snapshots.length - 1]!.manifest;
    return {
      path: file,
      bytes: machine.bytes,
      format: m.format,
      made: m.made,
      snapshot: {
        id: top.id,
        name: top.name,
        kind: top.kind,
        created: top.created,
        cpus: top.cpus,
        memoryBytes: top.memoryBytes,
      },
      layers: m.snapshots.length,
      memoryData: m.totals.memoryData,
      raw: m.totals.raw,
      stored: m.totals.stored,
      chunks: m.chunks.length,
      boot: m.boot.map((b) => ({ role: b.role, name: b.name, bytes: b.file.size })),
      disks: (m.disks ?? []).map((d) => ({ kind: d.kind, name: d.name, bytes: d.file.size })),
      console: m.console !== null,
      cpu: {
        vendor: m.cpu.vendor,
        model: m.cpu.model,
        features: m.cpu.flags.length,
        missing: missingCpuFlags(m.cpu.flags, hostCpu().flags),
      },
      smolfile: m.smolfile,
    };
  } finally {
    await machine.close();
  }
}

/**
 * Checks `file` completely and unpacks it into SMOL_HOME/import/<random>/ (the store is not touched): the whole
 * file's digest, the manifest, this host's CPU features, the free space, every chunk's size and sha256, the state
 * and memory headers. A snapshot id the store holds already is used as it is when its state is byte for byte the
 * same, and refused otherwise. The caller publishes `snapshots` and removes `temp`.
 */
export async function unpackMachine(
  home: string,
  store: SnapshotStore,
  file: string,
  onProgress: Progress = () => {},
): Promise<Unpacked> {
  // Progress counts the file's bytes (read once for its digest), then the bytes unpacked.
  const fileBytes = (await stat(file).catch(() => null))?.size ?? 0;
  let estimate = fileBytes * 2;
  const machine = await openMachine(file, (done) => onProgress(done, estimate)).catch((error: Error) => {
    throw new ApiFailure(400, error.message);
  });
  const temp = path.join(home, 'import', randomBytes(8).toString('hex'));
  try {
    const m = machine.manifest;
    const missing = missingCpuFlags(m.cpu.flags, hostCpu().flags);
    if (missing.length) {
      throw new ApiFailure(
        409,
        `${file} was packed on a CPU with features this host lacks (${m.cpu.model || 'unknown CPU'}): ${missing.join(' ')}`,
      );
    }
    await mkdir(temp, { recursive: true });
    const { bavail, bsize } = await statfs(temp);
    const free = bavail * bsize;
    if (m.totals.raw + (64 << 20) > free) {
      throw new ApiFailure(409, `${file} needs ${m.totals.raw} bytes unpacked; ${home} has ${free} free`);
    }
    await machine.checkSnapshotHeaders();
    let done = fileBytes;
    estimate = fileBytes + m.totals.raw;
    const progress = (bytes: number) => onProgress((done += bytes), estimate);
    const packedDisks = m.disks ?? [];
    // Snapshots this store has already (packed from it, or opened into it before): the same snapshot when their
    // states are the same but for where their disks are; their disk files are used as they are.
    const reuse = await reusedSnapshots(m, machine, store, packedDisks, temp, file);
    const targets = await diskTargets(home, store, packedDisks, reuse.paths);
    const byWas = new Map(packedDisks.map((d) => [d.was, targets.get(d.name)!.to]));
    // A layer's target → the target below it; an image's is null (the chain ends there).
    const belowOf = new Map<string, string | null>();
    for (const d of packedDisks) {
      if (d.kind === 'layer') belowOf.set(targets.get(d.name)!.to, targets.get(d.below!)!.to);
    }
    const snapshots: Unpacked['snapshots'] = [];
    const imported: Array<{ manifest: Manifest; disks: StateDisk[] }> = [];
    for (const { manifest: s, state, memory } of m.snapshots) {
      const dir = path.join(temp, s.id);
      await mkdir(dir);
      await machine.extractFile(state, path.join(dir, 'state'), `${s.id} state`, progress);
      // Its disks' paths as this store will have them (the state's CRC written anew); a path the file does not hold
      // is a lie of the file.
      const raw = await readFile(path.join(dir, 'state'));
      const relocated = relocateState(
        raw,
        (was, device) => {
          const to = byWas.get(was);
          if (!to) throw new Error(`${file}: snapshot ${s.id}'s ${device} is on ${was}, which the file does not hold`);
          return to;
        },
        `${file}: snapshot ${s.id}'s state`,
      );
      if (reuse.ids.has(s.id)) {
        // The same snapshot: the chain above it reaches it through a link (its PARENT path is ../<id>).
        await rm(dir, { recursive: true });
        await symlink(store.dirFor(s.id), dir);
        continue;
      }
      await writeFile(path.join(dir, 'state'), relocated);
      await machine.extractFile(memory, path.join(dir, 'memory'), `${s.id} memory`, progress);
      for (const name of ['state', 'memory']) await chmod(path.join(dir, name), 0o444);
      snapshots.push({ manifest: s, dir });
      imported.push({ manifest: s, disks: stateDisks(relocated) });
    }
    const fields = diskFieldsOf(imported, belowOf, reuse.owners);
    for (const entry of snapshots) {
      const { diskLayers: _layers, diskParent: _parent, ...rest } = entry.manifest;
      entry.manifest = { ...rest, ...fields.get(rest.id) };
    }
    const disks: Unpacked['disks'] = [];
    if (packedDisks.length) await mkdir(path.join(temp, 'disks'));
    for (const d of packedDisks) {
      const { to, reuse } = targets.get(d.name)!;
      if (reuse) continue;
      const from = path.join(temp, 'disks', path.basename(to));
      await machine.extractFile(d.file, from, `disk file ${d.name}`, progress);
      if (d.kind === 'layer') await relocateLayer(from, targets.get(d.below!)!.to);
      await chmod(from, 0o444);
      disks.push({ from, to });
    }
    const bootDir = path.join(temp, 'machine');
    await mkdir(bootDir);
    let text = m.smolfile.text;
    for (const b of m.boot) {
      await machine.extractFile(b.file, path.join(bootDir, b.name), b.role, progress);
      text = text.replace(new RegExp(`^(\\s*${b.role}\\s*=\\s*).*$`, 'm'), `$1${JSON.stringify(b.name)}`);
    }
    await writeFile(path.join(bootDir, 'Smolfile'), text);
    return { manifest: m, snapshot: m.snapshot, snapshots, bootDir, disks, temp };
  } catch (error) {
    await rm(temp, { recursive: true, force: true });
    if (error instanceof ApiFailure) throw error;
    throw new ApiFailure(400, (error as Error).message);
  } finally {
    await machine.close();
  }
}

/** Moves the unpacked Smolfile and boot files to SMOL_HOME/machines/<episode>/; returns the Smolfile's path. */
export async function placeMachineFiles(home: string, unpacked: Unpacked, episode: string): Promise<string> {
  const dir = path.join(home, 'machines', episode);
  await mkdir(path.dirname(dir), { recursive: true });
  await rename(unpacked.bootDir, dir);
  return path.join(dir, 'Smolfile');
}

/** Moves the unpacked disk files to their places in the store; returns what it placed (to remove on a failure). */
export async function placeMachineDisks(unpacked: Unpacked): Promise<string[]> {
  const placed: string[] = [];
  try {
    for (const { from, to } of unpacked.disks) {
      await mkdir(path.dirname(to), { recursive: true });
      await rename(from, to);
      placed.push(to);
    }
  } catch (error) {
    for (const file of placed) await rm(file, { force: true });
    throw error;
  }
  return placed;
}

/** At start-up (no import runs): what an engine that died while unpacking a machine left in SMOL_HOME/import. */
export async function removeImportLeftovers(home: string, log: (line: string) => void): Promise<void> {
  const dir = path.join(home, 'import');
  const left = await readdir(dir).catch(() => []);
  if (left.length) log(`engine: removed ${left.length} unfinished machine import(s) from ${dir}`);
  await rm(dir, { recursive: true, force: true });
}

export async function removeTemp(unpacked: Unpacked): Promise<void> {
  if (await lstat(unpacked.temp).catch(() => null)) await rm(unpacked.temp, { recursive: true, force: true });
}
