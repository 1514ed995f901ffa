// The TypeScript SDK (README, "SDK"): what an agent harness uses to run episodes. A thin, typed layer over the API;
// it starts the data dir's engine when none runs, so a script needs nothing else.
import path from 'node:path';
import type { ExecOptions } from '../../src/agent-client/agent-process.js';
import type { ApiClient, ExecExit } from '../../src/api/api-client.js';
import { operationRequest, type ResponseOf } from '../../src/api/operations.js';
import type {
  CreateEpisodeResponse,
  EngineEvent,
  Episode,
  ForkResponse,
  GcResult,
  LabelsChange,
  Logs,
  MemoryStats,
  MetricsHistory,
  RestoreResponse,
  Screen,
  Snapshot,
  Vm,
  VmNetwork,
} from '../../src/api/schema.js';
import type { InspectMachineResponse, PackMachineResponse } from '../../src/api/machine-schema.js';
import type { DiffResponse } from '../../src/api/diff-schema.js';
import type { CheckSmolfileResponse } from '../../src/api/smolfile-schema.js';
import { copyIn, copyOut, type CopyResult } from './copy.js';
import { connectEngine, type ConnectOptions } from './engine-connection.js';

export type { ConnectOptions } from './engine-connection.js';
export type {
  EngineEvent,
  Episode,
  NetworkRefusal,
  PortForward,
  Snapshot,
  Vm,
  VmNetwork,
} from '../../src/api/schema.js';
export type { ExecExit } from '../../src/api/api-client.js';
/**
 * The agent's own exec options: env, cwd, user, stdin, timeoutMs, onStdout and onStderr. Through the engine, env,
 * cwd and user default to the episode's workload (the image's Env, WorkingDir and User under the Smolfile's).
 */
export type { ExecOptions } from '../../src/agent-client/agent-process.js';

export interface TerminalOptions {
  /** The terminal's size; 24 by 80 unless given (each 1 to 1000). */
  rows?: number;
  cols?: number;
  /** Added to the workload's env; TERM is xterm-256color unless given. */
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
  /** What the terminal shows: the command's output and the terminal's echo, as bytes. */
  onData(chunk: Buffer): void;
}

/** An interactive command on a terminal in the guest (smol.terminal). */
export interface Terminal {
  /** Types into it: keys as bytes ("\x03" is Ctrl-C, which the guest's terminal turns into SIGINT for its job). */
  write(data: string | Uint8Array): void;
  resize(rows: number, cols: number): void;
  /** Signals its process group and its foreground job. */
  signal(signal: NodeJS.Signals): void;
  /** How it ended (`exit 3` in a shell: exitCode 3). */
  exit: Promise<ExecExit>;
  /** Leaves it: the command gets SIGHUP, as from a closed terminal. */
  close(): void;
}

export interface ExecResult extends ExecExit {
  /** What the command wrote, when no onStdout / onStderr callback was given (else empty). */
  stdout: Buffer;
  stderr: Buffer;
}

/** Where episodes() asks: the route table's path, not a string of our own. */
const EPISODES_PATH = operationRequest('listEpisodes').path;

export class Smol {
  /** The last episode list's ETag and its text, which the next episodes() sends as If-None-Match and parses. */
  #listed: { etag: string; text: string } | null = null;

  private constructor(readonly api: ApiClient) {}

  /** Connects to the engine of `options.home` (or `$SMOL_HOME`), starting it when none runs. */
  static async connect(options: ConnectOptions = {}): Promise<Smol> {
    return new Smol(await connectEngine(options));
  }

  /** A new episode from a Smolfile; its first VM is running when this resolves. */
  up(smolfile: string, options: { name?: string } = {}): Promise<CreateEpisodeResponse> {
    return this.api.call('createEpisode', { body: { smolfile: path.resolve(smolfile), ...options } });
  }

  /**
   * A new episode from a Smolfile's text (docs/smolfile.md, "A Smolfile as text"): its relative paths start from
   * `directory` (absolute, on the engine's machine); without one a relative path is an error.
   */
  upText(text: string, options: { directory?: string; name?: string } = {}): Promise<CreateEpisodeResponse> {
    return this.api.call('createEpisode', { body: { text, ...options } });
  }

  /** A Smolfile's text checked as `upText` would check it: `ok`, and every error and warning at its line. */
  checkSmolfile(text: string, options: { directory?: string } = {}): Promise<CheckSmolfileResponse> {
    return this.api.call('checkSmolfile', { body: { text, ...options } });
  }

