// Every action as a command: what the palette lists and what the keyboard shortcuts run. A command is offered only
// where it applies (a VM is selected, a snapshot is selected, …). They act on the engine of the open episode: the
// page's own, or a remote engine's App (engines/engine-stores.ts), whose titles then say "on NAME"; while a remote
// engine is out of reach its actions are listed disabled with the reason (docs/remote.md, "In the app").
import type { App } from './app-context.js';
import type { AppState } from './store/app-store.js';
import {
  awayReason,
  closeEpisode,
  connected,
  deleteTicked,
  openDialog,
  openEpisode,
  selectedVmId,
} from './store/selection.js';

export interface Command {
  id: string;
  title: string;
  /** Shown beside the title; the shortcut handler (shortcuts.ts) uses the same keys. */
  keys?: string;
  run: () => void;
  /** Why it cannot run now (shown in the palette; a shortcut does nothing), or undefined. */
  disabled?: string;
}

/** Other engines' episodes the palette may open from the list, each through its own engine's store. */
export interface OtherEngine {
  name: string;
  app: App;
}

/**
 * The commands of `app` in `state`. `engine`: the name of the remote engine `app` is (its titles say so), or
 * undefined for the page's own; `others`: remote engines whose episodes the list may open.
 */
export function commands(app: App, state: AppState, engine?: string, others: OtherEngine[] = []): Command[] {
  const list = engineCommands(app, state, engine);
  if (!state.episodeId) list.push(...otherEpisodes(others));
  if (!engine) return list;
  const on = ` on ${engine}`;
  const away = awayReason(state, engine);
  return list.map((command) => ({
    ...command,
    title:
      command.id === 'back' || command.id.startsWith('open:')
        ? command.title
        : command.title.replace(/(…)?$/, `${on}$1`),
    ...(away && command.id !== 'back' && !command.id.startsWith('open:') && { disabled: away }),
  }));
}

/** Open commands for the remote engines' episodes (titled with their engine). */
function otherEpisodes(others: OtherEngine[]): Command[] {
  const list: Command[] = [];
  for (const { name, app } of others) {
    const state = app.store.getState();
    for (const id of state.engine.episodeIds) {
      const e = state.engine.episodes[id];
      if (e && !state.pendingDeletes.includes(id)) {
        list.push({
          id: `open:${name}:${id}`,
          title: `Open episode ${e.name} on ${name}`,
          run: () => openEpisode(app.store, id, e.vmIds[0] ?? null),
        });
      }
    }
  }
  return list;
}

function engineCommands(app: App, state: AppState, remote?: string): Command[] {
  const { store, operations } = app;
  const dialog = (d: Parameters<typeof openDialog>[1]) => openDialog(store, d);
  // The selected VM of the open episode, or its successor when the one chosen is gone (selection.ts).
  const vmId = selectedVmId(state);
  const vm = vmId ? state.engine.vms[vmId] : undefined;
  const snapshot = state.snapshotId ? state.engine.snapshots[state.snapshotId] : undefined;
  const episode = state.episodeId ? state.engine.episodes[state.episodeId] : undefined;
  // While the engine is out of reach only moving about is offered; actions come back with the connection. A remote
  // engine's are listed (commands() disables them, saying why).
  if (!connected(state) && !remote) {
    const list: Command[] = [];
    if (episode) list.push({ id: 'back', title: 'Back to episodes', keys: 'Esc', run: () => closeEpisode(store) });
    return list;
  }
  const list: Command[] = [
    { id: 'new', title: 'New episode…', keys: 'N', run: () => dialog({ kind: 'new-episode' }) },
    { id: 'open-machine', title: 'Open machine…', run: () => dialog({ kind: 'open-machine' }) },
  ];
  if (episode)
    list.push({
      id: 'back',
      title: 'Back to episodes',
      keys: 'Esc',
      run: () => closeEpisode(store),
    });
  if (vm && episode) {
    const live = vm.state === 'running' || vm.state === 'paused';
    if (live) {
      list.push({
        id: 'checkpoint',
        title: `Checkpoint ${vm.name}…`,
        keys: 'C',
        run: () => dialog({ kind: 'checkpoint', vmId: vm.id }),
      });
      list.push({
        id: 'fork',
        title: `Fork ${vm.name}…`,
        keys: 'F',
        run: () => dialog({ kind: 'fork', vmId: vm.id, snapshotId: null }),
      });
      list.push({ id: 'stop', title: `Stop ${vm.name}`, run: () => void operations.lifecycle(vm.id, 'stop') });
    }
    if (vm.state === 'running')
      list.push({ id: 'pause', title: `Pause ${vm.name}`, run: () => void operations.lifecycle(vm.id, 'pause') });
    if (vm.state === 'paused')
      list.push({ id: 'resume', title: `Resume ${vm.name}`, run: () => void operations.lifecycle(vm.id, 'resume') });
    if (vm.state === 'suspended')
      list.push({ id: 'start', title: `Start ${vm.name}`, run: () => void operations.lifecycle(vm.id, 'start') });
    list.push({
      id: 'reset',
      title: `Reset ${vm.name} to a clean machine`,
      run: () => void operations.reset(vm.id),
    });
    if (live || vm.snapshot)
      list.push({
        id: 'export-vm',
        title: `Export VM ${vm.name}…`,
        run: () => dialog({ kind: 'export', source: { vmId: vm.id } }),
      });
    list.push({ id: 'remove-vm', title: `Remove VM ${vm.name}`, run: () => operations.removeVm(vm.id) });
    if (snapshot) {
      list.push({
        id: 'restore',
        title: `Restore ${vm.name} to ${snapshot.name}…`,
        keys: 'R',
        run: () => dialog({ kind: 'restore', vmId: vm.id, snapshotId: snapshot.id }),
      });
    }
  }
  if (snapshot) {
    list.push({
      id: 'fork-snapshot',
      title: `Fork from snapshot ${snapshot.name}…`,
      run: () => dialog({ kind: 'fork', vmId: null, snapshotId: snapshot.id }),
    });
    list.push({
      id: 'export-snapshot',
      title: `Export snapshot ${snapshot.name}…`,
      run: () => dialog({ kind: 'export', source: { snapshotId: snapshot.id } }),
    });
    if (snapshot.kind !== 'base') {
      list.push({
        id: 'delete-snapshot',
        title: `Delete snapshot ${snapshot.name}`,
        keys: 'Del',
        run: () => operations.deleteSnapshot(snapshot.id),
      });
    }
  }
  if (episode)
    list.push({
      id: 'delete-episode',
      title: `Delete episode ${episode.name}`,
      run: () => operations.deleteEpisode(episode.id),
    });
  if (!episode && state.ticked.length) {
    list.push({
      id: 'bulk-checkpoint',
      title: `Checkpoint ${state.ticked.length} selected episodes`,
      run: () => void operations.bulk('checkpoint', state.ticked),
    });
    list.push({
      id: 'bulk-stop',
      title: `Stop ${state.ticked.length} selected episodes`,
      run: () => void operations.bulk('stop', state.ticked),
    });
    list.push({
      id: 'bulk-delete',
      title: `Delete ${state.ticked.length} selected episodes`,
      run: () => deleteTicked(app, state.ticked),
    });
  }
  for (const id of state.engine.episodeIds) {
    const e = state.engine.episodes[id];
    if (e && id !== state.episodeId && !state.pendingDeletes.includes(id)) {
      list.push({
        id: `open:${id}`,
        title: `Open episode ${e.name}`,
        run: () => openEpisode(store, id, e.vmIds[0] ?? null),
      });
    }
  }
  return list;
}
