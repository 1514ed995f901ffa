// The engine's machinery under its API (engine.ts): records and their persistence, one vmhost per episode, console
// hubs, per-VM locks, events, and the primitive moves of a VM (boot, restore, checkpoint, suspend, kill, reset).
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { AgentClient } from '../agent-client/agent-client.js';
import { ApiFailure } from '../api/engine-api.js';
import type {
  CheckpointRequest,
  EngineEvent,
  Episode,
  Snapshot,
  SnapshotKind,
  Vm,
  VmExit,
  VmLimits,
  VmState,
} from '../api/schema.js';
import { bootsBareKernel } from '../api/schema.js';
import { parseSmolfile, type Smolfile, type SmolfileNetwork } from '../smolfile/smolfile.js';
import type { CheckpointInfo, DeviceResources } from '../vmm/vm.js';
import { planBoot, type BootPlan } from './boot-plan.js';
import { ConsoleHub } from './console-hub.js';
import { ConsoleShell } from './console-shell.js';
import { adoptBaseImage, chainDepth, readLayerHeader } from './disk-layers.js';
import {
  LIVE_STATES,
  episodeView,
  freshName,
  resolveRef,
  vmView,
  type EpisodeRecord,
  type VmRecord,
} from './episode-registry.js';
import { VmNetworks } from './vm-networks.js';
import { METRICS_INTERVAL_MS, MetricsHistory, type RawSample } from './metrics.js';
import { newId, type SnapshotStore } from './snapshot-store.js';
import { LiveInstance, type DiskDevice } from './live-instance.js';
import { writeNetworkConfig } from './network-config.js';
import { VmHost } from './vmhost.js';
import { VmHostLimiter, type GuestSize } from './vmhost-limits.js';
import { forkVmHost, type VmHostLauncher } from './vmhost-launcher.js';
import { crashPoint } from './crash-points.js';
import { episodeRunDir, vmhostJailPlan } from './vmhost-jail.js';

const BOOT_READY_MS = 120_000;
const INIT_COMMAND_MS = 600_000;
/** The guest port smol-agent listens on (docs/agent.md), and the CID every guest gets (its own vsock device). */
export const AGENT_PORT = 52;
const GUEST_CID = 3;
/** Events that change nothing an episode list shows: they leave the cached list as it is (listVersion). */
const UNLISTED_EVENTS: ReadonlySet<EngineEvent['type']> = new Set(['metrics', 'progress', 'image.pull']);
/**
 * A checkpoint whose frozen disk layer sits on this many layers or more gets it flattened onto the base (the VMM
 * opens chains of at most 64); SMOL_DISK_FLATTEN_DEPTH changes it (tests do).
 */
const FLATTEN_DEPTH = Number(process.env.SMOL_DISK_FLATTEN_DEPTH) || 16;
/**
 * How long after a boot, restore or fork the agent has to answer before the VM shows it `unreachable`;
 * SMOL_AGENT_READY_MS changes it (tests do).
 */
const AGENT_READY_MS = Number(process.env.SMOL_AGENT_READY_MS) || 120_000;

export interface EngineOptions {
  home: string;
  version: string;
  log: (line: string) => void;
  /** How vmhost processes start (vmhost-launcher.ts): a Node child unless the app injects a utilityProcess one. */
  launchVmHost?: VmHostLauncher;
}

/** The words a snapshot's fresh name and its console marker start with (the diff finds its marker by them). */
export const KIND_STEMS: Record<SnapshotKind, string> = {
  base: 'base',
  manual: 'checkpoint',
  auto: 'auto',
  fork: 'fork',
  'restore-point': 'before-restore',
  suspend: 'suspend',
};

