// The engine (docs/engine.md): episodes and their VMs, each episode's VMs in one vmhost process, snapshots in the
// store, consoles in hubs. This file is the API's operations; engine-core.ts is the machinery under them. Every
// change is persisted before it is announced, and announced as an event.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import {
  ApiFailure,
  type ConsoleAttachment,
  type ConsoleViewer,
  type EngineApi,
  type EpisodesBody,
  type GuestFile,
  type GuestProcess,
  type GuestProcessIo,
} from '../api/engine-api.js';
import { AgentError } from '../agent-client/agent-client.js';
import type {
  CheckpointRequest,
  CreateEpisodeRequest,
  CreateEpisodeResponse,
  Episode,
  ExecRequest,
  ExecResult,
  ForkResponse,
  GcResult,
  Health,
  CreatedToken,
  CreateTokenRequest,
  ListenRequest,
  TokenInfo,
  AddEngineRequest,
  AddedEngine,
  EngineProbe,
  RemoteEngineInfo,
  Listener,
  Logs,
  MemoryStats,
  MetricsHistory,
  RestoreResponse,
  Screen,
  Snapshot,
  UpdateSnapshotRequest,
  UpdateVmRequest,
  Vm,
  VmNetwork,
} from '../api/schema.js';
import { formatProblem, loadSmolfile, parseSmolfile, type Smolfile } from '../smolfile/smolfile.js';
import { parseSmolfileText, pastedSmolfilePath } from '../smolfile/smolfile-text.js';
import { planBoot, prepareImage } from './boot-plan.js';
import { episodeWorkload, withWorkload } from './exec-workload.js';
import { EngineCore, KIND_STEMS, type EngineOptions } from './engine-core.js';
import { diffPoints, readRecording } from './episode-diff.js';
import { episodeRunDir } from './vmhost-jail.js';
import { WorkGate } from './work-gate.js';
import type { DiffQuery, DiffResponse } from '../api/diff-schema.js';
import { METRICS_INTERVAL_MS } from './metrics.js';
import { EpisodeRecord, LIVE_STATES, freshName, type VmRecord } from './episode-registry.js';
import { changedLabels } from './labels.js';
import { checkStore, untrusted } from './store-check.js';
import { imagesDir } from '../guest-build/debian-image.js';
import { removeLeftPartials } from '../guest-build/volume-image.js';
import { IMAGES_DIR } from './disk-layers.js';
import { admit, firstGuess, processUsage } from './fork-admission.js';
import {
  packSnapshot,
  placeMachineDisks,
  placeMachineFiles,
  removeImportLeftovers,
  removeTemp,
  unpackMachine,
  inspectMachineFile,
} from './machines.js';
import type {
  InspectMachineRequest,
  InspectMachineResponse,
  OpenMachineRequest,
  PackMachineRequest,
  PackMachineResponse,
} from '../api/machine-schema.js';
import { SnapshotStore, newId } from './snapshot-store.js';
import { crashPoint } from './crash-points.js';
import { isLoopback } from './tls-certificate.js';

export type { EngineOptions } from './engine-core.js';

export class Engine extends EngineCore implements EngineApi {
  readonly #started = new Date().toISOString();
  #shuttingDown: Promise<void> | null = null;

  /** Opens the store (recovering it), loads the episodes and resumes the VMs the last engine suspended. */
  static async open(options: EngineOptions): Promise<Engine> {
    const store = await SnapshotStore.open(options.home, options.log);
    await removeImportLeftovers(options.home, options.log);
    // Images a killed mke2fs, pull or copy left half-written (docs/disks.md, "Volumes"): their writer is gone.
    for (const dir of [path.join(options.home, IMAGES_DIR), imagesDir()]) {
      for (const name of removeLeftPartials(dir)) options.log(`engine: removed ${name} from ${dir}: its writer died`);
    }
    // What recovery could not mend by itself (docs/engine.md, "Checking the store"): refuse, and say how to repair.
    const problems = untrusted(await checkStore(options.home));
    if (problems.length > 0) {
      for (const p of problems) options.log(`store: ${p.path}: ${p.problem}`);
      const first = `${problems[0]!.path}: ${problems[0]!.problem}`;
      throw new Error(
        `the store in ${options.home} has ${problems.length} problem${problems.length > 1 ? 's' : ''} an engine ` +
          `cannot start on (${first}); run: smol store check --repair --home ${options.home}`,
      );
    }
    const engine = new Engine(store, options);
    await engine.#load();
    engine.startMetrics();
    return engine;
  }

