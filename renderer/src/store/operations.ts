// What the user's actions do: each calls the engine through the Transport and shows its progress and failure
// where it happened (busy/failures by key) and in a toast. The engine's events then bring the new state; nothing
// here guesses it, except hiding what waits to be deleted (so undo can bring it back).
import type { ResponseOf } from '../../../src/api/operations.js';
import type { CreateEpisodeResponse, ForkResponse, LabelsChange, Snapshot, Vm } from '../../../src/api/schema.js';
import { formatBytes } from '../format.js';
import { clearOperationProgress } from './engine-state.js';
import { call, type Transport } from '../transport/transport.js';
import { dismissToast, toast, type AppStore } from './app-store.js';
import { selectedVmId, shownVmIds, successorOf } from './selection.js';

/** How long a delete waits for Undo. */
export const UNDO_MS = 6000;

export type Lifecycle = 'stop' | 'start' | 'pause' | 'resume' | 'reset';

export class Operations {
  readonly #timers = new Map<string, ReturnType<typeof setTimeout>>();

  constructor(
    readonly store: AppStore,
    readonly transport: Transport,
  ) {}

  /** Runs `work` with `label` shown on `key`; a failure is kept on `key` and toasted; resolves undefined then. */
  async run<T>(key: string, label: string, work: () => Promise<T>): Promise<T | undefined> {
    this.store.setState((s) => ({ busy: { ...s.busy, [key]: label }, failures: withoutKey(s.failures, key) }));
    try {
      return await work();
    } catch (error) {
      const message = (error as Error).message;
      this.store.setState((s) => ({ failures: { ...s.failures, [key]: message } }));
      toast(this.store, 'error', `${label.replace(/…$/, '')} failed: ${message}`);
      return undefined;
    } finally {
      this.store.setState((s) => ({ busy: withoutKey(s.busy, key) }));
    }
  }

  /** A new episode from a Smolfile path on the engine's machine, or from its text (the editor); selects it. */
  async createEpisode(
    request:
      | { smolfile: string; name?: string | undefined }
      | { text: string; directory?: string | undefined; name?: string | undefined },
  ): Promise<CreateEpisodeResponse | undefined> {
    const body = Object.fromEntries(Object.entries(request).filter(([, v]) => v !== undefined)) as typeof request;
    const created = await this.run('new-episode', 'Starting the episode…', () =>
      call(this.transport, 'createEpisode', { body }),
    );
    if (created) this.store.setState({ episodeId: created.episode.id, vmId: created.vm.id, snapshotId: null });
    return created;
  }

  /** Packs a VM or snapshot (by id) into `path` on the engine's host; the toast says where and how big. */
  async packMachine(source: string, path: string): Promise<ResponseOf<'packMachine'> | undefined> {
    this.store.setState((s) => ({ engine: clearOperationProgress(s.engine, 'pack') }));
    const packed = await this.run('export', 'Exporting…', () =>
      call(this.transport, 'packMachine', { body: { source, path } }),
    );
    if (packed) toast(this.store, 'info', `Exported to ${packed.path} (${formatBytes(packed.bytes)})`);
    return packed;
  }

  /** What a .smolmachine file on the engine's host holds, checked, before the user opens it; nothing is written. */
  async inspectMachine(path: string): Promise<ResponseOf<'inspectMachine'> | undefined> {
    return this.run('open-machine', 'Checking…', () => call(this.transport, 'inspectMachine', { body: { path } }));
  }

  /** Starts an episode from a .smolmachine file on the engine's host and opens it with its VM selected. */
  async openMachine(path: string): Promise<CreateEpisodeResponse | undefined> {
    this.store.setState((s) => ({ engine: clearOperationProgress(s.engine, 'open') }));
    const opened = await this.run('open-machine', 'Opening…', () =>
      call(this.transport, 'openMachine', { body: { path } }),
    );
    if (opened) {
      this.store.setState({ episodeId: opened.episode.id, vmId: opened.vm.id, snapshotId: null });
      toast(this.store, 'info', `Opened ${path} as episode ${opened.episode.name}`);
    }
    return opened;
  }

  async checkpoint(vmId: string, name?: string, note?: string, announce = true): Promise<Snapshot | undefined> {
    const body = { ...(name ? { name } : {}), ...(note ? { note } : {}) };
    const snapshot = await this.run(`vm:${vmId}`, 'Checkpointing…', () =>
      call(this.transport, 'checkpoint', { params: { vm: vmId }, body }),
    );
    if (snapshot && announce) toast(this.store, 'info', `Checkpoint ${snapshot.name} saved`);
    return snapshot;
  }

