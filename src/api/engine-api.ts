// What the engine offers its transports (HTTP and WebSocket now, Electron IPC later): every call the API has, with
// the schema's types. The server maps routes onto these; the engine implements them. Errors are ApiFailure.
import type { DiffQuery, DiffResponse } from './diff-schema.js';
import type {
  CheckpointRequest,
  CreateEpisodeRequest,
  CreateEpisodeResponse,
  EngineEvent,
  Episode,
  ExecRequest,
  TerminalSize,
  ExecResult,
  ForkResponse,
  GcResult,
  Health,
  ImageSummary,
  PulledImage,
  PullImageRequest,
  RemovedImages,
  CreatedToken,
  CreateTokenRequest,
  ListenRequest,
  Listener,
  TokenInfo,
  RemoteEngineInfo,
  EngineProbe,
  AddEngineRequest,
  AddedEngine,
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
} from './schema.js';
import type {
  InspectMachineRequest,
  InspectMachineResponse,
  OpenMachineRequest,
  PackMachineRequest,
  PackMachineResponse,
} from './machine-schema.js';

/**
 * An error with the HTTP status it maps to: 400 bad request, 404 unknown, 409 wrong state, 500 the engine's fault,
 * 503 out of resources or stopping. `code`, when given, is the errno name of its kind ('EBUSY'), as the VMM's have.
 */
export class ApiFailure extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 409 | 500 | 502 | 503 | 504,
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'ApiFailure';
  }
}

/** One viewer of a VM's console (docs/engine.md, "Consoles"). */
export interface ConsoleViewer {
  /** The current screen, serialized (xterm escape sequences): sent first, and again after the viewer fell behind. */
  screen(serialized: string, reason: 'attach' | 'resync'): void;
  /** Guest output, in order. */
  output(chunk: Buffer): void;
  /** How many bytes this viewer has not yet passed on (for example a WebSocket's bufferedAmount). */
  backlog(): number;
  /** The VM ended or went away; no more calls follow. */
  closed(reason: string): void;
}

export interface ConsoleAttachment {
  write(data: Buffer | string): void;
  detach(): void;
}

/** How a process in the guest ended. */
export type GuestExit = Pick<ExecResult, 'exitCode' | 'signal' | 'timedOut'>;

/** A process started in a guest through its agent, with streamed output (the exec WebSocket). */
export interface GuestProcess {
  /** Resolves when it ended and all its output was delivered. */
  readonly exit: Promise<GuestExit>;
  /** Signals its process group (and, on a terminal, its foreground job). */
  kill(signal: NodeJS.Signals): Promise<void>;
  /** Resizes its terminal; refused (400) when it runs without one. */
  resize(size: TerminalSize): Promise<void>;
}

export interface GuestProcessIo {
  stdout(chunk: Buffer): void;
  stderr(chunk: Buffer): void;
  /** Its stdin; without it the process reads /dev/null. */
  stdin?: AsyncIterable<Uint8Array>;
}

/** A file read from a guest: its size when opened and its bytes. */
export interface GuestFile {
  size: number;
  mode: number;
  stream: AsyncIterable<Buffer>;
}

/** The root disk images of the engine's guest cache (docs/images.md); src/api/image-routes.ts has the files' own. */
export interface ImageOperations {
  list(): ImageSummary[] | Promise<ImageSummary[]>;
  pull(request: PullImageRequest): Promise<PulledImage>;
  /** Without `force`, refuses (409) an image a snapshot or VM needs. */
  remove(reference: string, force?: boolean): Promise<RemovedImages>;
  /** `dryRun`: what it would remove, removing nothing. */
  prune(dryRun?: boolean): Promise<RemovedImages>;
}

/** A serialized episode list and the entity tag that names exactly this content (strong, quoted). */
export interface EpisodesBody {
  etag: string;
  body: Buffer;
}