export class EngineCore {
  protected readonly episodes = new Map<string, EpisodeRecord>();
  protected readonly hubs = new Map<string, ConsoleHub>();
  readonly #hosts = new Map<string, VmHost>();
  /** Each vmhost's cgroup and limits (vmhost-limits.ts, docs/security.md "Limits"). */
  readonly #limiter = new VmHostLimiter();
  /**
   * Each live VM's current native instance (live-instance.ts), by VM id: its name in the vmhost, its device
   * resources, agent and shell are all on it. An instance that ended or was replaced is gone from here.
   */
  readonly #live = new Map<string, LiveInstance>();
  readonly #locks = new Map<string, Promise<unknown>>();
  readonly #listeners = new Set<(event: EngineEvent) => void>();
  readonly #autoTimers = new Map<string, NodeJS.Timeout>();
  #instanceCount = 0;
  protected readonly metricsHistory = new MetricsHistory();
  /** Each live networked VM read every second: its forwards and refusals (vm-networks.ts). */
  protected readonly networks = new VmNetworks({
    instances: () => [...this.#live.values()].filter((live) => live.network),
    refused: (id, refusals, total) => {
      const vm = this.#record(id);
      for (const refusal of vm ? refusals : [])
        this.emit({ type: 'vm.network.refused', vm: id, episode: vm!.episode, refusal, refused: total });
    },
    changed: (id) => {
      const vm = this.#record(id);
      if (vm) this.emit({ type: 'vm.updated', vm: this.view(vm) });
    },
    log: (line) => this.options.log(line),
  });
  /** Whether each episode's Smolfile has `net = true` (its text never changes), so listings parse none. */
  readonly #networked = new WeakMap<EpisodeRecord, boolean>();
  #metricsTimer: NodeJS.Timeout | null = null;
  #sampling = false;

  constructor(
    readonly store: SnapshotStore,
    protected readonly options: EngineOptions,
  ) {}

  // ---- metrics (metrics.ts) ----

  /** Starts sampling every running VM's CPU and memory; stopped by disarmAll. */
  protected startMetrics(intervalMs = METRICS_INTERVAL_MS): void {
    if (this.#metricsTimer) return;
    this.#metricsTimer = setInterval(() => void this.#sampleMetrics(), intervalMs);
    this.#metricsTimer.unref();
  }

  async #sampleMetrics(): Promise<void> {
    if (this.#sampling) return; // a slow round (a busy host) is not stacked
    this.#sampling = true;
    try {
      const rounds = [...this.episodes.values()].map(async (episode): Promise<RawSample[]> => {
        const running = episode.vms.filter((vm) => vm.state === 'running' && this.#live.has(vm.id));
        const host = this.#hosts.get(episode.id);
        if (running.length === 0 || !host?.alive) return [];
        const byInstance = new Map(running.map((vm) => [this.#live.get(vm.id)!.name, vm.id]));
        const samples = await host.call('sample', { vms: [...byInstance.keys()] }).catch(() => []);
        // The vmhost's cgroup counts all its VMs together (docs/security.md, "Limits"); a pending shrink ends here.
        const cgroup = host.cgroup;
        cgroup?.settle();
        const counted = cgroup ? { name: cgroup.name, counters: cgroup.counters() } : undefined;
        return samples.flatMap((s) => {
          const vm = byInstance.get(s.vm);
          return vm ? [{ vm, instance: s.vm, cpuNs: s.cpuNs, memory: s.memory, cgroup: counted }] : [];
        });
      });
      const raw = (await Promise.all(rounds)).flat();
      for (const { vm, sample } of this.metricsHistory.add(raw, Date.now())) {
        this.emit({ type: 'metrics', vm, ...sample });
      }
    } catch (error) {
      this.options.log(`engine: sampling metrics failed: ${(error as Error).message}`);
    } finally {
      this.#sampling = false;
    }
  }

  // ---- records, events, locks ----

  /** The record of VM `id`, if it still has one. */
  #record(id: string): VmRecord | undefined {
    for (const episode of this.episodes.values()) {
      const vm = episode.vms.find((candidate) => candidate.id === id);
      if (vm) return vm;
    }
    return undefined;
  }

  protected episode(ref: string): EpisodeRecord {
    return resolveRef([...this.episodes.values()], ref, 'episode');
  }

  protected vm(ref: string): VmRecord {
    return resolveRef(
      [...this.episodes.values()].flatMap((ep) => ep.vms),
      ref,
      'VM',
    );
  }

  protected episodeOf(vm: VmRecord): EpisodeRecord {
    const episode = this.episodes.get(vm.episode);
    if (!episode) throw new ApiFailure(404, `the episode of ${vm.id} is gone`);
    return episode;
  }

  /** The API's view of a VM: its record, its live instance's forwards and its refusal count. */
  protected view(vm: VmRecord): Vm {
    const enabled = this.networkEnabled(vm);
    const view = vmView(vm, {
      ports: enabled ? this.networks.ports(this.#live.get(vm.id)) : [],
      network: { enabled, refused: this.networks.refused(vm.id) },
    });
    const limits = this.limitsOf(vm);
    return limits ? { ...view, limits } : view;
  }

  /** Whether `vm`'s Smolfile gives it a network (parsed once per episode). */
  protected networkEnabled(vm: VmRecord): boolean {
    const episode = this.episodes.get(vm.episode);
    if (!episode) return false;
    let enabled = this.#networked.get(episode);
    if (enabled === undefined) {
      enabled = this.networkOf(vm) !== null;
      this.#networked.set(episode, enabled);
    }
    return enabled;
  }

  /** A live instance whose network the engine reads: undefined when `vm` runs none. */
  protected liveNetwork(vm: VmRecord): LiveInstance | undefined {
    const live = this.#live.get(vm.id);
    return live?.network ? live : undefined;
  }

  /** `totals`: the store's episodeTotals(), when viewing many episodes at once. */
  protected episodeView(
    episode: EpisodeRecord,
    totals?: ReadonlyMap<string, { count: number; diskBytes: number }>,
  ): Episode {
    if (totals) {
      const total = totals.get(episode.id);
      return episodeView(episode, total?.count ?? 0, total?.diskBytes ?? 0, (vm) => this.view(vm));
    }
    const count = this.store.list(episode.id).length;
    return episodeView(episode, count, this.store.episodeDiskBytes(episode.id), (vm) => this.view(vm));
  }

  /**
   * Bumped on every change an episode list shows (docs/engine.md, "Listing episodes"): each event but a metrics
   * sample or a progress report, and each saved record. With the store's version it keys the cached list (engine.ts).
   */
  protected listVersion = 0;

  protected async save(episode: EpisodeRecord): Promise<void> {
    this.listVersion++;
    if (!this.episodes.has(episode.id)) return;
    await this.store.saveEpisodeRecord(episode.id, episode);
  }

  protected emit(event: EngineEvent): void {
    if (!UNLISTED_EVENTS.has(event.type)) this.listVersion++;
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (error) {
        this.options.log(`engine: an event listener failed: ${(error as Error).message}`);
      }
    }
  }

  /** An event from outside the engine's own operations (an image pull's progress, src/api/image-routes.ts). */
  publish(event: EngineEvent): void {
    this.emit(event);
  }

  subscribe(listener: (event: EngineEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Set when the engine stops: VM operations are refused with 503 from then on. */
  protected stopping = false;

  /** Runs `work` after every earlier operation on the same VM has finished: one operation per VM at a time. */
  protected withLock<T>(id: string, work: () => Promise<T>): Promise<T> {
    if (this.stopping) return Promise.reject(new ApiFailure(503, 'the engine is stopping'));
    const before = this.#locks.get(id) ?? Promise.resolve();
    const result = before.then(work, work);
    const tail = result.catch(() => undefined);
    this.#locks.set(id, tail);
    void tail.then(() => {
      if (this.#locks.get(id) === tail) this.#locks.delete(id);
    });
    return result;
  }

  protected async setState(
    episode: EpisodeRecord,
    vm: VmRecord,
    state: VmState,
    exit: VmExit | null = null,
  ): Promise<void> {
    const wasRunning = vm.state === 'running';
    if (vm.state !== state || exit) {
      const why = exit ? ` (${exit.reason}${exit.message ? `: ${exit.message}` : ''})` : '';
      this.options.log(`engine: ${vm.id} (${vm.name}) ${vm.state} -> ${state}${why}`);
    }
    vm.state = state;
    if (state === 'running' && !wasRunning) vm.runningSince = new Date().toISOString();
    if (state !== 'running') vm.runningSince = null;
    if (exit) vm.exit = exit;
    if (state === 'running' || state === 'paused') vm.exit = null;
    if (LIVE_STATES.has(state)) this.#armAutoCheckpoint(vm);
    else this.#disarmAutoCheckpoint(vm.id);
    if (!LIVE_STATES.has(state)) vm.agent = 'none';
    await this.#readNetworkOnStart(vm, state);
    await this.save(episode);
    this.emit({ type: 'vm.updated', vm: this.view(vm) });
    this.emit({ type: 'episode.updated', episode: this.episodeView(episode) });
  }

  /**
   * A networked instance that now runs is read at once, so that the VM's view names its forwards (a lone guest
   * port's host port is chosen as it starts), and from then on every second.
   */
  async #readNetworkOnStart(vm: VmRecord, state: VmState): Promise<void> {
    const live = this.#live.get(vm.id);
    if (!live?.network || (state !== 'running' && state !== 'paused')) return;
    live.network.running = true;
    this.networks.wake();
    await this.networks
      .read(live, { announce: false })
      .catch((error: unknown) =>
        this.options.log(`engine: reading the network of ${live.name} failed: ${(error as Error).message}`),
      );
  }

  protected requireLive(vm: VmRecord): void {
    if (!this.#live.has(vm.id) || !LIVE_STATES.has(vm.state)) {
      throw new ApiFailure(409, `${vm.name} (${vm.id}) is ${vm.state}, not running`);
    }
  }

  protected newVmRecord(episode: EpisodeRecord, cpus: number, memoryMiB: number, name: string): VmRecord {
    const vm: VmRecord = {
      id: newId('vm'),
      name,
      episode: episode.id,
      state: 'creating',
      snapshot: null,
      parentVm: null,
      created: new Date().toISOString(),
      runningSince: null,
      exit: null,
      cpus,
      memoryMiB,
      layerHead: null,
      suspendedAt: null,
      resumeOnStart: false,
      suspendedPaused: false,
      agent: 'none',
    };
    episode.vms.push(vm);
    return vm;
  }

  protected newChild(episode: EpisodeRecord, parent: VmRecord | null, snapshot: string): VmRecord {
    const stem = parent ? parent.name : episode.name;
    const taken = episode.vms.map((vm) => vm.name);
    const child = this.newVmRecord(episode, parent?.cpus ?? 1, parent?.memoryMiB ?? 0, freshName(stem, taken));
    const source = this.store.get(snapshot);
    if (source) {
      child.cpus = source.cpus;
      child.memoryMiB = Math.round(source.memoryBytes / 2 ** 20);
    }
    child.parentVm = parent?.id ?? null;
    child.snapshot = snapshot;
    child.layerHead = snapshot;
    return child;
  }

  /** Snapshot ids whose layers live VMs still need (their next checkpoint diffs against them). */
  protected liveLayerHeads(): Set<string> {
    const heads = new Set<string>();
    for (const episode of this.episodes.values()) {
      for (const vm of episode.vms) {
        if (vm.layerHead) heads.add(vm.layerHead);
        if (vm.suspendedAt) heads.add(vm.suspendedAt);
      }
      if (episode.base) heads.add(episode.base);
    }
    return heads;
  }

  // ---- vmhosts and consoles ----

  protected host(episode: EpisodeRecord): VmHost {
    const existing = this.#hosts.get(episode.id);
    if (existing?.alive) return existing;
    // An operation queued behind a delete must not bring a deleted episode's vmhost back.
    if (this.episodes.get(episode.id) !== episode) throw new ApiFailure(404, `episode ${episode.id} was deleted`);
    // Its root shows only the store's directories and the Smolfile's boot files (docs/security.md).
    const jail = vmhostJailPlan(this.options.home, episode.id, episode.smolfile);
    const launch = this.options.launchVmHost ?? forkVmHost;
    const host = new VmHost(episode.id, (label) => launch(label, jail), this.#limiter.cgroupFor(episode.id));
    if (host.limitsNote)
      this.options.log(`engine: the vmhost of ${episode.id} runs without limits (${host.limitsNote})`);
    this.#hosts.set(episode.id, host);
    const failed = (what: string) => (error: unknown) =>
      this.options.log(`engine: handling ${what} failed: ${(error as Error).message}`);
    host.on('console', (instance, data) => this.#onConsole(instance, data));
    host.on('exit', (instance, exit) => void this.#onExit(instance, exit).catch(failed(`the exit of ${instance}`)));
    host.on('died', (how, cause) => void this.#onHostDied(episode.id, how, cause).catch(failed(`the end of a vmhost`)));
    host.on('cgroupLeft', (message) => this.options.log(`engine: ${message}`));
    // The last vmhost gone leaves no empty `smol` cgroup behind (an engine killed outright could not remove it).
    host.on('cgroupRemoved', () => {
      if (![...this.#hosts.values()].some((other) => other.cgroup)) this.#limiter.release();
    });
    return host;
  }

  protected async closeHosts(): Promise<void> {
    await Promise.all([...this.#hosts.values()].map((host) => host.close()));
    this.#hosts.clear();
    this.#limiter.release();
  }

  protected async closeHost(episodeId: string): Promise<void> {
    await this.#hosts.get(episodeId)?.close();
    this.#hosts.delete(episodeId);
  }

  protected hub(vm: VmRecord): ConsoleHub {
    let hub = this.hubs.get(vm.id);
    if (!hub) {
      hub = new ConsoleHub({
        vmId: vm.id,
        castPath: path.join(this.options.home, 'consoles', `${vm.id}.cast`),
        implicitCr: bootsBareKernel(this.episodeOf(vm).smolfile.text),
        log: this.options.log,
      });
      this.hubs.set(vm.id, hub);
    }
    return hub;
  }

  protected async closeHub(id: string, reason: string): Promise<void> {
    const hub = this.hubs.get(id);
    this.hubs.delete(id);
    await hub?.close(reason);
  }

  /** The live instance of `vm`; a 409 when it has none. */
  protected live(vm: VmRecord): LiveInstance {
    const live = this.#live.get(vm.id);
    if (!live) throw new ApiFailure(409, `${vm.name} (${vm.id}) is ${vm.state}, not running`);
    return live;
  }

  /** The vmhost's name of `vm`'s live instance. */
  protected instance(vm: VmRecord): string {
    return this.live(vm).name;
  }

  /**
   * A new native instance of `vm` in its episode's vmhost, routed to from now on (output of older instances is
   * dropped). Its devices' resources start with the vsock socket (used when the VM has vsock); `disks` are the
   * devices of its writable disks (the root disk, writable volumes), each of which gets a new layer.
   */
  protected attach(
    vm: VmRecord,
    disks: readonly DiskDevice[] = [],
    size: GuestSize = { memoryMiB: vm.memoryMiB, cpus: vm.cpus },
  ): LiveInstance {
    const hub = this.hub(vm); // before the instance exists, so none of its output is dropped
    const name = `${vm.id}#${++this.#instanceCount}`;
    const vsock = this.vsockPathOf(name, this.episodeOf(vm).id);
    // A socket left by a VMM killed outright (the count restarts with the engine) must not pass for this one's.
    rmSync(vsock, { force: true });
    const resources: DeviceResources = { 'virtio-vsock': { path: vsock } };
    for (const device of disks) resources[device] = { path: this.store.newDiskLayer() };
    const network = this.networkOf(vm);
    if (network) {
      // A fork child's parent still holds the Smolfile's pinned host ports: the child's forwards get fresh ones.
      const file = vsock.replace(/\.vsock$/, '.net');
      resources['virtio-net'] = { path: writeNetworkConfig(file, network, { freshPorts: vm.parentVm !== null }) };
    }
    const live = new LiveInstance(name, vm.id, this.host(this.episodeOf(vm)), hub, resources);
    live.size = size;
    this.#live.get(vm.id)?.end();
    this.#live.set(vm.id, live);
    this.#resize(live.host); // before the vmhost makes the instance: its memory fits from the first page
    return live;
  }

  /** Sizes a vmhost's cgroup to the live instances it holds (vmhost-limits.ts). */
  #resize(host: VmHost): void {
    if (!host.cgroup) return;
    const sizes = [...this.#live.values()].filter((live) => live.host === host).map((live) => live.size);
    try {
      host.cgroup.limit(this.#limiter.limitsFor(sizes));
    } catch (error) {
      this.options.log(`engine: resizing the cgroup of ${host.label} failed: ${(error as Error).message}`);
    }
  }

  /** What limits `vm`'s vmhost runs under, for its record (docs/security.md, "Limits"). */
  protected limitsOf(vm: VmRecord): VmLimits | null {
    const live = this.#live.get(vm.id);
    if (!live) return null;
    const { cgroup, limitsNote } = live.host;
    const limit = cgroup?.memoryLimitBytes;
    return cgroup && limit
      ? { cgroup: cgroup.dirs[0]!, memoryLimitMiB: Math.round(limit / 2 ** 20), note: null }
      : { cgroup: null, memoryLimitMiB: null, note: limitsNote ?? 'no limits' };
  }

  /** The network its Smolfile gives `vm` (docs/network.md), or null: off, or a Smolfile that no longer loads. */
  protected networkOf(vm: VmRecord): SmolfileNetwork | null {
    const { path: file, text } = this.episodeOf(vm).smolfile;
    const network = parseSmolfile(text, { path: file }).smolfile?.network;
    return network?.enabled ? network : null;
  }

  // ---- the guest agent (docs/agent.md) ----

  /**
   * Where a native instance's vsock muxer listens: a new socket for every boot, restore and fork child, in its
   * episode's run/ directory, the only one of run/ its vmhost's root shows (docs/security.md).
   */
  protected vsockPathOf(instance: string, episode: string): string {
    const dir = episodeRunDir(this.options.home, episode);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    return path.join(dir, `${instance.replace('#', '.')}.vsock`);
  }

  /**
   * Follows the agent of an instance that just started: `connecting` until its HELLO, then `ready` (or
   * `unreachable`). An instance without a vsock socket (a bare kernel) has no agent. With `remint`, the guest then
   * gets a new identity (a fork child, or a new episode from a shared base): hostname, machine-id, entropy.
   */
  protected watchAgent(vm: VmRecord, live: LiveInstance, { remint = false } = {}): void {
    const socketPath = live.resources['virtio-vsock']?.path;
    if (!socketPath || !existsSync(socketPath)) {
      vm.agent = 'none';
      this.listVersion++;
      return;
    }
    const client = new AgentClient({ socketPath, vsockPort: AGENT_PORT });
    const current = () => this.#live.get(vm.id) === live;
    const update = (state: VmRecord['agent']) => {
      if (!current() || vm.agent === state) return;
      vm.agent = state;
      this.emit({ type: 'vm.updated', vm: this.view(vm) });
    };
    update('connecting');
    // A hostname takes letters, digits, '-' and '.': a VM name's '_' becomes '-'.
    const hostname = vm.name.replace(/[^A-Za-z0-9.-]/g, '-').slice(0, 63);
    let reminted = !remint;
    const remintOnce = async () => {
      if (reminted || !current()) return;
      await client.remint({ hostname });
      reminted = true;
    };
    const ready = async () => {
      await client.ready({ timeoutMs: AGENT_READY_MS });
      await remintOnce();
    };
    const check = () =>
      ready().then(
        () => update('ready'),
        (error: unknown) => {
          if (!current()) return;
          this.options.log(`engine: the agent of ${vm.id} (${live.name}) did not answer: ${(error as Error).message}`);
          update('unreachable');
        },
      );
    // Commands wait for the new identity: a fork's first command must not see its parent's hostname.
    live.agent = { client, settled: check(), remint: remintOnce, check };
  }

  /**
   * Asks again for an agent that did not answer in time, e.g. of a VM restored paused and resumed long after: its
   * state goes back to `connecting`, then `ready` (with the new identity a fork still owes it) or `unreachable`.
   */
  protected recheckAgent(vm: VmRecord): void {
    const agent = this.#live.get(vm.id)?.agent;
    if (!agent || vm.agent !== 'unreachable') return;
    vm.agent = 'connecting';
    this.emit({ type: 'vm.updated', vm: this.view(vm) });
    agent.settled = agent.check();
  }

  /** The agent of a running VM, connected (again, after a restore or fork reset the connection). */
  protected async agentOf(vm: VmRecord): Promise<AgentClient> {
    this.requireLive(vm);
    if (vm.state === 'paused')
      throw new ApiFailure(409, `${vm.name} (${vm.id}) is paused: resume it to reach its agent`);
    const agent = this.live(vm).agent;
    if (!agent) {
      throw new ApiFailure(
        409,
        `${vm.name} (${vm.id}) has no guest agent: its Smolfile boots a bare kernel (image = "builtin" has one)`,
      );
    }
    const { client, settled, remint } = agent;
    try {
      await settled;
      await client.ready({ timeoutMs: AGENT_READY_MS });
      await remint(); // a fork never runs a command with its parent's identity: retried here if it failed
    } catch (error) {
      throw new ApiFailure(503, `the agent of ${vm.name} (${vm.id}) does not answer: ${(error as Error).message}`);
    }
    if (vm.agent !== 'ready') {
      vm.agent = 'ready';
      this.emit({ type: 'vm.updated', vm: this.view(vm) });
    }
    return client;
  }

  /**
   * After a checkpoint or fork that failed: whether the VMM had already frozen `top` (the disk switches to the new
   * layer while the VM is quiesced, before the memory is written). Then the instance writes the new layer, and the
   * frozen one needs an owner (else the next start-up sweep takes it); if not, the new layer, if it was made, goes.
   * Returns whether it had switched.
   */
  protected async settleFailedDiskSwitch(
    live: LiveInstance,
    top: string,
    next: string,
    device: DiskDevice = 'virtio-blk',
  ): Promise<boolean> {
    if ((await readLayerHeader(top))?.frozen) {
      live.writes(next, device);
      return true;
    }
    rmSync(next, { force: true });
    return false;
  }

  /** The instance the vmhost calls `name`, while it is its VM's live one. */
  #current(name: string): LiveInstance | undefined {
    const live = this.#live.get(LiveInstance.vmOf(name));
    return live?.name === name ? live : undefined;
  }

  /** `vm` has no live instance from now on: the one it had lets go of its agent connection and disk layer. */
  #forget(vm: string): void {
    const live = this.#live.get(vm);
    live?.end();
    this.#live.delete(vm);
    if (live) this.#resize(live.host);
  }

  protected writeTo(vm: VmRecord, data: Buffer): void {
    this.requireLive(vm);
    const { name, host } = this.live(vm);
    this.hub(vm).input(data);
    // Typing races restores, resets and exits: input to an instance that just went is dropped, not fatal.
    host
      .call('write', { vm: name, data })
      .catch((error: unknown) =>
        this.options.log(`engine: console input to ${name} dropped: ${(error as Error).message}`),
      );
  }

  #onConsole(instance: string, data: Buffer): void {
    const live = this.#current(instance);
    if (!live) return;
    live.shell?.feed(data);
    live.hub.push(data);
  }

  async #onExit(instance: string, exit: VmExit): Promise<void> {
    const live = this.#current(instance);
    if (!live) return; // an instance the engine replaced or killed itself
    const id = live.vm;
    const why = `exit ${exit.reason}${exit.message ? `: ${exit.message}` : ''}`;
    live.shell?.guestEnded(why); // a bake waiting on the console fails now, with the reason
    this.#forget(id);
    const vm = this.vm(id);
    this.hubs.get(id)?.marker(why);
    await this.setState(this.episodeOf(vm), vm, 'stopped', exit);
  }

  async #onHostDied(episodeId: string, how: string, cause?: string): Promise<void> {
    this.#hosts.delete(episodeId);
    const episode = this.episodes.get(episodeId);
    if (!episode) return;
    this.options.log(`engine: the vmhost of ${episode.name} (${episodeId}) ended (${cause ? `${cause}, ` : ''}${how})`);
    for (const vm of episode.vms) {
      if (!this.#live.has(vm.id)) continue;
      this.#live.get(vm.id)?.shell?.guestEnded(`its vmhost process ended (${how})`);
      this.#forget(vm.id);
      // An OOM kill by its own cgroup says so (`out of memory (limit N MiB)`), not the signal that did it.
      this.hubs.get(vm.id)?.marker(`crashed: ${cause ?? `its vmhost ended (${how})`}`);
      await this.setState(episode, vm, 'crashed', {
        reason: 'crashed',
        code: null,
        message: cause ?? `its vmhost process ended (${how})`,
      });
    }
  }

  // ---- the moves of a VM ----

  /** Boots `vm` from its Smolfile: restores the base when there is one, else boots (and bakes the base). */
  protected async bootFresh(episode: EpisodeRecord, vm: VmRecord, smolfile: Smolfile, plan: BootPlan): Promise<void> {
    const base = plan.baseKey ? this.store.findBase(plan.baseKey) : undefined;
    if (base) {
      episode.base = base.id;
      await this.restoreInto(episode, vm, base, { remint: true });
      return;
    }
    const writable = plan.volumes.filter((v) => !v.readOnly).map((v) => v.device);
    const live = this.attach(vm, plan.options.disk ? ['virtio-blk', ...writable] : []);
    const { host, name: instance } = live;
    this.hub(vm).marker('boot');
    vm.snapshot = null;
    vm.layerHead = null;
    try {
      const vsock = plan.agent ? { vsock: { path: live.resources['virtio-vsock']!.path, cid: GUEST_CID } } : {};
      const net = live.resources['virtio-net'];
      const options = { ...plan.options, ...vsock, ...(net && { resources: { 'virtio-net': net } }) };
      if (options.disk) {
        const base = await adoptBaseImage(this.options.home, options.disk.base);
        options.disk = { base, top: live.diskTop! };
      }
      // Volumes (docs/disks.md, "Volumes"): each image adopted as the root disk's is, a writable one with its layer.
      options.volumes = [];
      for (const volume of plan.volumes) {
        const base = await adoptBaseImage(this.options.home, volume.image);
        if (volume.readOnly) live.volumeImages.push(base);
        options.volumes.push({ base, ...(!volume.readOnly && { top: live.resources[volume.device]!.path }) });
      }
      await host.call('create', { vm: instance, options });
      if (!plan.baseKey) await host.call('start', { vm: instance });
    } catch (error) {
      await this.startFailed(episode, vm, error);
    }
    if (!plan.baseKey) {
      await this.setState(episode, vm, 'running');
      return;
    }
    const shell = new ConsoleShell((text) =>
      host.call('write', { vm: instance, data: Buffer.from(text) }).catch(() => undefined),
    );
    live.shell = shell;
    try {
      await host.call('start', { vm: instance });
      this.watchAgent(vm, live);
      await this.setState(episode, vm, 'running');
      await shell.waitFor(/smol-guest: ready/, BOOT_READY_MS);
      await shell.run('true', BOOT_READY_MS);
      const notes: string[] = [];
      for (const command of plan.init) {
        const { output, status } = await shell.run(command, INIT_COMMAND_MS);
        notes.push(`$ ${command}\n${output}`);
        if (status !== 0) {
          throw new ApiFailure(
            400,
            `${smolfile.path}: init command ${command} failed with exit status ${status}:\n${output}`,
          );
        }
      }
      const snapshot = await this.checkpointVm(vm, 'base', { note: notes.join('').slice(-9000) }, plan.baseKey);
      episode.base = snapshot.id;
      await this.save(episode);
    } finally {
      live.shell = undefined;
    }
  }

  /** Puts `vm` on `snapshot`: a new native instance restored from it, running (or paused). */
  protected async restoreInto(
    episode: EpisodeRecord,
    vm: VmRecord,
    snapshot: Snapshot,
    { paused = false, remint = false } = {},
  ): Promise<void> {
    const size = { memoryMiB: Math.round(snapshot.memoryBytes / 2 ** 20), cpus: snapshot.cpus };
    const live = this.attach(vm, this.store.diskDevices(snapshot.id), size);
    live.volumeImages = this.store.volumeImages(snapshot.id);
    const { host, name: instance, resources } = live;
    try {
      await host.call('restore', { vm: instance, dir: this.store.dirFor(snapshot.id), resources });
      vm.snapshot = snapshot.id;
      vm.layerHead = snapshot.id;
      vm.cpus = snapshot.cpus;
      vm.memoryMiB = Math.round(snapshot.memoryBytes / 2 ** 20);
      await host.call('start', { vm: instance });
      if (paused) await host.call('pause', { vm: instance });
      this.watchAgent(vm, live, { remint });
    } catch (error) {
      await this.startFailed(episode, vm, error);
    }
    await this.setState(episode, vm, paused ? 'paused' : 'running');
  }

  /**
   * A VM whose new instance could not be made or started: no instance is left behind, the VM is `crashed` with the
   * reason (never `running` with nothing under it), and the error goes on to the caller.
   */
  protected async startFailed(episode: EpisodeRecord, vm: VmRecord, error: unknown): Promise<never> {
    await this.killVm(vm);
    if (this.episodes.get(episode.id) === episode) {
      await this.setState(episode, vm, 'crashed', { reason: 'error', code: null, message: (error as Error).message });
    }
    throw error;
  }

  protected async checkpointVm(
    vm: VmRecord,
    kind: SnapshotKind,
    request: CheckpointRequest,
    baseKey?: string,
  ): Promise<Snapshot> {
    this.requireLive(vm);
    const episode = this.episodeOf(vm);
    const taken = this.store.list(episode.id).map((s) => s.name);
    if (request.name !== undefined && taken.includes(request.name)) {
      throw new ApiFailure(409, `${episode.name} has a snapshot named ${request.name} already`);
    }
    const name = request.name ?? freshName(KIND_STEMS[kind], taken, episode.counters);
    const id = this.store.newSnapshotId();
    const live = this.live(vm);
    const top = live.diskTop;
    const next = top ? this.store.newDiskLayer() : undefined;
    const resources: DeviceResources = next ? { 'virtio-blk': { path: next } } : {};
    // Writable volumes are frozen with the root disk: the layer each wrote is the one frozen (docs/disks.md).
    const volumes = live.diskTops.filter(([device]) => device !== 'virtio-blk');
    const volumeNext = volumes.map(([device]) => [device, this.store.newDiskLayer()] as const);
    for (const [device, file] of volumeNext) resources[device] = { path: file };
    let info: CheckpointInfo;
    try {
      info = await live.host.call(
        'checkpoint',
        { vm: live.name, dir: this.store.dirFor(id), resources },
        (done, total) => this.emit({ type: 'progress', operation: kind, vm: vm.id, done, total }),
      );
    } catch (error) {
      // Whatever the vmhost wrote is never published (a vmhost that died mid-write leaves files, and this engine
      // may run for days before a start-up recovery would sweep them).
      const dir = this.store.dirFor(id);
      rmSync(dir, { recursive: true, force: true });
      // and the VMM's own unfinished directory beside it (DIR.partial-N), which it renames into place when done
      for (const name of readdirSync(path.dirname(dir))) {
        if (name.startsWith(`${path.basename(dir)}.partial-`)) {
          rmSync(path.join(path.dirname(dir), name), { recursive: true, force: true });
        }
      }
      if (top && next) await this.settleFailedDiskSwitch(live, top, next);
      for (const [i, [device, file]] of volumeNext.entries()) {
        await this.settleFailedDiskSwitch(live, volumes[i]![1], file, device);
      }
      throw error;
    }
    crashPoint('checkpoint:written');
    if (next && !live.ended) live.writes(next);
    else if (next) rmSync(next, { force: true }); // the instance ended meanwhile: nothing writes it
    for (const [device, file] of volumeNext) {
      if (!live.ended) live.writes(file, device);
      else rmSync(file, { force: true });
    }
    const snapshot = await this.store.publish({
      id,
      episode: kind === 'base' ? null : episode.id,
      parent: kind === 'base' ? null : vm.snapshot,
      vm: kind === 'base' ? null : vm.id,
      kind,
      name: kind === 'base' ? `base-${episode.name}` : name,
      note: request.note ?? '',
      layerParentDir: info.parentDir,
      memoryBytes: info.memoryBytes,
      cpus: info.cpus,
      ...(baseKey ? { baseKey } : {}),
      ...(info.disk ? { diskLayer: info.disk } : {}),
      ...(volumes.length > 0 && { volumeLayers: Object.fromEntries(volumes) }),
      ...(live.volumeImages.length > 0 && { volumeImages: live.volumeImages }),
    });
    crashPoint('checkpoint:published');
    vm.snapshot = snapshot.id;
    vm.layerHead = snapshot.id;
    await this.save(episode);
    if (info.disk) {
      const file = info.disk;
      this.#flattenIfDeep(
        episode,
        snapshot,
        file,
        volumes.map(([, frozen]) => frozen),
      ).catch((error: Error) =>
        this.options.log(`engine: flattening the disk layer of ${snapshot.id} failed: ${error.message}`),
      );
    }
    this.hub(vm).marker(
      `${KIND_STEMS[kind]} ${snapshot.name}${snapshot.note && kind !== 'base' ? `: ${snapshot.note}` : ''}`,
    );
    this.emit({ type: 'snapshot.created', snapshot });
    this.emit({ type: 'vm.updated', vm: this.view(vm) });
    if (kind === 'auto') await this.#pruneAuto(episode, vm);
    return snapshot;
  }

  /**
   * Keeps disk chains short (docs/engine.md, "Disks"): when the layer a checkpoint froze sits on FLATTEN_DEPTH
   * layers or more, the episode's vmhost rewrites it onto the base in the background (same id: layers over it, the
   * VM's own included, still open), and from then on the snapshot's disk needs no snapshot below it.
   */
  async #flattenIfDeep(episode: EpisodeRecord, snapshot: Snapshot, file: string, volumes: string[]): Promise<void> {
    const depth = await chainDepth(file, this.store.disksDir);
    if (depth < FLATTEN_DEPTH) return;
    // The volumes' chains are as deep (they freeze together): each is flattened before the disk parent goes.
    for (const volume of volumes) await this.host(episode).call('flatten', { path: volume });
    const result = await this.host(episode).call('flatten', { path: file });
    await this.store.setDiskParent(snapshot.id, null);
    this.options.log(
      `engine: flattened the disk layer of ${snapshot.id}: ${result.depthBefore} layers into one ` +
        `(${Math.round(result.bytes / 2 ** 20)} MiB)`,
    );
  }

  /** Checkpoints a live VM (kind `suspend`) and ends its instance; `start` restores it. */
  protected async suspendVm(vm: VmRecord, byEngine: boolean): Promise<void> {
    const episode = this.episodeOf(vm);
    const paused = vm.state === 'paused';
    // Paused first: what the guest would print between the capture and the kill would be shown and then lost.
    const { host, name: instance } = this.live(vm);
    if (!paused) await host.call('pause', { vm: instance });
    let snapshot: Snapshot;
    try {
      snapshot = await this.checkpointVm(vm, 'suspend', {});
    } catch (error) {
      if (!paused) await host.call('resume', { vm: instance }).catch(() => undefined);
      throw error;
    }
    await this.killVm(vm);
    vm.suspendedAt = snapshot.id;
    vm.suspendedPaused = paused;
    vm.resumeOnStart = byEngine;
    await this.setState(episode, vm, 'suspended');
  }

  /** Ends the VM's native instance, if it has one; its exit is not reported (the caller sets the new state). */
  protected async killVm(vm: VmRecord): Promise<void> {
    this.#disarmAutoCheckpoint(vm.id);
    const live = this.#live.get(vm.id);
    if (!live) return;
    this.#forget(vm.id);
    if (live.host.alive) await live.host.call('kill', { vm: live.name }).catch(() => undefined);
  }

  /** A clean machine: the base snapshot restored, or a bare kernel booted afresh. Nothing of the VM's past stays. */
  protected async resetVm(episode: EpisodeRecord, vm: VmRecord): Promise<void> {
    await this.killVm(vm);
    crashPoint('reset:old-killed');
    this.hub(vm).marker('reset');
    vm.suspendedAt = null;
    vm.resumeOnStart = false;
    const base = episode.base ? this.store.get(episode.base) : undefined;
    if (base) await this.restoreInto(episode, vm, base, { remint: true });
    else {
      const { loadSmolfile } = await import('../smolfile/smolfile.js');
      // One started from text has no file: its text is its Smolfile.
      const { smolfile } =
        episode.smolfile.given === 'text'
          ? parseSmolfile(episode.smolfile.text, { path: episode.smolfile.path })
          : await loadSmolfile(episode.smolfile.path).catch(() => ({ smolfile: null }));
      if (!smolfile)
        throw new ApiFailure(409, `cannot reset ${vm.name}: its Smolfile ${episode.smolfile.path} no longer loads`);
      await this.bootFresh(episode, vm, smolfile, planBoot(smolfile));
    }
  }

  // ---- automatic checkpoints ([snapshots] in the Smolfile) ----

  #armAutoCheckpoint(vm: VmRecord): void {
    if (this.#autoTimers.has(vm.id)) return;
    const { everyMs } = this.episodeOf(vm).autoCheckpoint;
    if (!everyMs) return;
    const timer = setInterval(() => {
      if (vm.state !== 'running') return;
      void this.withLock(vm.id, () => this.checkpointVm(vm, 'auto', {})).catch((error: unknown) =>
        this.options.log(`engine: automatic checkpoint of ${vm.id} failed: ${(error as Error).message}`),
      );
    }, everyMs);
    timer.unref();
    this.#autoTimers.set(vm.id, timer);
  }

  #disarmAutoCheckpoint(id: string): void {
    clearInterval(this.#autoTimers.get(id));
    this.#autoTimers.delete(id);
  }

  protected disarmAll(): void {
    for (const id of [...this.#autoTimers.keys()]) this.#disarmAutoCheckpoint(id);
    if (this.#metricsTimer) clearInterval(this.#metricsTimer);
    this.#metricsTimer = null;
    this.networks.stop();
  }

  async #pruneAuto(episode: EpisodeRecord, vm: VmRecord): Promise<void> {
    const { keep } = episode.autoCheckpoint;
    const autos = this.store.list(episode.id).filter((s) => s.kind === 'auto' && s.vm === vm.id);
    for (const old of autos.slice(0, Math.max(0, autos.length - keep))) {
      await this.store.delete(old.id);
      this.emit({ type: 'snapshot.deleted', id: old.id, episode: episode.id });
    }
    await this.store.gc(this.liveLayerHeads());
  }
}