  async #load(): Promise<void> {
    for (const { id, record } of this.store.loadEpisodeRecords()) {
      const parsed = EpisodeRecord.safeParse(record);
      if (!parsed.success) {
        this.options.log(`engine: episode ${id} is unreadable and was skipped: ${parsed.error.issues[0]?.message}`);
        continue;
      }
      const episode = parsed.data;
      this.episodes.set(episode.id, episode);
      for (const vm of episode.vms) {
        if (LIVE_STATES.has(vm.state)) {
          // The previous engine ended without suspending it (killed): its process went with it.
          vm.state = 'crashed';
          vm.runningSince = null;
          vm.exit = { reason: 'crashed', code: null, message: 'the engine ended while this VM ran' };
          this.options.log(`engine: ${vm.id} (${vm.name}) was running when the last engine ended: marked crashed`);
        }
      }
      await this.save(episode);
    }
    const { removed } = await this.store.gc(this.liveLayerHeads());
    if (removed.length > 0)
      this.options.log(`engine: removed ${removed.length} unneeded deleted snapshot(s) at start-up`);
  }

  /** Resumes the VMs that the last engine suspended when it stopped; failures are logged and leave them suspended. */
  async resumeSuspended(): Promise<void> {
    const waiting = [...this.episodes.values()].flatMap((ep) => ep.vms.filter((vm) => vm.resumeOnStart));
    await Promise.all(
      waiting.map((vm) =>
        this.start(vm.id).catch((error: unknown) =>
          this.options.log(`engine: could not resume ${vm.id}: ${(error as Error).message}`),
        ),
      ),
    );
  }

  // ---- queries ----

  health(): Health {
    return { version: this.options.version, pid: process.pid, home: this.options.home, started: this.#started };
  }

  listEpisodes(): Episode[] {
    const totals = this.store.episodeTotals();
    return [...this.episodes.values()].map((ep) => this.episodeView(ep, totals));
  }

  /** The list as the API sends it, built again only after a change it shows (listVersion, the store's version). */
  #listed: (EpisodesBody & { key: string }) | null = null;
  /** Tells this engine's ETags from an earlier engine's on the same data dir, whose versions counted from 0 too. */
  readonly #etagStem = randomBytes(6).toString('hex');

  episodesBody(): EpisodesBody {
    const key = `${this.listVersion}.${this.store.version}`;
    if (this.#listed?.key !== key) {
      const body = Buffer.from(JSON.stringify({ episodes: this.listEpisodes() }));
      this.#listed = { key, etag: `"${this.#etagStem}.${key}"`, body };
    }
    return this.#listed;
  }

  getEpisode(ref: string): Episode {
    return this.episodeView(this.episode(ref));
  }

  listVms(): Vm[] {
    return [...this.episodes.values()].flatMap((ep) => ep.vms.map((vm) => this.view(vm)));
  }

  getVm(ref: string): Vm {
    return this.view(this.vm(ref));
  }

  listSnapshots(episodeRef: string): Snapshot[] {
    const episode = this.episode(episodeRef);
    const base = episode.base ? this.store.get(episode.base) : undefined;
    return [...(base ? [base] : []), ...this.store.list(episode.id)];
  }

  getSnapshot(ref: string): Snapshot {
    return this.store.resolve(ref);
  }

  /** Diffs export every disk twice and run a sandboxed reader: two at once, eight waiting (docs/diff.md, "Cost"). */
  readonly #diffs = new WorkGate('diffs', 2, 8);

  /** What changed between two snapshots of an episode: each disk's files and the console between (docs/diff.md). */
  diff(query: DiffQuery): Promise<DiffResponse> {
    return this.#diffs.run(() => this.#diff(query));
  }

  async #diff(query: DiffQuery): Promise<DiffResponse> {
    const [from, to] = [this.store.resolve(query.from), this.store.resolve(query.to)];
    const episodeId = from.episode ?? to.episode;
    const episode = episodeId ? this.episodes.get(episodeId) : undefined;
    if (!episode || (from.episode && to.episode && from.episode !== to.episode)) {
      throw new ApiFailure(400, `${query.from} and ${query.to} are not snapshots of one episode`);
    }
    const point = async (snapshot: Snapshot) => ({
      snapshot,
      marker: `${KIND_STEMS[snapshot.kind]} ${snapshot.name}`,
      disks: await this.store.diskTops(snapshot.id),
    });
    const context = {
      runDir: episodeRunDir(this.options.home, episode.id),
      exportDisk: async (layer: string, out: string) =>
        void (await this.host(episode).call('exportDisk', { path: layer, out })),
      recording: (vm: string) => this.hubs.get(vm)?.recordingText() ?? readRecording(this.options.home, vm),
      env: process.env,
    };
    return diffPoints(context, await point(from), await point(to));
  }

  logs(vmRef: string, tailLines?: number): Logs {
    return this.hub(this.vm(vmRef)).logs(tailLines);
  }

  screen(vmRef: string): Screen {
    return this.hub(this.vm(vmRef)).screen();
  }

  recording(vmRef: string): string {
    return this.hub(this.vm(vmRef)).recordingText();
  }

  // ---- episodes ----

  /** Image builds, one at a time (two `up`s of one Smolfile must not build its image twice at once). */
  #imageBuilds: Promise<unknown> = Promise.resolve();

  /** Builds the Smolfile's image if it needs building, with `progress` events (operation `image`) as it goes. */
  #prepareImage(smolfile: Smolfile): Promise<void> {
    let lastStep = '';
    const build = this.#imageBuilds.then(() =>
      prepareImage(smolfile, ({ step, detail, fraction }) => {
        if (step !== lastStep) this.options.log(`engine: image ${smolfile.path}: ${step}: ${detail}`);
        lastStep = step;
        this.emit({
          type: 'progress',
          operation: 'image',
          vm: null,
          done: Math.round((fraction ?? 0) * 1000),
          total: 1000,
        });
      }),
    );
    this.#imageBuilds = build.catch(() => undefined);
    return build;
  }

  async createEpisode(request: CreateEpisodeRequest): Promise<CreateEpisodeResponse> {
    // A path (read from disk) or the text itself (the app's editor: docs/smolfile.md, "A Smolfile as text").
    const given = request.text === undefined ? null : { text: request.text, directory: request.directory };
    const file = given ? pastedSmolfilePath(given) : path.resolve(request.smolfile ?? '');
    let result;
    try {
      result = given ? parseSmolfileText(given) : await loadSmolfile(file);
    } catch (error) {
      throw new ApiFailure(400, (error as Error).message);
    }
    if (!result.smolfile) {
      const shown = given ? 'the Smolfile text' : file;
      const errors = result.problems.filter((p) => p.severity === 'error').map((p) => formatProblem(shown, p));
      throw new ApiFailure(400, `the Smolfile has errors:\n${errors.join('\n')}`);
    }
    const smolfile = result.smolfile;
    await this.#prepareImage(smolfile);
    const plan = planBoot(smolfile);
    const text = given ? given.text : await readFile(file, 'utf8');
    // From here to `episodes.set` nothing awaits: two concurrent `up`s cannot take the same name.
    const names = [...this.episodes.values()].map((ep) => ep.name);
    if (request.name && names.includes(request.name)) {
      throw new ApiFailure(409, `an episode named ${request.name} exists already`);
    }
    const stem = path.basename(file).replace(/\.smolfile$|\.toml$/, '') || 'episode';
    const episode: EpisodeRecord = {
      format: 1,
      id: newId('ep'),
      name: request.name ?? freshName(stem, names),
      smolfile: given ? { path: file, text, given: 'text' } : { path: file, text },
      created: new Date().toISOString(),
      base: null,
      vms: [],
      autoCheckpoint: { everyMs: smolfile.snapshots.autoCheckpointMs, keep: smolfile.snapshots.keep },
      counters: {},
    };
    const vm = this.newVmRecord(episode, smolfile.cpus, smolfile.memoryMiB, episode.name);
    this.episodes.set(episode.id, episode);
    await this.save(episode);
    this.emit({ type: 'episode.created', episode: this.episodeView(episode) });
    try {
      await this.withLock(vm.id, () => this.bootFresh(episode, vm, smolfile, plan));
    } catch (error) {
      await this.killVm(vm);
      if (vm.state !== 'crashed')
        await this.setState(episode, vm, 'crashed', {
          reason: 'error',
          code: null,
          message: (error as Error).message,
        });
      throw error;
    }
    return { episode: this.episodeView(episode), vm: this.view(vm) };
  }

  async deleteEpisode(ref: string, force: boolean): Promise<void> {
    const episode = this.episode(ref);
    const live = episode.vms.filter((vm) => LIVE_STATES.has(vm.state));
    if (live.length > 0 && !force) {
      throw new ApiFailure(409, `${episode.name} has ${live.length} running VM(s); stop them or use --force`);
    }
    await Promise.all(episode.vms.map((vm) => this.withLock(vm.id, () => this.killVm(vm))));
    await this.closeHost(episode.id);
    for (const vm of episode.vms) {
      await this.closeHub(vm.id, 'the episode was deleted');
      this.metricsHistory.remove(vm.id);
      this.networks.forget(vm.id);
    }
    this.episodes.delete(episode.id);
    await this.store.deleteEpisode(episode.id, this.liveLayerHeads());
    await rm(episodeRunDir(this.options.home, episode.id), { recursive: true, force: true });
    await this.store.removeEpisodeRecord(episode.id);
    this.emit({ type: 'episode.deleted', id: episode.id });
  }

  // ---- portable machines (docs/smolmachine.md) ----

  /**
   * Packs a VM or a snapshot into a .smolmachine file. A live VM is checkpointed first (it pauses only as long as a
   * checkpoint does) and its console screen goes in too; a stopped or suspended one packs the snapshot it is at.
   */
  async packMachine(request: PackMachineRequest): Promise<PackMachineResponse> {
    const vm = this.#vmOrNull(request.source);
    const out = path.resolve(request.path);
    // Checked before a running VM is checkpointed for it: a path that cannot be written costs nothing.
    await this.#packDestination(out);
    let snapshot: Snapshot;
    let screen: string | null = null;
    if (vm) {
      snapshot = await this.withLock(vm.id, async () => {
        if (LIVE_STATES.has(vm.state)) return this.checkpointVm(vm, 'manual', { note: `packed into ${out}` });
        const at = vm.suspendedAt ?? vm.snapshot;
        if (!at) throw new ApiFailure(409, `${vm.name} (${vm.id}) is ${vm.state} and at no snapshot: nothing to pack`);
        return this.store.resolve(at);
      });
      await this.hubs.get(vm.id)?.settled();
      screen = this.hubs.get(vm.id)?.screen().serialized ?? null;
    } else snapshot = this.store.resolve(request.source);
    const episode = [...this.episodes.values()].find((ep) => ep.id === snapshot.episode || ep.base === snapshot.id);
    if (!episode) throw new ApiFailure(409, `${snapshot.id} belongs to no episode left, so its Smolfile is unknown`);
    const { bytes, manifest } = await packSnapshot({
      store: this.store,
      snapshot: snapshot.id,
      smolfile: episode.smolfile,
      screen,
      version: this.options.version,
      from: request.source,
      out,
      onProgress: (done, total) =>
        this.emit({ type: 'progress', operation: 'pack', vm: vm?.id ?? null, done, total, ...requestOf(request) }),
    });
    this.options.log(`engine: packed ${snapshot.id} into ${out} (${bytes} bytes)`);
    return { path: out, bytes, snapshot, memoryData: manifest.totals.memoryData, layers: manifest.snapshots.length };
  }

  /**
   * Where a packed file may go: into a folder that exists, or `SMOL_HOME/exports/` (the UI's default), which is made
   * when missing. Any other missing folder is refused rather than made (a mistyped path would leave folders behind).
   */
  async #packDestination(out: string): Promise<void> {
    const folder = path.dirname(out);
    const exports = path.join(this.options.home, 'exports');
    if (folder === exports) await mkdir(exports, { recursive: true });
    const info = await stat(folder).catch(() => null);
    if (!info)
      throw new ApiFailure(
        400,
        `cannot write ${out}: the folder ${folder} does not exist (the engine makes only ${exports} by itself)`,
      );
    if (!info.isDirectory()) throw new ApiFailure(400, `cannot write ${out}: ${folder} is not a folder`);
    if ((await stat(out).catch(() => null))?.isDirectory())
      throw new ApiFailure(400, `cannot write ${out}: it is a folder; name the file to write`);
  }

  /** What a .smolmachine file holds (docs/smolmachine.md), for deciding whether to open it; writes nothing. */
  inspectMachine(request: InspectMachineRequest): Promise<InspectMachineResponse> {
    return inspectMachineFile(path.resolve(request.path));
  }

  /**
   * A new episode from a .smolmachine file: checked whole and unpacked before anything reaches the store, then its
   * snapshots published under their own ids, and the first VM restored from the packed one with its screen.
   */
  async openMachine(request: OpenMachineRequest): Promise<CreateEpisodeResponse> {
    const file = path.resolve(request.path);
    const unpacked = await unpackMachine(this.options.home, this.store, file, (done, total) =>
      this.emit({
        type: 'progress',
        operation: 'open',
        vm: null,
        done: Math.round(done),
        total,
        ...requestOf(request),
      }),
    );
    const names = [...this.episodes.values()].map((ep) => ep.name);
    if (request.name && names.includes(request.name)) {
      await removeTemp(unpacked);
      throw new ApiFailure(409, `an episode named ${request.name} exists already`);
    }
    const m = unpacked.manifest;
    const top = m.snapshots[m.snapshots.length - 1]!.manifest;
    const id = newId('ep');
    let smolfilePath: string;
    let placedDisks: string[] = [];
    try {
      smolfilePath = await placeMachineFiles(this.options.home, unpacked, id);
      // Images and layers before the snapshots that need them: a published snapshot's chain is always whole.
      placedDisks = await placeMachineDisks(unpacked);
      // The chain below the packed snapshot is kept (deleted: not in the timeline) for its memory layers.
      await this.store.importSnapshots(
        unpacked.snapshots.map(({ manifest, dir }) => {
          const isTop = manifest.id === top.id;
          return {
            dir,
            manifest: {
              ...manifest,
              episode: id,
              vm: null,
              parent: null,
              kind: manifest.kind === 'base' ? 'manual' : manifest.kind,
              deleted: !isTop,
              note: isTop
                ? `opened from ${path.basename(file)} (packed ${m.made.at} on ${m.made.host})`
                : manifest.note,
            },
          };
        }),
      );
    } catch (error) {
      // Nothing of a failed open stays: the snapshots it published go, and so do its Smolfile and boot files.
      for (const { manifest } of unpacked.snapshots) {
        if (this.store.get(manifest.id)?.episode === id) await this.store.delete(manifest.id);
      }
      await this.store.gc(this.liveLayerHeads());
      for (const file of placedDisks) await rm(file, { force: true });
      await rm(path.join(this.options.home, 'machines', id), { recursive: true, force: true });
      throw error;
    } finally {
      await removeTemp(unpacked);
    }
    const stem = path.basename(file).replace(/\.smolmachine$/, '') || 'machine';
    const text = await readFile(smolfilePath, 'utf8');
    const policy = parseSmolfile(text, { path: smolfilePath }).smolfile?.snapshots;
    const episode: EpisodeRecord = {
      format: 1,
      id,
      name: request.name ?? freshName(stem, names),
      smolfile: { path: smolfilePath, text },
      created: new Date().toISOString(),
      base: null,
      vms: [],
      autoCheckpoint: { everyMs: policy?.autoCheckpointMs ?? null, keep: policy?.keep ?? 0 },
      counters: {},
    };
    const vm = this.newVmRecord(episode, top.cpus, Math.round(top.memoryBytes / 2 ** 20), episode.name);
    this.episodes.set(episode.id, episode);
    await this.save(episode);
    this.emit({ type: 'episode.created', episode: this.episodeView(episode) });
    if (m.console) this.hub(vm).push(Buffer.from(m.console.screen));
    this.hub(vm).marker(`opened from ${path.basename(file)}`);
    const snapshot = this.store.get(top.id)!;
    await this.withLock(vm.id, () => this.restoreInto(episode, vm, snapshot));
    return { episode: this.episodeView(episode), vm: this.view(vm) };
  }

  /** The VM `ref` names, or null when it names none (it may name a snapshot). */
  #vmOrNull(ref: string): VmRecord | null {
    try {
      return this.vm(ref);
    } catch (error) {
      if (error instanceof ApiFailure && error.status === 404) return null;
      throw error;
    }
  }

  // ---- VM operations ----

  checkpoint(vmRef: string, request: CheckpointRequest): Promise<Snapshot> {
    const vm = this.vm(vmRef);
    return this.withLock(vm.id, () => this.checkpointVm(vm, 'manual', request));
  }

  forkVm(vmRef: string, count: number): Promise<ForkResponse> {
    const vm = this.vm(vmRef);
    const episode = this.episodeOf(vm);
    return this.withLock(vm.id, async () => {
      this.requireLive(vm);
      const host = this.host(episode);
      const wasRunning = vm.state === 'running';
      if (wasRunning) await host.call('pause', { vm: this.instance(vm) });
      // The children are locked until they run: an `rm` of one waits for the fork instead of racing it.
      let release = () => {};
      const held = new Promise<void>((resolve) => (release = resolve));
      try {
        // Paused from here to the last wave, so every child starts exactly at the fork point.
        const point = await this.checkpointVm(vm, 'fork', {});
        const children = Array.from({ length: count }, () => this.newChild(episode, vm, point.id));
        for (const child of children) void this.withLock(child.id, () => held).catch(() => undefined);
        await this.save(episode);
        // Every child shows `creating` from here: queued until its wave is admitted.
        for (const child of children) this.emit({ type: 'vm.updated', vm: this.view(child) });
        // Each child's console starts with the parent's screen at the fork point.
        await this.hubs.get(vm.id)?.settled();
        const screen = this.hubs.get(vm.id)?.screen().serialized;
        for (const child of children) {
          if (screen) this.hub(child).push(Buffer.from(screen));
          this.hub(child).marker(`forked from ${vm.name} at ${point.name}`);
        }
        // Waves as the host can take them (fork-admission.ts); what one child cost is measured on each wave.
        let cost = firstGuess(vm.memoryMiB * 2 ** 20);
        let started = 0;
        while (started < count) {
          await host.ready;
          const pid = host.pid!;
          const before = processUsage(pid);
          const wave = children.slice(started, started + (await admit(pid, count - started, cost)));
          try {
            await this.#forkWave(vm, point.id, wave);
          } catch (error) {
            // The children of earlier waves run on; this wave's and the ones still queued are crashed.
            const exit = { reason: 'error', code: null, message: `the fork failed: ${(error as Error).message}` };
            for (const child of children.slice(started)) {
              await this.killVm(child);
              await this.setState(episode, child, 'crashed', exit);
            }
            throw error;
          }
          started += wave.length;
          const after = processUsage(pid);
          cost = {
            fds: Math.max(1, Math.ceil((after.fds - before.fds) / wave.length)),
            bytes: Math.max(2 ** 20, Math.ceil((after.rssBytes - before.rssBytes) / wave.length)),
          };
        }
        this.hub(vm).marker(`fork ×${count} at ${point.name}`);
        return { children: children.map((child) => this.view(child)), snapshot: point };
      } finally {
        release();
        if (wasRunning && LIVE_STATES.has(vm.state)) await host.call('resume', { vm: this.instance(vm) });
      }
    });
  }

  /**
   * One vmhost fork call for `wave` children of the paused `vm`; they are `running` (one event each) when it ends.
   * With a disk, each call freezes the layer the parent wrote since the last (nothing: it is paused), the parent
   * goes on with a new one and each child gets its own over it; the fork point owns the frozen ones.
   */
  async #forkWave(vm: VmRecord, pointId: string, wave: VmRecord[]): Promise<void> {
    const episode = this.episodeOf(vm);
    const parent = this.live(vm);
    // Every writable disk (the root disk, writable volumes: docs/disks.md, "Volumes") switches together.
    const tops = parent.diskTops;
    const devices = tops.map(([device]) => device);
    const instances = wave.map((child) => {
      const live = this.attach(child, devices);
      live.volumeImages = [...parent.volumeImages];
      return live;
    });
    const next = tops.map(([device]) => [device, this.store.newDiskLayer()] as const);
    const record = (layers: string[]) =>
      this.store
        .addDiskLayers(pointId, layers)
        // A failure here is the store's, not the fork's: the children run, and the first snapshot on it takes it.
        .catch((e: Error) => this.options.log(`engine: the fork point keeps no record of ${layers}: ${e.message}`));
    try {
      await this.host(episode).call('fork', {
        vm: parent.name,
        resources: Object.fromEntries(next.map(([device, file]) => [device, { path: file }])),
        children: instances.map(({ name, resources }) => ({ vm: name, resources })),
      });
    } catch (error) {
      const frozen: string[] = [];
      for (const [i, [device, top]] of tops.entries()) {
        if (await this.settleFailedDiskSwitch(parent, top, next[i]![1], device)) frozen.push(top);
      }
      if (frozen.length > 0) await record(frozen);
      throw error;
    }
    crashPoint('fork:children-made');
    for (const [device, file] of next) parent.writes(file, device);
    if (tops.length > 0) await record(tops.map(([, top]) => top));
    wave.forEach((child, i) => this.watchAgent(child, instances[i]!, { remint: true }));
    for (const child of wave) await this.setState(episode, child, 'running');
  }

  async forkSnapshot(snapshotRef: string, count: number): Promise<ForkResponse> {
    const snapshot = this.store.resolve(snapshotRef);
    if (!snapshot.episode)
      throw new ApiFailure(400, `${snapshot.id} is a base snapshot: fork a VM or an episode's snapshot`);
    const episode = this.episode(snapshot.episode);
    const source = episode.vms.find((vm) => vm.id === snapshot.vm);
    const children = Array.from({ length: count }, () => this.newChild(episode, source ?? null, snapshot.id));
    await this.save(episode);
    // Restores in waves, as for a fork of a VM: the children not yet admitted show `creating`.
    const host = this.host(episode);
    let cost = firstGuess(snapshot.memoryBytes);
    for (let started = 0; started < count;) {
      await host.ready;
      const pid = host.pid!;
      const before = processUsage(pid);
      const wave = children.slice(started, started + (await admit(pid, count - started, cost)));
      await Promise.all(
        wave.map((child) =>
          this.withLock(child.id, async () => {
            this.hub(child).marker(`forked from ${snapshot.name}`);
            await this.restoreInto(episode, child, snapshot, { remint: true });
          }),
        ),
      );
      started += wave.length;
      const after = processUsage(pid);
      cost = {
        fds: Math.max(1, Math.ceil((after.fds - before.fds) / wave.length)),
        bytes: Math.max(2 ** 20, Math.ceil((after.rssBytes - before.rssBytes) / wave.length)),
      };
    }
    return { children: children.map((child) => this.view(child)), snapshot: null };
  }

  restore(vmRef: string, snapshotRef: string): Promise<RestoreResponse> {
    const vm = this.vm(vmRef);
    const episode = this.episodeOf(vm);
    const target = this.store.resolve(snapshotRef, episode.id);
    if (target.episode !== episode.id && target.id !== episode.base) {
      throw new ApiFailure(400, `${target.name} (${target.id}) belongs to another episode`);
    }
    return this.withLock(vm.id, async () => {
      let savedAs: Snapshot | null = null;
      if (LIVE_STATES.has(vm.state)) savedAs = await this.checkpointVm(vm, 'restore-point', {});
      else if (vm.suspendedAt) savedAs = this.store.get(vm.suspendedAt) ?? null;
      await this.killVm(vm);
      crashPoint('restore:old-killed');
      vm.suspendedAt = null; // where it was is `savedAs` now; a suspended VM restored is no longer suspended
      vm.resumeOnStart = false;
      this.hub(vm).marker(`restore ${target.name}`); // before it runs: what follows is the restored VM's
      await this.restoreInto(episode, vm, target);
      return { vm: this.view(vm), savedAs };
    });
  }

  stop(vmRef: string): Promise<Vm> {
    const vm = this.vm(vmRef);
    return this.withLock(vm.id, async () => {
      this.requireLive(vm);
      await this.suspendVm(vm, false);
      return this.view(vm);
    });
  }

  start(vmRef: string): Promise<Vm> {
    const vm = this.vm(vmRef);
    const episode = this.episodeOf(vm);
    return this.withLock(vm.id, async () => {
      if (LIVE_STATES.has(vm.state)) throw new ApiFailure(409, `${vm.name} is ${vm.state} already`);
      const suspended = vm.state === 'suspended' && vm.suspendedAt ? this.store.get(vm.suspendedAt) : undefined;
      if (suspended) {
        const paused = vm.suspendedPaused;
        this.hub(vm).marker(`resume from ${suspended.name}`);
        await this.restoreInto(episode, vm, suspended, { paused });
      } else {
        await this.resetVm(episode, vm);
      }
      vm.resumeOnStart = false;
      vm.suspendedAt = null;
      await this.save(episode);
      return this.view(vm);
    });
  }

  pause(vmRef: string): Promise<Vm> {
    return this.#flip(vmRef, 'running', 'paused');
  }

  resume(vmRef: string): Promise<Vm> {
    return this.#flip(vmRef, 'paused', 'running');
  }

  /** Pause (running → paused) or resume (paused → running): the vCPUs stop or go on, nothing else changes. */
  #flip(vmRef: string, from: 'running' | 'paused', to: 'running' | 'paused'): Promise<Vm> {
    const vm = this.vm(vmRef);
    return this.withLock(vm.id, async () => {
      if (vm.state !== from) throw new ApiFailure(409, `${vm.name} is ${vm.state}, not ${from}`);
      const op = to === 'paused' ? 'pause' : 'resume';
      await this.host(this.episodeOf(vm)).call(op, { vm: this.instance(vm) });
      await this.setState(this.episodeOf(vm), vm, to);
      if (to === 'running') this.recheckAgent(vm);
      return this.view(vm);
    });
  }

  reset(vmRef: string): Promise<Vm> {
    const vm = this.vm(vmRef);
    return this.withLock(vm.id, async () => {
      await this.resetVm(this.episodeOf(vm), vm);
      return this.view(vm);
    });
  }

  removeVm(vmRef: string, force: boolean): Promise<void> {
    const vm = this.vm(vmRef);
    const episode = this.episodeOf(vm);
    return this.withLock(vm.id, async () => {
      if (LIVE_STATES.has(vm.state) && !force) {
        throw new ApiFailure(409, `${vm.name} is ${vm.state}; stop it first or use --force`);
      }
      await this.killVm(vm);
      await this.closeHub(vm.id, 'the VM was removed');
      episode.vms = episode.vms.filter((other) => other.id !== vm.id);
      vm.state = 'destroyed';
      await this.save(episode);
      this.metricsHistory.remove(vm.id);
      this.networks.forget(vm.id);
      this.emit({ type: 'vm.removed', id: vm.id, episode: episode.id });
      this.emit({ type: 'episode.updated', episode: this.episodeView(episode) });
    });
  }

  metrics(vmRef: string): MetricsHistory {
    const vm = this.vm(vmRef);
    return { vm: vm.id, intervalMs: METRICS_INTERVAL_MS, samples: this.metricsHistory.samples(vm.id) };
  }

  async network(vmRef: string, after = 0): Promise<VmNetwork> {
    const vm = this.vm(vmRef);
    const enabled = this.networkEnabled(vm);
    const live = enabled && LIVE_STATES.has(vm.state) ? this.liveNetwork(vm) : undefined;
    // A live VM's stack is read now, so that the answer is its current counters and refusals.
    const info = live?.network?.running ? await this.networks.read(live).catch(() => null) : null;
    return this.networks.view(vm.id, enabled, live, info, after);
  }

  async memoryStats(vmRef: string): Promise<MemoryStats> {
    const vm = this.vm(vmRef);
    this.requireLive(vm);
    return await this.host(this.episodeOf(vm)).call('stats', { vm: this.instance(vm) });
  }

  writeConsole(vmRef: string, data: string): void {
    const vm = this.vm(vmRef);
    this.writeTo(vm, Buffer.from(data));
  }

  // ---- the guest agent: commands and files (docs/agent.md) ----

  async exec(vmRef: string, asked: ExecRequest): Promise<ExecResult> {
    const vm = this.vm(vmRef);
    const agent = await this.agentOf(vm);
    const request = withWorkload(asked, episodeWorkload(this.episodeOf(vm)));
    const stdout = new OutputCap('stdout');
    const stderr = new OutputCap('stderr');
    const result = await guestCall(
      agent.exec(request.argv, {
        ...execOptions(request),
        ...(request.stdin !== undefined && { stdin: request.stdin }),
        onStdout: (chunk) => stdout.add(chunk),
        onStderr: (chunk) => stderr.add(chunk),
      }),
    );
    return { ...exitOf(result), stdout: stdout.text(), stderr: stderr.text() };
  }

  async spawn(vmRef: string, asked: Omit<ExecRequest, 'stdin'>, io: GuestProcessIo): Promise<GuestProcess> {
    const vm = this.vm(vmRef);
    const agent = await this.agentOf(vm);
    const request = withWorkload(asked, episodeWorkload(this.episodeOf(vm)));
    const process = agent.spawn(request.argv, {
      ...execOptions(request),
      ...(io.stdin && { stdin: io.stdin }),
      onStdout: io.stdout,
      onStderr: io.stderr,
    });
    process.result.catch(() => undefined); // a start that fails rejects both; the caller hears it through pid
    await guestCall(process.pid);
    return {
      exit: guestCall(process.result).then(exitOf),
      kill: (signal) => guestCall(process.kill(signal)),
      resize: (size) => guestCall(process.resize(size)),
    };
  }

  async readFile(vmRef: string, path: string): Promise<GuestFile> {
    const vm = this.vm(vmRef);
    const agent = await this.agentOf(vm);
    const file = await guestCall(agent.openFile(path));
    return { size: file.size, mode: file.mode, stream: file.stream as AsyncIterable<Buffer> };
  }

  async writeFile(
    vmRef: string,
    path: string,
    data: AsyncIterable<Uint8Array>,
    mode?: number,
  ): Promise<{ bytes: number }> {
    const vm = this.vm(vmRef);
    const agent = await this.agentOf(vm);
    return await guestCall(agent.writeFile(path, data, { ...(mode !== undefined && { mode }), mkdirs: true }));
  }

  attachConsole(vmRef: string, viewer: ConsoleViewer): ConsoleAttachment {
    const vm = this.vm(vmRef);
    const attachment = this.hub(vm).attach(viewer);
    return {
      write: (data) => this.writeTo(vm, typeof data === 'string' ? Buffer.from(data) : data),
      detach: () => attachment.detach(),
    };
  }

  /** Sets or removes a VM's labels (docs/labels.md): saved in its episode's record, announced as vm.updated. */
  async updateVm(ref: string, request: UpdateVmRequest): Promise<Vm> {
    const vm = this.vm(ref);
    vm.labels = changedLabels(vm.labels, request.labels, vm.id);
    await this.save(this.episodeOf(vm));
    const view = this.view(vm);
    this.emit({ type: 'vm.updated', vm: view });
    return view;
  }

  async updateSnapshot(ref: string, request: UpdateSnapshotRequest): Promise<Snapshot> {
    const snapshot = await this.store.update(this.store.resolve(ref).id, request);
    this.emit({ type: 'snapshot.updated', snapshot });
    return snapshot;
  }

  async deleteSnapshot(ref: string): Promise<void> {
    const snapshot = this.store.resolve(ref);
    if (snapshot.kind === 'base') throw new ApiFailure(409, `${snapshot.id} is a base snapshot; delete its episodes`);
    await this.store.delete(snapshot.id);
    crashPoint('delete:marked');
    this.emit({ type: 'snapshot.deleted', id: snapshot.id, episode: snapshot.episode });
    await this.store.gc(this.liveLayerHeads());
  }

  gc(): Promise<GcResult> {
    return this.store.gc(this.liveLayerHeads());
  }

  /** Set by the engine process: its API server's TCP listeners, for `smol serve`. */
  listeners: {
    /** `tls`: HTTPS, with the files given or (both null) the data dir's self-signed certificate. */
    add: (host: string, port: number, tls: { cert: string | null; key: string | null } | null) => Promise<Listener>;
    close: (port: number) => Promise<boolean>;
    /** A new token for the data dir (SMOL_HOME/serve-token) that every open listener takes at once. */
    rotateToken: () => void;
  } | null = null;

  /** Set by the engine process: the data dir's named tokens (api-tokens.ts), which its listeners accept. */
  tokens: {
    list(): TokenInfo[];
    create(name: string, scope: CreateTokenRequest['scope']): CreatedToken;
    remove(name: string): void;
  } | null = null;

  async listen(request: ListenRequest): Promise<Listener> {
    if (!this.listeners) throw new ApiFailure(503, 'this engine cannot open TCP listeners');
    const where = `${request.host}:${request.port}`;
    if ((request.cert === undefined) !== (request.key === undefined)) {
      throw new ApiFailure(400, `cannot listen on ${where}: a certificate needs its key (cert and key together)`);
    }
    const tls =
      request.tls || request.cert !== undefined ? { cert: request.cert ?? null, key: request.key ?? null } : null;
    if (!tls && !isLoopback(request.host)) {
      throw new ApiFailure(
        400,
        `cannot listen on ${where} without TLS: beyond this machine's loopback the token would cross the network ` +
          'in the clear (smol serve --tls)',
      );
    }
    if (request.rotateToken) {
      this.listeners.rotateToken();
      this.options.log('engine: a new token for the TCP listeners (the old one opens nothing now)');
    }
    try {
      const listener = await this.listeners.add(request.host, request.port, tls);
      const how = tls ? `TLS, certificate SHA-256 ${listener.fingerprint}` : 'plain HTTP';
      this.options.log(`engine: listening on ${request.host}:${listener.port} (${how}; token required)`);
      return listener;
    } catch (error) {
      throw new ApiFailure(400, `cannot listen on ${where}: ${(error as Error).message}`);
    }
  }

  #tokens() {
    if (!this.tokens) throw new ApiFailure(503, 'this engine keeps no named tokens');
    return this.tokens;
  }

  listTokens(): TokenInfo[] {
    return this.#tokens().list();
  }

  createToken(request: CreateTokenRequest): CreatedToken {
    return this.#tokens().create(request.name, request.scope);
  }

  removeToken(name: string): void {
    this.#tokens().remove(name);
  }

  /** Set by the engine process: the remote engines the app reaches through this one (remote-engines.ts). */
  remotes: {
    list(): RemoteEngineInfo[];
    probe(url: string): Promise<EngineProbe>;
    add(request: AddEngineRequest): Promise<AddedEngine>;
    remove(name: string): void;
  } | null = null;

  #remotes() {
    if (!this.remotes) throw new ApiFailure(503, 'this engine reaches no remote engines');
    return this.remotes;
  }

  listEngines(): RemoteEngineInfo[] {
    return this.#remotes().list();
  }

  probeEngine(url: string): Promise<EngineProbe> {
    return this.#remotes().probe(url);
  }

  addEngine(request: AddEngineRequest): Promise<AddedEngine> {
    return this.#remotes().add(request);
  }

  removeEngine(name: string): void {
    this.#remotes().remove(name);
  }

  async unlisten(port: number): Promise<void> {
    if (!(await this.listeners?.close(port))) throw new ApiFailure(404, `no TCP listener on port ${port}`);
    this.options.log(`engine: stopped listening on port ${port}`);
  }

  /** Set by the engine process: how an API request to stop the engine ends it (after answering). */
  onShutdownRequest: (() => void) | null = null;

  /**
   * Ends the engine after suspending its live VMs. Unless `force`, every live VM is suspended first and the engine
   * stays when one cannot be (a full disk): that VM goes on running and the request fails saying which and why, so
   * a stop never throws a guest's running state away unasked.
   */
  async shutdown({ force = false }: { force?: boolean } = {}): Promise<void> {
    if (!force) {
      const failed = (await Promise.all(this.#suspendEach())).filter((why) => why !== null);
      if (failed.length > 0) {
        const message =
          `the engine did not stop: ${failed.length === 1 ? 'a VM' : `${failed.length} VMs`} could not be ` +
          `suspended (any others are). ${failed.join('. ')}. Make room and stop again, or stop with force ` +
          `(smol engine stop --force) to lose their running state`;
        // No space for a snapshot is HTTP 507 (as the checkpoint that failed); anything else a conflict.
        if (failed.some((why) => why.includes('no space left')))
          throw Object.assign(new Error(message), { code: 'ENOSPC' });
        throw new ApiFailure(409, message);
      }
    }
    if (this.onShutdownRequest) setImmediate(this.onShutdownRequest);
    else await this.suspendAll();
  }

  /** Suspends every live VM (resumed when an engine starts again), then ends the vmhosts. */
  suspendAll(): Promise<void> {
    this.#shuttingDown ??= (async () => {
      this.disarmAll();
      const suspended = this.#suspendEach();
      this.stopping = true; // operations asked for from now on are refused
      await Promise.all(suspended);
      await this.closeHosts();
      await Promise.all([...this.hubs.keys()].map((id) => this.closeHub(id, 'the engine stopped')));
    })();
    return this.#shuttingDown;
  }

  /**
   * Suspends every live VM, each after what is queued on it already (a queued start makes it live); each promise
   * resolves with null, or with why that VM could not be suspended and what it is now (logged too).
   */
  #suspendEach(): Array<Promise<string | null>> {
    const all = [...this.episodes.values()].flatMap((ep) => ep.vms);
    return all.map((vm) =>
      this.withLock(vm.id, async () => {
        if (LIVE_STATES.has(vm.state)) await this.suspendVm(vm, true);
        return null;
      }).catch((error: unknown) => {
        this.options.log(`engine: could not suspend ${vm.id}: ${(error as Error).message}`);
        const now = LIVE_STATES.has(vm.state) ? 'it goes on running' : `it is ${vm.state} now`;
        return `${vm.name} (${vm.id}): ${(error as Error).message}; ${now}`;
      }),
    );
  }
}