  /**
   * Starts an episode from a .smolmachine file (docs/smolmachine.md): its first VM continues the packed state. The
   * file is checked whole first; a damaged one, a newer format or a CPU this host lacks features of is refused.
   */
  upFrom(machineFile: string, options: { name?: string; requestId?: string } = {}): Promise<CreateEpisodeResponse> {
    return this.api.call('openMachine', { body: { path: path.resolve(machineFile), ...options } });
  }

  /**
   * What a .smolmachine file holds (its manifest, checked) and the CPU features the engine's host lacks to open it;
   * nothing is written. A damaged file or a newer format is refused with what is wrong.
   */
  inspect(machineFile: string): Promise<InspectMachineResponse> {
    return this.api.call('inspectMachine', { body: { path: path.resolve(machineFile) } });
  }

  /**
   * Packs a VM (a running one is checkpointed first) or a snapshot into a .smolmachine file. `requestId` tags the
   * pack's `progress` events (`request`), so a client with several packs under way tells them apart.
   */
  pack(source: string, machineFile: string, options: { requestId?: string } = {}): Promise<PackMachineResponse> {
    return this.api.call('packMachine', { body: { source, path: path.resolve(machineFile), ...options } });
  }

  /**
   * Every episode. The client keeps the last list with its ETag and asks with If-None-Match: while nothing the list
   * shows has changed, the engine answers 304 with no body and this resolves with a copy of the kept list
   * (docs/engine.md, "Listing episodes"), so a harness that polls does not fetch 628 KB (1,000 episodes) each
   * time. Each call's answer is parsed from the kept text, so it is its own: changing it changes neither the kept
   * list nor the next answer (a parse is about half the time of a structuredClone of the list).
   */
  async episodes(): Promise<Episode[]> {
    // The list this request's ETag names, taken now: another call may replace #listed before this one is answered.
    const kept = this.#listed;
    const answer = await this.api.getIfChanged<ResponseOf<'listEpisodes'>>(EPISODES_PATH, kept?.etag ?? null);
    if (!answer.changed) return (JSON.parse(kept!.text) as ResponseOf<'listEpisodes'>).episodes;
    this.#listed = answer.etag === null ? null : { etag: answer.etag, text: answer.text };
    return answer.value.episodes;
  }

  episode(ref: string): Promise<Episode> {
    return this.api.call('getEpisode', { params: { episode: ref } });
  }

  async vms(): Promise<Vm[]> {
    return (await this.api.call('listVms')).vms;
  }

  vm(ref: string): Promise<Vm> {
    return this.api.call('getVm', { params: { vm: ref } });
  }

  /** The episode's snapshots in creation order (the timeline); `parent` links make the tree. */
  async snapshots(episodeRef: string): Promise<Snapshot[]> {
    return (await this.api.call('listSnapshots', { params: { episode: episodeRef } })).snapshots;
  }

  snapshot(ref: string): Promise<Snapshot> {
    return this.api.call('getSnapshot', { params: { snapshot: ref } });
  }

  /** Renames a snapshot or changes its note. */
  updateSnapshot(ref: string, changes: { name?: string; note?: string }): Promise<Snapshot> {
    return this.api.call('updateSnapshot', { params: { snapshot: ref }, body: changes });
  }

  /**
   * Sets labels on a VM or a snapshot (docs/labels.md): `{ reward: 0.83, task: 'fix-1234' }`; `null` removes a key,
   * the others stay. Resolves with the VM or snapshot as it now is.
   */
  labelVm(vmRef: string, labels: LabelsChange): Promise<Vm> {
    return this.api.call('updateVm', { params: { vm: vmRef }, body: { labels } });
  }

  labelSnapshot(ref: string, labels: LabelsChange): Promise<Snapshot> {
    return this.api.call('updateSnapshot', { params: { snapshot: ref }, body: { labels } });
  }

  /**
   * What changed between two snapshots of an episode (docs/diff.md): per disk the files added, removed and changed
   * (text diffs under a size cap), and the console output between them.
   */
  diff(from: string, to: string): Promise<DiffResponse> {
    return this.api.call('diff', { query: { from, to } });
  }