export interface EngineApi {
  health(): Health;
  /** The image operations, when the engine has its own (a test's fake); else image-routes.ts works on the files. */
  images?: ImageOperations;
  listEpisodes(): Episode[];
  /**
   * The body of GET /api/v1/episodes (`{"episodes":[…]}`), serialized once and kept until the list changes, and its
   * ETag, which changes with it (docs/engine.md, "Listing episodes"); the server calls listEpisodes when absent.
   */
  episodesBody?(): EpisodesBody;
  getEpisode(ref: string): Episode;
  createEpisode(request: CreateEpisodeRequest): Promise<CreateEpisodeResponse>;
  /** Kills every VM of the episode and deletes it with its snapshots; without force, refuses while a VM runs. */
  deleteEpisode(ref: string, force: boolean): Promise<void>;
  listVms(): Vm[];
  getVm(ref: string): Vm;
  /** Sets or removes the VM's labels (docs/labels.md); kept in its episode's record. */
  updateVm(ref: string, request: UpdateVmRequest): Promise<Vm>;
  checkpoint(vmRef: string, request: CheckpointRequest): Promise<Snapshot>;
  forkVm(vmRef: string, count: number): Promise<ForkResponse>;
  forkSnapshot(snapshotRef: string, count: number): Promise<ForkResponse>;
  restore(vmRef: string, snapshotRef: string): Promise<RestoreResponse>;
  stop(vmRef: string): Promise<Vm>;
  start(vmRef: string): Promise<Vm>;
  pause(vmRef: string): Promise<Vm>;
  resume(vmRef: string): Promise<Vm>;
  reset(vmRef: string): Promise<Vm>;
  removeVm(vmRef: string, force: boolean): Promise<void>;
  memoryStats(vmRef: string): Promise<MemoryStats>;
  metrics(vmRef: string): MetricsHistory;
  /** The VM's network (docs/network.md, "Seen from the host"); a live VM's counters are read anew. */
  network(vmRef: string, after?: number): Promise<VmNetwork>;
  logs(vmRef: string, tailLines?: number): Logs;
  screen(vmRef: string): Screen;
  /** The asciicast v2 recording (newline-delimited JSON). */
  recording(vmRef: string): string;
  writeConsole(vmRef: string, data: string): void;
  attachConsole(vmRef: string, viewer: ConsoleViewer): ConsoleAttachment;
  /** Runs a command in the guest through its agent and collects its output (docs/agent.md). */
  exec(vmRef: string, request: ExecRequest): Promise<ExecResult>;
  /** Starts a command in the guest with streamed output and input. */
  spawn(vmRef: string, request: Omit<ExecRequest, 'stdin'>, io: GuestProcessIo): Promise<GuestProcess>;
  readFile(vmRef: string, path: string): Promise<GuestFile>;
  /** Writes a file in the guest; it replaces the old one only once all of it arrived. */
  writeFile(vmRef: string, path: string, data: AsyncIterable<Uint8Array>, mode?: number): Promise<{ bytes: number }>;
  listSnapshots(episodeRef: string): Snapshot[];
  getSnapshot(ref: string): Snapshot;
  /** Two snapshots of an episode compared: disks and console (docs/diff.md). */
  diff(query: DiffQuery): Promise<DiffResponse>;
  updateSnapshot(ref: string, request: UpdateSnapshotRequest): Promise<Snapshot>;
  deleteSnapshot(ref: string): Promise<void>;
  /** A VM or snapshot packed into a .smolmachine file (docs/smolmachine.md). */
  packMachine(request: PackMachineRequest): Promise<PackMachineResponse>;
  /** A new episode whose first VM restores a .smolmachine file's state. */
  openMachine(request: OpenMachineRequest): Promise<CreateEpisodeResponse>;
  /** What a .smolmachine file holds, checked, and what this host lacks to open it; nothing is written. */
  inspectMachine(request: InspectMachineRequest): Promise<InspectMachineResponse>;
  gc(): Promise<GcResult>;
  /** Sends an event to every subscriber (an image pull's progress, from image-routes.ts). */
  publish?(event: EngineEvent): void;
  /** Every event from now on, in order; returns the unsubscribe. */
  subscribe(listener: (event: EngineEvent) => void): () => void;
  /** Opens a TCP listener protected by a new random token (`smol serve`). */
  listen(request: ListenRequest): Promise<Listener>;
  /** Closes the TCP listener on `port`. */
  unlisten(port: number): Promise<void>;
  /** The data dir's named tokens (docs/remote.md, "Tokens"), without their secrets. */
  listTokens(): TokenInfo[];
  /** A new named token; its secret is in this answer only. */
  createToken(request: CreateTokenRequest): CreatedToken;
  /** Revokes a named token at once: its next request gets 401, its open streams close. */
  removeToken(name: string): void;
  /** The remote engines the app reaches through this one (docs/remote.md, "The app with several engines"). */
  listEngines(): RemoteEngineInfo[];
  /** What certificate the engine at `url` presents, learnt by a handshake that sends no token. */
  probeEngine(url: string): Promise<EngineProbe>;
  /** Adds a remote engine, pinning its certificate and checking its token. */
  addEngine(request: AddEngineRequest): Promise<AddedEngine>;
  /** Forgets a remote engine. */
  removeEngine(name: string): void;
  /** Suspends every running VM and ends the engine process. */
  shutdown(options?: { force?: boolean }): Promise<void>;
}