/** The agent's options from an exec request. */
function execOptions(request: Omit<ExecRequest, 'stdin'>) {
  return {
    ...(request.env && { env: request.env }),
    ...(request.cwd !== undefined && { cwd: request.cwd }),
    ...(request.user !== undefined && { user: request.user }),
    ...(request.timeoutMs !== undefined && { timeoutMs: request.timeoutMs }),
    ...(request.tty && { tty: request.tty }),
  };
}

function exitOf(result: { exitCode: number | null; signal: string | null; timedOut: boolean }) {
  return { exitCode: result.exitCode, signal: result.signal, timedOut: result.timedOut };
}

/** A `progress` event's `request`, from the request's `requestId` when it named one. */
function requestOf(request: { requestId?: string | undefined }) {
  return request.requestId === undefined ? {} : { request: request.requestId };
}

/** What the guest refused (no such file, not executable, …) is the caller's 400; a lost agent is 503. */
async function guestCall<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (!(error instanceof AgentError)) throw error;
    // ECANCELED: the VM ended (killed, reset, stopped) while the call ran, and its connection with it.
    const lost = ['ECONNRESET', 'EPIPE', 'ENOTCONN', 'ETIMEDOUT', 'EPROTO', 'ECANCELED'].includes(error.code);
    throw new ApiFailure(lost ? 503 : 400, error.message);
  }
}

/** A collected output stream, cut at MAX_COLLECTED bytes (the exec WebSocket streams any amount). */
class OutputCap {
  static readonly MAX_COLLECTED = 16 << 20;
  readonly #chunks: Buffer[] = [];
  #bytes = 0;
  #dropped = 0;

  constructor(readonly name: string) {}

  add(chunk: Buffer): void {
    const room = OutputCap.MAX_COLLECTED - this.#bytes;
    if (room > 0) this.#chunks.push(chunk.subarray(0, room));
    this.#bytes += Math.min(room, chunk.length);
    this.#dropped += Math.max(0, chunk.length - Math.max(0, room));
  }

  text(): string {
    const text = Buffer.concat(this.#chunks).toString('utf8');
    return this.#dropped ? `${text}\n[smol: ${this.#dropped} more bytes of ${this.name} not shown]\n` : text;
  }
}