  /** Deletes a snapshot; its memory layer stays while a later snapshot or a live VM needs it. */
  async deleteSnapshot(ref: string): Promise<void> {
    await this.api.call('deleteSnapshot', { params: { snapshot: ref } });
  }

  checkpoint(vmRef: string, options: { name?: string; note?: string } = {}): Promise<Snapshot> {
    return this.api.call('checkpoint', { params: { vm: vmRef }, body: options });
  }

  /** `count` new VMs from a running VM (which keeps running) or from a snapshot. */
  fork(
    ref: string,
    count = 1,
    from: 'vm' | 'snapshot' = ref.startsWith('sn-') ? 'snapshot' : 'vm',
  ): Promise<ForkResponse> {
    return from === 'vm'
      ? this.api.call('forkVm', { params: { vm: ref }, body: { count } })
      : this.api.call('forkSnapshot', { params: { snapshot: ref }, body: { count } });
  }

  /** Moves the VM to `snapshotRef`, checkpointing where it was first (`savedAs`). */
  restore(vmRef: string, snapshotRef: string): Promise<RestoreResponse> {
    return this.api.call('restore', { params: { vm: vmRef }, body: { snapshot: snapshotRef } });
  }

  /** A clean machine from the Smolfile's base snapshot. */
  reset(vmRef: string): Promise<Vm> {
    return this.api.call('resetVm', { params: { vm: vmRef } });
  }

  stop(vmRef: string): Promise<Vm> {
    return this.api.call('stopVm', { params: { vm: vmRef } });
  }

  start(vmRef: string): Promise<Vm> {
    return this.api.call('startVm', { params: { vm: vmRef } });
  }

  pause(vmRef: string): Promise<Vm> {
    return this.api.call('pauseVm', { params: { vm: vmRef } });
  }

  resume(vmRef: string): Promise<Vm> {
    return this.api.call('resumeVm', { params: { vm: vmRef } });
  }

  /** Removes a VM (killing it); its snapshots stay with the episode. */
  async removeVm(vmRef: string): Promise<void> {
    await this.api.call('removeVm', { params: { vm: vmRef }, query: { force: 'true' } });
  }

  /** Kills every VM of the episode and deletes it with its snapshots. */
  async destroy(episodeRef: string): Promise<void> {
    await this.api.call('deleteEpisode', { params: { episode: episodeRef }, query: { force: 'true' } });
  }

  memory(vmRef: string): Promise<MemoryStats> {
    return this.api.call('memoryStats', { params: { vm: vmRef } });
  }

  /** The VM's CPU (% of one host CPU) and memory over the last few minutes, oldest first. */
  metrics(vmRef: string): Promise<MetricsHistory> {
    return this.api.call('metrics', { params: { vm: vmRef } });
  }

  /**
   * The VM's network (docs/network.md, "Seen from the host"): its forwarded ports (`vm.ports` has them too), refusal
   * counters and the last refusals, only those after seq `after` when given. A VM without a network answers
   * `enabled: false`.
   */
  network(vmRef: string, options: { after?: number } = {}): Promise<VmNetwork> {
    return this.api.call('network', { params: { vm: vmRef }, query: { after: options.after } });
  }