  async fork(from: { vmId: string } | { snapshotId: string }, count: number): Promise<ForkResponse | undefined> {
    const key = 'vmId' in from ? `vm:${from.vmId}` : `snapshot:${from.snapshotId}`;
    const forked = await this.run(key, `Forking ×${count}…`, () =>
      'vmId' in from
        ? call(this.transport, 'forkVm', { params: { vm: from.vmId }, body: { count } })
        : call(this.transport, 'forkSnapshot', { params: { snapshot: from.snapshotId }, body: { count } }),
    );
    if (forked) toast(this.store, 'info', `${forked.children.length} new VM${forked.children.length === 1 ? '' : 's'}`);
    return forked;
  }

  /** Moves the VM to the snapshot; with `checkpointFirst`, a named checkpoint of where it is comes first. */
  async restore(vmId: string, snapshotId: string, checkpointFirst?: { name?: string; note?: string }) {
    if (checkpointFirst && !(await this.checkpoint(vmId, checkpointFirst.name, checkpointFirst.note))) return undefined;
    const restored = await this.run(`vm:${vmId}`, 'Restoring…', () =>
      call(this.transport, 'restore', { params: { vm: vmId }, body: { snapshot: snapshotId } }),
    );
    if (restored) {
      const saved = restored.savedAs ? ` (where it was is kept as ${restored.savedAs.name})` : '';
      toast(this.store, 'info', `Restored${saved}`);
    }
    return restored;
  }

  /**
   * Resets the VM to a clean machine, keeping where it was first: a live VM is checkpointed (a restore point), and the
   * toast's Undo restores it there. A VM that is not running keeps its last snapshot as the way back.
   */
  async reset(vmId: string): Promise<Vm | undefined> {
    const vm = this.store.getState().engine.vms[vmId];
    if (!vm) return undefined;
    const live = vm.state === 'running' || vm.state === 'paused';
    const kept = live ? await this.checkpoint(vmId, undefined, `kept before ${vm.name} was reset`, false) : undefined;
    if (live && !kept) return undefined; // the checkpoint failed, and said so: nothing was reset
    const back = kept?.id ?? vm.snapshot;
    const reset = await this.lifecycle(vmId, 'reset');
    if (!reset) return undefined;
    const name = back ? (kept?.name ?? this.store.getState().engine.snapshots[back]?.name ?? back) : null;
    toast(this.store, 'info', `${vm.name} reset${name ? ` (where it was is kept as ${name})` : ''}`, {
      expires: Date.now() + UNDO_MS * 2,
      ...(back ? { action: { label: 'Undo', run: () => void this.restore(vmId, back) } } : {}),
    });
    return reset;
  }

  lifecycle(vmId: string, verb: Lifecycle): Promise<Vm | undefined> {
    const label = {
      stop: 'Stopping…',
      start: 'Starting…',
      pause: 'Pausing…',
      resume: 'Resuming…',
      reset: 'Resetting…',
    };
    return this.run(`vm:${vmId}`, label[verb], () => call(this.transport, `${verb}Vm`, { params: { vm: vmId } }));
  }

  updateSnapshot(id: string, changes: { name?: string; note?: string }): Promise<Snapshot | undefined> {
    return this.run(`snapshot:${id}`, 'Saving…', () =>
      call(this.transport, 'updateSnapshot', { params: { snapshot: id }, body: changes }),
    );
  }

  /** Sets labels (a value) and removes them (null) on a snapshot (docs/labels.md). */
  labelSnapshot(id: string, labels: LabelsChange): Promise<Snapshot | undefined> {
    return this.run(`snapshot-labels:${id}`, 'Saving…', () =>
      call(this.transport, 'updateSnapshot', { params: { snapshot: id }, body: { labels } }),
    );
  }

  /** Sets labels (a value) and removes them (null) on a VM (docs/labels.md). */
  labelVm(id: string, labels: LabelsChange): Promise<Vm | undefined> {
    return this.run(`vm-labels:${id}`, 'Saving…', () =>
      call(this.transport, 'updateVm', { params: { vm: id }, body: { labels } }),
    );
  }

