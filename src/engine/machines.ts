// Portable machines (docs/smolmachine.md): a snapshot of the store, its memory layer chain and a bare kernel's boot
// files packed into one .smolmachine file, and such a file checked and unpacked into the store. The engine's
// packMachine/openMachine (engine.ts) call these; nothing here touches a VM.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { chmod, lstat, mkdir, readdir, readFile, rename, rm, stat, statfs, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ApiFailure } from '../api/engine-api.js';
import { parseSmolfile } from '../smolfile/smolfile.js';
import { readManifest, type Manifest } from './snapshot-manifest.js';
import type { SnapshotStore } from './snapshot-store.js';
import { missingCpuFlags, parseCpuinfo, type MachineManifest } from './smolmachine-format.js';
import { createMachine, openMachine, type Progress } from './smolmachine-file.js';

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
    if (read.manifest.diskLayers?.length) {
      throw new ApiFailure(
        409,
        `cannot pack ${id}: its VM has a disk (snapshot ${next} owns disk layers), and .smolmachine format 1 ` +
          `holds VMs without one (a bare kernel's); docs/smolmachine.md, "Not yet"`,
      );
    }
    chain.unshift({ manifest: read.manifest, dir });
    next = read.manifest.layerParent;
    if (chain.length > 64) throw new ApiFailure(409, `cannot pack ${id}: its memory chain is deeper than 64`);
  }
  return chain;
}

export function hostCpu(): { vendor: string; model: string; flags: string[] } {
  return parseCpuinfo(readFileSync('/proc/cpuinfo', 'utf8'));
}

/** Packs `input.snapshot` into `input.out`; returns the file's size and manifest. */
export async function packSnapshot(input: PackInput): Promise<{ bytes: number; manifest: MachineManifest }> {
  const chain = await chainOf(input.store, input.snapshot);
  const parsed = parseSmolfile(input.smolfile.text, { path: input.smolfile.path });
  const bare = parsed.smolfile && !parsed.smolfile.image ? parsed.smolfile : null;
  const bootFiles: Array<{ role: 'kernel' | 'initrd'; path: string }> = [];
  if (bare?.kernel) bootFiles.push({ role: 'kernel', path: bare.kernel });
  if (bare?.initrd) bootFiles.push({ role: 'initrd', path: bare.initrd });
  const files = [
    ...chain.flatMap((s) => [path.join(s.dir, 'state'), path.join(s.dir, 'memory')]),
    ...bootFiles.map((b) => b.path),
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
      snapshots.push({ manifest, state, memory });
    }
    const boot = [];
    for (const b of bootFiles)
      boot.push({ role: b.role, name: safeName(path.basename(b.path)), file: await writer.addFile(b.path) });
    const cpu = hostCpu();
    return await writer.finish({
      format: 1,
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
  temp: string;
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
    const snapshots: Unpacked['snapshots'] = [];
    for (const { manifest: s, state, memory } of m.snapshots) {
      const dir = path.join(temp, s.id);
      await mkdir(dir);
      await machine.extractFile(state, path.join(dir, 'state'), `${s.id} state`, progress);
      const existing = store.get(s.id);
      if (existing) {
        const mine = await readFile(path.join(dir, 'state'));
        const theirs = await readFile(path.join(store.dirFor(s.id), 'state')).catch(() => null);
        if (!theirs || !mine.equals(theirs)) {
          throw new ApiFailure(409, `${file}: this store has a different snapshot with the id ${s.id}`);
        }
        // The same snapshot: the chain above it reaches it through a link (its PARENT path is ../<id>).
        await rm(dir, { recursive: true });
        await symlink(store.dirFor(s.id), dir);
        continue;
      }
      await machine.extractFile(memory, path.join(dir, 'memory'), `${s.id} memory`, progress);
      for (const name of ['state', 'memory']) await chmod(path.join(dir, name), 0o444);
      snapshots.push({ manifest: s, dir });
    }
    const bootDir = path.join(temp, 'machine');
    await mkdir(bootDir);
    let text = m.smolfile.text;
    for (const b of m.boot) {
      await machine.extractFile(b.file, path.join(bootDir, b.name), b.role, progress);
      text = text.replace(new RegExp(`^(\\s*${b.role}\\s*=\\s*).*$`, 'm'), `$1${JSON.stringify(b.name)}`);
    }
    await writeFile(path.join(bootDir, 'Smolfile'), text);
    return { manifest: m, snapshot: m.snapshot, snapshots, bootDir, temp };
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