  /**
   * Runs a command in the VM's guest through its agent (no shell: `['sh', '-c', '…']` for one) and resolves when
   * it ended, with its exit status and output. A program that cannot be started rejects, saying why.
   */
  async exec(vmRef: string, argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    const { stdin, onStdout, onStderr, ...request } = options;
    const input = typeof stdin === 'string' || stdin instanceof Uint8Array ? [Buffer.from(stdin)] : stdin;
    const exit = await this.api.exec(
      vmRef,
      { argv, ...request },
      {
        onStdout: onStdout ?? ((chunk) => stdout.push(chunk)),
        onStderr: onStderr ?? ((chunk) => stderr.push(chunk)),
        ...(input && {
          stdin: (async function* () {
            yield* input;
          })(),
        }),
      },
    ).exit;
    return { ...exit, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr) };
  }

  /**
   * Runs `argv` (a shell by default) on a pseudo-terminal in the VM's guest, through its agent: job control, Ctrl-C,
   * resize and the exit status, as `smol exec -it VM -- sh` gives a person.
   */
  terminal(vmRef: string, argv: string[] = ['sh'], options: TerminalOptions): Terminal {
    const typed: Uint8Array[] = [];
    let wake: (() => void) | null = null;
    let ended = false;
    const input = (async function* () {
      for (;;) {
        const chunk = typed.shift();
        if (chunk) yield chunk;
        else if (ended) return;
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    })();
    const { rows = 24, cols = 80, env, cwd, user, onData } = options;
    const stream = this.api.exec(
      vmRef,
      {
        argv,
        env: { TERM: 'xterm-256color', ...env },
        ...(cwd !== undefined && { cwd }),
        ...(user !== undefined && { user }),
        tty: { rows, cols },
      },
      { onStdout: onData, onStderr: onData, stdin: input },
    );
    const finish = () => {
      ended = true;
      wake?.();
    };
    stream.exit.then(finish, finish);
    return {
      write: (data) => {
        typed.push(typeof data === 'string' ? Buffer.from(data) : data);
        wake?.();
      },
      resize: (newRows, newCols) => stream.resize({ rows: newRows, cols: newCols }),
      signal: (signal) => stream.signal(signal),
      exit: stream.exit,
      close: () => {
        finish();
        stream.close();
      },
    };
  }

  /** A file from the VM's guest. */
  async readFile(vmRef: string, path: string): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of await this.api.openFile(vmRef, path)) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  /**
   * Copies a host file or directory into the VM's guest, as `docker cp` does (into an existing directory as
   * `<dir>/<basename>`, else as `guestPath`): owners, modes, times and links kept, streamed through the agent.
   */
  copyIn(vmRef: string, hostPath: string, guestPath: string): Promise<CopyResult> {
    return copyIn(this, vmRef, hostPath, guestPath);
  }

  /** Copies a guest file or directory out to the host, as `docker cp` does; owners kept when running as root. */
  copyOut(vmRef: string, guestPath: string, hostPath: string): Promise<CopyResult> {
    return copyOut(this, vmRef, guestPath, hostPath);
  }

  /** Writes a file in the VM's guest (its directories made); the old file stays until all of it arrived. */
  writeFile(
    vmRef: string,
    path: string,
    data: string | Uint8Array | AsyncIterable<Uint8Array>,
    options: { mode?: number } = {},
  ): Promise<{ bytes: number }> {
    return this.api.writeFile(vmRef, path, typeof data === 'string' ? Buffer.from(data) : data, options);
  }

  /** Types `text` into the VM's console. */
  async write(vmRef: string, text: string): Promise<void> {
    await this.api.call('writeConsole', { params: { vm: vmRef }, body: { data: text } });
  }

  logs(vmRef: string, tail?: number): Promise<Logs> {
    return this.api.call('logs', { params: { vm: vmRef }, query: { tail } });
  }

  screen(vmRef: string): Promise<Screen> {
    return this.api.call('screen', { params: { vm: vmRef } });
  }

  gc(): Promise<GcResult> {
    return this.api.call('gc');
  }

  /** Live console: the current screen first, then output as it comes; `write` types into it. */
  console(
    vmRef: string,
    handlers: {
      onScreen?: (serialized: string) => void;
      onData: (data: Buffer) => void;
      onClose?: (why: string) => void;
    },
  ): { write: (data: string | Buffer) => void; close: () => void } {
    return this.api.console(vmRef, handlers);
  }

  /** Every engine event from now on. */
  events(onEvent: (event: EngineEvent) => void): { close: () => void } {
    return this.api.events(onEvent);
  }

  /**
   * Resolves once the VM's console output (from the moment of the call, plus its current screen) matches
   * `pattern`; rejects after `timeoutMs`.
   */
  waitForOutput(vmRef: string, pattern: RegExp, timeoutMs = 30_000): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      let text = '';
      const check = () => {
        const match = pattern.exec(text);
        if (!match) return;
        finish();
        resolve(match);
      };
      const timer = setTimeout(() => {
        finish();
        reject(
          new Error(`${vmRef} did not print ${pattern} within ${timeoutMs / 1000} s; it printed: ${text.slice(-300)}`),
        );
      }, timeoutMs);
      const stream = this.console(vmRef, {
        onScreen: (serialized) => {
          text += serialized;
          check();
        },
        onData: (data) => {
          text += data.toString('utf8');
          check();
        },
        onClose: (why) => {
          finish();
          reject(new Error(`${vmRef}'s console closed (${why}) before it printed ${pattern}`));
        },
      });
      const finish = () => {
        clearTimeout(timer);
        stream.close();
      };
    });
  }
}