  deleteEpisode(id: string): void {
    this.deleteEpisodes([id]);
  }

  /** Deletes episodes after one Undo toast for them all (their running VMs are killed). */
  deleteEpisodes(ids: readonly string[]): void {
    const { engine } = this.store.getState();
    const running = ids
      .flatMap((id) => engine.episodes[id]?.vmIds ?? [])
      .filter((vm) => engine.vms[vm]?.state === 'running').length;
    const vms = `${running} running VM${running === 1 ? ' is' : 's are'} killed`;
    const what =
      ids.length === 1
        ? `Episode ${engine.episodes[ids[0]!]?.name ?? ids[0]} deleted${running ? ` (its ${vms})` : ''}`
        : `${ids.length} episodes deleted${running ? ` (their ${vms})` : ''}`;
    this.#deleteLater(ids, what, (id) =>
      call(this.transport, 'deleteEpisode', { params: { episode: id }, query: { force: 'true' } }),
    );
    const open = this.store.getState().episodeId;
    if (open && ids.includes(open)) this.store.setState({ episodeId: null, snapshotId: null });
  }

  deleteSnapshot(id: string): void {
    const name = this.store.getState().engine.snapshots[id]?.name ?? id;
    this.#deleteLater([id], `Snapshot ${name} deleted`, () =>
      call(this.transport, 'deleteSnapshot', { params: { snapshot: id } }),
    );
  }

  removeVm(id: string): void {
    const state = this.store.getState();
    const name = state.engine.vms[id]?.name ?? id;
    // The selection moves to its neighbour now (the VM is hidden at once), not when the delete goes out.
    if (selectedVmId(state) === id) {
      const shown = shownVmIds(state);
      this.store.setState({ vmId: successorOf(shown, id, (other) => other !== id) });
    }
    this.#deleteLater([id], `VM ${name} removed`, () =>
      call(this.transport, 'removeVm', { params: { vm: id }, query: { force: 'true' } }),
    );
  }

  /**
   * Hides the things at once and shows one Undo toast for them; the DELETEs go out only when it expires. If the page
   * closes first, nothing is deleted.
   */
  #deleteLater(all: readonly string[], text: string, send: (id: string) => Promise<unknown>): void {
    const ids = all.filter((id) => !this.#timers.has(id));
    if (ids.length === 0) return;
    this.store.setState((s) => ({ pendingDeletes: [...s.pendingDeletes, ...ids] }));
    const unhide = (gone: readonly string[]) =>
      this.store.setState((s) => ({ pendingDeletes: s.pendingDeletes.filter((p) => !gone.includes(p)) }));
    const toastId = toast(this.store, 'info', text, {
      expires: Date.now() + UNDO_MS,
      action: {
        label: 'Undo',
        run: () => {
          clearTimeout(this.#timers.get(ids[0]!));
          for (const id of ids) this.#timers.delete(id);
          unhide(ids);
        },
      },
    });
    // One timer for the batch, known under each of its ids.
    const timer = setTimeout(() => {
      for (const id of ids) this.#timers.delete(id);
      dismissToast(this.store, toastId);
      for (const id of ids) void this.run(`delete:${id}`, 'Deleting…', () => send(id)).then(() => unhide([id]));
    }, UNDO_MS);
    for (const id of ids) this.#timers.set(id, timer);
  }

  /** Bulk actions on ticked episodes: each running VM checkpoints or stops; delete deletes the episodes. */
  async bulk(action: 'checkpoint' | 'stop' | 'delete', episodeIds: readonly string[]): Promise<void> {
    const { engine } = this.store.getState();
    if (action === 'delete') {
      this.deleteEpisodes(episodeIds);
      this.store.setState({ ticked: [] });
      return;
    }
    const vms = episodeIds
      .flatMap((id) => engine.episodes[id]?.vmIds ?? [])
      .filter((vm) => ['running', 'paused'].includes(engine.vms[vm]?.state ?? ''));
    if (vms.length === 0) {
      toast(this.store, 'info', 'None of the ticked episodes has a running VM');
      return;
    }
    await Promise.all(vms.map((vm) => (action === 'checkpoint' ? this.checkpoint(vm) : this.lifecycle(vm, 'stop'))));
  }
}

function withoutKey<T>(record: Record<string, T>, key: string): Record<string, T> {
  const copy = { ...record };
  delete copy[key];
  return copy;
}
