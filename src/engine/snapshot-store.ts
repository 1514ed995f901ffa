// The snapshot store (docs/engine.md, "Snapshot store"): owns SMOL_HOME/snapshots/ and SMOL_HOME/episodes/. The VMM
// writes a snapshot's `state` and `memory` into dirFor(id); publish() then adds `manifest.json`, and only from then
// on does the snapshot exist. Deleting marks the manifest; gc() removes the files once no layer chain needs them.
import { randomBytes } from 'node:crypto';
import { mkdir, realpath, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { ApiFailure } from '../api/engine-api.js';
import { SnapshotId, UpdateSnapshotRequest, type Snapshot, type SnapshotKind } from '../api/schema.js';
import { DISKS_DIR, IMAGES_DIR, layersBelow, newLayerName, readLayerHeader } from './disk-layers.js';
import type { DiskDevice } from './live-instance.js';
import { EpisodeRecords } from './episode-records.js';
import { changedLabels } from './labels.js';
import { nearestAncestor, unneededSnapshots } from './snapshot-graph.js';
import {
  MANIFEST_FORMAT,
  missingVmmFiles,
  removeSnapshotDir,
  storedSnapshot,
  writeManifest,
  type Manifest,
  type StoredSnapshot as Entry,
} from './snapshot-manifest.js';
import { recoverSnapshots, sweepDiskLayers } from './snapshot-recovery.js';
import { crashPoint } from './crash-points.js';

const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

/** A fresh id: the prefix, '-', then 10 random characters of [a-z2-7] (50 bits). */
export function newId(prefix: 'ep' | 'vm' | 'sn'): string {
  let id = `${prefix}-`;
  for (const byte of randomBytes(10)) id += ID_ALPHABET[byte & 31];
  return id;
}

export interface PublishInput {
  /** From newSnapshotId(); the VMM has written dirFor(id). */
  id: string;
  episode: string | null;
  parent: string | null;
  vm: string | null;
  kind: SnapshotKind;
  name?: string;
  note?: string;
  /** The VMM's CheckpointInfo.parentDir: the snapshot directory this one's memory diffs against, or null. */
  layerParentDir: string | null;
  memoryBytes: number;
  cpus: number;
  baseKey?: string;
  /** The disk layer the checkpoint froze (CheckpointInfo.disk), a file from newDiskLayer(); absent without a disk. */
  diskLayer?: string;
  /** The layers it froze of writable volumes, by device (docs/disks.md, "Volumes"). */
  volumeLayers?: Partial<Record<DiskDevice, string>>;
  /** The images of read-only volumes (paths in SMOL_HOME/images). */
  volumeImages?: string[];
}

export class SnapshotStore {
  readonly #snapshots: string;
  /** #snapshots with symbolic links resolved, to recognise the VMM's layer parent paths. */
  #realSnapshots = '';
  /** SMOL_HOME/disks with symbolic links resolved: every disk layer the engine makes is a file here. */
  #disks = '';
  #entries = new Map<string, Entry>();
  readonly #episodes: EpisodeRecords;
  /** Manifest writes, one at a time, so a gc never sees a half-applied delete or publish. */
  #queue: Promise<unknown> = Promise.resolve();
  #lastCreatedMs = 0;
  #version = 0;

  private constructor(
    readonly home: string,
    private readonly log: (line: string) => void,
  ) {
    this.#snapshots = path.join(home, 'snapshots');
    this.#episodes = new EpisodeRecords(path.join(home, 'episodes'), log);
  }

  /** Creates the directories, recovers from an engine that died mid-write (each action logged), loads manifests. */
  static async open(home: string, log: (line: string) => void): Promise<SnapshotStore> {
    const store = new SnapshotStore(home, log);
    await mkdir(store.#snapshots, { recursive: true });
    await mkdir(path.join(home, DISKS_DIR), { recursive: true });
    store.#realSnapshots = await realpath(store.#snapshots);
    store.#disks = await realpath(path.join(home, DISKS_DIR));
    store.#entries = await recoverSnapshots(store.#snapshots, store.#disks, log);
    await sweepDiskLayers(store.#disks, store.#snapshots, store.#entries.values(), log);
    for (const { createdMs } of store.#entries.values()) {
      store.#lastCreatedMs = Math.max(store.#lastCreatedMs, createdMs);
    }
    await store.#episodes.recover();
    return store;
  }

  newSnapshotId(): string {
    for (;;) {
      const id = newId('sn');
      if (!this.#entries.has(id)) return id; // the VMM refuses a directory that exists, so a clash cannot be silent
    }
  }

  /**
   * A path for a new disk layer (a VM's writable top): the engine hands it to the VMM, which creates the file. The
   * instance writing it owns it; the snapshot whose checkpoint freezes it owns it after that (publish, addDiskLayers).
   */
  newDiskLayer(): string {
    return path.join(this.#disks, newLayerName());
  }

  /** Where the VMM is told to write snapshot `id`. */
  dirFor(id: string): string {
    if (!SnapshotId.safeParse(id).success) throw new Error(`not a snapshot id: ${JSON.stringify(id)}`);
    return path.join(this.#snapshots, id);
  }

  /**
   * Makes the VMM's snapshot in dirFor(input.id) exist: its manifest, written atomically. When it cannot (no VMM
   * files, a layer parent the store does not hold), the directory is removed and the error thrown.
   */
  publish(input: PublishInput): Promise<Snapshot> {
    return this.#serial(async () => {
      const dir = this.dirFor(input.id);
      if (this.#entries.has(input.id)) throw new Error(`${input.id} is already published`);
      try {
        return this.#view(await this.#write(await this.#newManifest(input, dir)));
      } catch (error) {
        await removeSnapshotDir(dir);
        this.log(`store: removed ${input.id} : it could not be published (${(error as Error).message})`);
        throw error;
      }
    });
  }

  async #newManifest(input: PublishInput, dir: string): Promise<Manifest> {
    const missing = await missingVmmFiles(dir);
    if (missing.length) throw new Error(`cannot publish ${input.id}: no ${missing.join(' or ')} file in ${dir}`);
    const layerParent = input.layerParentDir === null ? null : await this.#idOfDir(input.layerParentDir);
    const disk = input.diskLayer === undefined ? {} : await this.#diskFields(input.diskLayer);
    const volumes = Object.entries(input.volumeLayers ?? {}) as Array<[DiskDevice, string]>;
    if (volumes.length > 0 && disk.diskLayers) {
      // A volume's chain goes down with the root disk's (every checkpoint freezes both): only its own layers count.
      for (const [, file] of volumes) disk.diskLayers.push(...(await this.#diskFields(file)).diskLayers!);
      Object.assign(disk, { diskDevices: ['virtio-blk', ...volumes.map(([device]) => device)] });
    }
    const images = (input.volumeImages ?? []).map((file) => path.basename(file));
    if (input.parent && !this.#entries.has(input.parent)) {
      this.log(`store: ${input.id} names an unknown parent ${input.parent}: it is shown as a root`);
    }
    return {
      format: MANIFEST_FORMAT,
      id: input.id,
      episode: input.episode,
      parent: input.parent,
      layerParent,
      vm: input.vm,
      kind: input.kind,
      name: input.name ?? '',
      note: input.note ?? '',
      created: this.#nextCreated(),
      memoryBytes: input.memoryBytes,
      cpus: input.cpus,
      deleted: false,
      ...(input.baseKey ? { baseKey: input.baseKey } : {}),
      ...disk,
      ...(images.length > 0 ? { volumeImages: images } : {}),
    };
  }

  /**
   * A frozen layer's manifest fields: its name, and the snapshot owning the nearest layer below it (its disk
   * parent). Layers between the two that no snapshot owns (frozen by a checkpoint or fork that failed after the VMM
   * switched layers) become this snapshot's too: it is the first that needs them.
   */
  async #diskFields(file: string): Promise<Pick<Manifest, 'diskLayers' | 'diskParent' | 'diskDevices'>> {
    const names = [this.#layerName(file)];
    for await (const below of layersBelow(file, this.#disks)) {
      const owner = [...this.#entries.values()].find((e) => e.manifest.diskLayers?.includes(below));
      if (owner) return { diskLayers: names, diskParent: owner.manifest.id };
      this.log(`store: ${names[0]} sits on ${below}, which no snapshot owned: the new snapshot owns it`);
      names.push(below);
    }
    return { diskLayers: names, diskParent: null };
  }

  #layerName(file: string): string {
    if (path.dirname(file) !== this.#disks) throw new Error(`${file} is not a disk layer of this store`);
    return path.basename(file);
  }

  /**
   * Gives snapshot `id` more layers to own: a fork freezes the layer its parent VM wrote after the fork point, and
   * the children's layers sit on it.
   */
  addDiskLayers(id: string, files: string[]): Promise<void> {
    return this.#serial(async () => {
      const entry = this.#entries.get(id);
      if (!entry) throw new Error(`no snapshot ${id}`);
      const names = files.map((file) => this.#layerName(file));
      await this.#write({ ...entry.manifest, diskLayers: [...(entry.manifest.diskLayers ?? []), ...names] });
    });
  }

  /**
   * Publishes snapshots unpacked elsewhere on this file system (a .smolmachine, docs/smolmachine.md), oldest first:
   * each directory is renamed to dirFor(id), then its manifest written. An id the store has is refused; the ones
   * published before a failure stay (each is whole), and their layer parents are there.
   */
  importSnapshots(snapshots: Array<{ manifest: Manifest; dir: string }>): Promise<Snapshot[]> {
    return this.#serial(async () => {
      const published: Snapshot[] = [];
      for (const { manifest, dir } of snapshots) {
        if (this.#entries.has(manifest.id)) throw new Error(`${manifest.id} is in the store already`);
        if (manifest.layerParent && !this.#entries.has(manifest.layerParent)) {
          throw new Error(`${manifest.id}'s layer parent ${manifest.layerParent} is not in the store`);
        }
        const created = this.#nextCreated();
        await rename(dir, this.dirFor(manifest.id));
        published.push(this.#view(await this.#write({ ...manifest, format: MANIFEST_FORMAT, created })));
      }
      return published;
    });
  }

  /** The snapshot, deleted or not (a deleted one is still there while a layer chain needs it). */
  get(id: string): Snapshot | undefined {
    const entry = this.#entries.get(id);
    return entry && this.#view(entry);
  }

  /** The living snapshots (of one episode, or all), oldest first: the timeline. `parent` skips deleted nodes. */
  list(episode?: string): Snapshot[] {
    return this.#living((m) => episode === undefined || m.episode === episode).map((entry) => this.#view(entry));
  }

  /** The newest living base snapshot made for `baseKey`. */
  findBase(baseKey: string): Snapshot | undefined {
    const bases = this.#living((m) => m.baseKey === baseKey);
    return bases.length ? this.#view(bases[bases.length - 1]!) : undefined;
  }

  /**
   * A living snapshot by id, unique id prefix (at least 4 characters after `sn-`, with or without `sn-`) or name.
   * With `episode`, names are looked up in that episode, then among base snapshots. 404 when nothing matches, 400
   * when a name or prefix matches more than one.
   */
  resolve(ref: string, episode?: string): Snapshot {
    const exact = this.#entries.get(ref);
    if (exact?.manifest.deleted) throw new ApiFailure(404, `snapshot ${ref} was deleted`);
    if (exact) return this.#view(exact);
    const bare = ref.startsWith('sn-') ? ref.slice(3) : ref;
    const byPrefix = /^[a-z2-7]{4,}$/.test(bare) ? this.#living((m) => m.id.startsWith(`sn-${bare}`)) : [];
    const named = (scope: (m: Manifest) => boolean) => this.#living((m) => m.name === ref && scope(m));
    let byName = named((m) => episode === undefined || m.episode === episode);
    if (!byName.length && episode !== undefined) byName = named((m) => m.episode === null);
    const matches = [...new Set([...byName, ...byPrefix])];
    if (matches.length === 1) return this.#view(matches[0]!);
    if (!matches.length) throw new ApiFailure(404, `no snapshot ${ref}${episode ? ` in ${episode}` : ''}`);
    const which = matches.map((e) => `${e.manifest.name || '(unnamed)'} (${e.manifest.id})`).join(', ');
    throw new ApiFailure(400, `${ref} is ambiguous: it matches ${which}`);
  }

  /** Renames a living snapshot (names are unique within its episode), changes its note, sets or removes labels. */
  update(id: string, change: UpdateSnapshotRequest): Promise<Snapshot> {
    return this.#serial(async () => {
      const entry = this.#require(id);
      const parsed = UpdateSnapshotRequest.safeParse(change);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        throw new ApiFailure(400, `${issue.path.join('.') || 'change'}: ${issue.message}`);
      }
      const { name, note, labels } = parsed.data;
      const episode = entry.manifest.episode;
      const holder = name && this.#living((m) => m.name === name && m.episode === episode && m.id !== id)[0];
      if (holder) throw new ApiFailure(409, `the name ${name} is taken by ${holder.manifest.id}`);
      const manifest = {
        ...entry.manifest,
        ...(name === undefined ? {} : { name }),
        ...(note === undefined ? {} : { note }),
        ...(labels === undefined ? {} : { labels: changedLabels(entry.manifest.labels, labels, id) }),
      };
      return this.#view(await this.#write(manifest));
    });
  }

  /** Takes a snapshot out of the tree and timeline (its children hang from its parent); gc() frees its files. */
  delete(id: string): Promise<void> {
    return this.#serial(async () => {
      const entry = this.#entries.get(id);
      if (!entry) throw new ApiFailure(404, `no snapshot ${id}`);
      if (!entry.manifest.deleted) await this.#write({ ...entry.manifest, deleted: true });
    });
  }

  /**
   * Removes the files of deleted snapshots that no layer chain needs: not the chain of any living snapshot, nor of
   * `liveLayerHeads` (the snapshots live VMs' next checkpoints will diff against).
   */
  gc(liveLayerHeads: Iterable<string>): Promise<{ removed: string[]; freedBytes: number }> {
    return this.#serial(() => this.#collect(liveLayerHeads));
  }

  /** Deletes every snapshot of the episode, then collects what no layer chain needs. */
  deleteEpisode(episode: string, liveLayerHeads: Iterable<string>): Promise<void> {
    return this.#serial(async () => {
      for (const entry of this.#living((m) => m.episode === episode)) {
        await this.#write({ ...entry.manifest, deleted: true });
      }
      await this.#collect(liveLayerHeads);
    });
  }

  /** SMOL_HOME/disks, symbolic links resolved. */
  get disksDir(): string {
    return this.#disks;
  }

  /** After its first disk layer was flattened onto the base: its disk no longer needs the snapshots below. */
  setDiskParent(id: string, diskParent: string | null): Promise<void> {
    return this.#serial(async () => {
      const entry = this.#entries.get(id);
      if (entry) await this.#write({ ...entry.manifest, diskParent });
    });
  }

  /** The snapshot's writable disks (docs/disks.md, "Volumes"): a restore gives each a new layer (newDiskLayer()). */
  diskDevices(id: string): DiskDevice[] {
    const manifest = this.#entries.get(id)?.manifest;
    if (!manifest?.diskLayers?.length) return [];
    return manifest.diskDevices ?? ['virtio-blk'];
  }

  /**
   * Each writable disk's frozen layer at the snapshot, by device (the root disk's first): of the layers it owns,
   * those no other of them sits on, in the order diskLayers lists them (docs/diff.md).
   */
  async diskTops(id: string): Promise<Array<{ device: DiskDevice; layer: string }>> {
    const names = this.#entries.get(id)?.manifest.diskLayers ?? [];
    const below = new Set<string>();
    for (const name of names) {
      const header = await readLayerHeader(path.join(this.#disks, name));
      if (header && path.dirname(header.below) === this.#disks) below.add(path.basename(header.below));
    }
    const tops = names.filter((name) => !below.has(name));
    return this.diskDevices(id).flatMap((device, i) =>
      tops[i] ? [{ device, layer: path.join(this.#disks, tops[i]) }] : [],
    );
  }

  /** The read-only volume images the snapshot's VM used (paths in SMOL_HOME/images). */
  volumeImages(id: string): string[] {
    const images = this.#entries.get(id)?.manifest.volumeImages ?? [];
    return images.map((name) => path.join(path.dirname(this.#disks), IMAGES_DIR, name));
  }

  /** Whether the snapshot's VM had a disk: restoring it needs a new disk layer (newDiskLayer()). */
  hasDisk(id: string): boolean {
    return (this.#entries.get(id)?.manifest.diskLayers?.length ?? 0) > 0;
  }

  /** Bytes the snapshot's own files take on disk (0 for an unknown id). */
  diskBytes(id: string): number {
    return this.#entries.get(id)?.diskBytes ?? 0;
  }

  /** Bytes the episode's snapshots take on disk, the deleted ones still kept for a layer chain included. */
  episodeDiskBytes(episode: string): number {
    let total = 0;
    for (const entry of this.#entries.values()) if (entry.manifest.episode === episode) total += entry.diskBytes;
    return total;
  }

  /**
   * Bumped whenever a snapshot's manifest is written or a snapshot is removed: what episodeTotals() counts can only
   * have changed when this has (the engine's cached episode list is keyed by it, engine.ts).
   */
  get version(): number {
    return this.#version;
  }

  /**
   * For every episode at once, in one pass: its living snapshots and episodeDiskBytes(). Listing 1,000 episodes
   * asks this once instead of going through every snapshot twice per episode.
   */
  episodeTotals(): Map<string, { count: number; diskBytes: number }> {
    const totals = new Map<string, { count: number; diskBytes: number }>();
    for (const { manifest, diskBytes } of this.#entries.values()) {
      if (manifest.episode === null) continue;
      let total = totals.get(manifest.episode);
      if (!total) totals.set(manifest.episode, (total = { count: 0, diskBytes: 0 }));
      if (!manifest.deleted) total.count++;
      total.diskBytes += diskBytes;
    }
    return totals;
  }

  // ---- episode records: SMOL_HOME/episodes/<ep-id>.json ----

  /** Writes the record atomically; of concurrent saves of one episode, the last call wins. */
  saveEpisodeRecord(id: string, record: unknown): Promise<void> {
    return this.#episodes.save(id, record);
  }

  /** Every record that reads as JSON; an unreadable one is moved aside (`<id>.json.corrupt`) and logged. */
  loadEpisodeRecords(): Array<{ id: string; record: unknown }> {
    return this.#episodes.load();
  }

  removeEpisodeRecord(id: string): Promise<void> {
    return this.#episodes.remove(id);
  }

  // ---- internals ----

  #serial<T>(work: () => Promise<T>): Promise<T> {
    const result = this.#queue.then(work);
    this.#queue = result.catch(() => undefined);
    return result;
  }

  async #collect(liveLayerHeads: Iterable<string>): Promise<{ removed: string[]; freedBytes: number }> {
    const doomed = unneededSnapshots(this.#entries, liveLayerHeads);
    // The tree outlives the files: whoever hangs from a removed snapshot is re-pointed past it first.
    for (const { manifest } of [...this.#entries.values()]) {
      if (doomed.has(manifest.id) || !manifest.parent || !doomed.has(manifest.parent)) continue;
      const parent = nearestAncestor(this.#entries, manifest.id, (m) => doomed.has(m.id));
      await this.#write({ ...manifest, parent });
    }
    const removed: string[] = [];
    let freedBytes = 0;
    for (const id of doomed) {
      const { diskBytes: bytes, manifest } = this.#entries.get(id)!;
      await removeSnapshotDir(this.dirFor(id));
      crashPoint('gc:removing');
      for (const name of manifest.diskLayers ?? []) await rm(path.join(this.#disks, name), { force: true });
      this.#entries.delete(id);
      this.#version++;
      removed.push(id);
      freedBytes += bytes;
      this.log(`store: removed ${id} : deleted and no layer chain needs it (${bytes} bytes freed)`);
    }
    return { removed, freedBytes };
  }

  async #write(manifest: Manifest): Promise<Entry> {
    const dir = this.dirFor(manifest.id);
    await writeManifest(dir, manifest);
    const entry = await storedSnapshot(dir, manifest, this.#disks);
    this.#entries.set(manifest.id, entry);
    this.#version++;
    return entry;
  }

  #require(id: string): Entry {
    const entry = this.#entries.get(id);
    if (!entry || entry.manifest.deleted) throw new ApiFailure(404, `no snapshot ${id}`);
    return entry;
  }

  /** Living entries that pass `filter`, oldest first. */
  #living(filter: (manifest: Manifest) => boolean): Entry[] {
    return [...this.#entries.values()]
      .filter((entry) => !entry.manifest.deleted && filter(entry.manifest))
      .sort((a, b) => a.createdMs - b.createdMs || a.manifest.id.localeCompare(b.manifest.id));
  }

  #view({ manifest, diskBytes }: Entry): Snapshot {
    const {
      format: _format,
      baseKey: _baseKey,
      diskLayers: _layers,
      diskParent: _diskParent,
      diskDevices: _devices,
      volumeImages: _images,
      ...fields
    } = manifest;
    const parent = nearestAncestor(this.#entries, manifest.id, (m) => m.deleted);
    return { ...fields, labels: fields.labels ?? {}, parent, diskBytes };
  }

  /** Creation times strictly increase within a store, so the timeline has one order. */
  #nextCreated(): string {
    this.#lastCreatedMs = Math.max(Date.now(), this.#lastCreatedMs + 1);
    return new Date(this.#lastCreatedMs).toISOString();
  }

  async #idOfDir(dir: string): Promise<string> {
    const real = await realpath(dir).catch(() => null);
    const id = real && path.dirname(real) === this.#realSnapshots ? path.basename(real) : null;
    if (!id || !this.#entries.has(id)) throw new Error(`the layer parent ${dir} is not a snapshot of this store`);
    return id;
  }
}
