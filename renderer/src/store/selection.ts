// What the user has open and selected, and the named actions that change it (STYLE.md: components never call
// setState). One VM is selected in an open episode: the toolbar, the palette and the shortcuts act on the VM
// `selectedVmId` names, which is always one that exists (the chosen one, else the nearest one still there).
import type { AppState, AppStore, Dialog } from './app-store.js';
import type { Operations } from './operations.js';

const LIVE = new Set(['running', 'paused', 'creating']);

/** Whether the engine is reachable now: actions are offered only then (the page reconnects by itself). */
export const connected = (state: AppState): boolean => state.connection.state === 'open';

/**
 * Why `state`'s engine (a remote one's `name`, else the page's own) cannot act now, or null while it is connected:
 * the reason the palette and the open episode give for their disabled actions.
 */
export function awayReason(state: AppState, name?: string): string | null {
  return connected(state) ? null : `${name ?? 'the engine'} is unreachable: actions come back with it`;
}

/** The open episode's VMs as the page shows them: the ones that exist and do not wait for their delete. */
export function shownVmIds(state: AppState, episodeId = state.episodeId): string[] {
  const episode = episodeId ? state.engine.episodes[episodeId] : undefined;
  return (episode?.vmIds ?? []).filter((id) => id in state.engine.vms && !state.pendingDeletes.includes(id));
}

/** The VM the episode's actions act on: the one chosen if it is still there, else the first live one, else the first. */
export function selectedVmId(state: AppState): string | null {
  const shown = shownVmIds(state);
  if (state.vmId && shown.includes(state.vmId)) return state.vmId;
  return shown.find((id) => LIVE.has(state.engine.vms[id]!.state)) ?? shown[0] ?? null;
}

/** Where the selection goes when `id` leaves `order` (the episode's VMs): the next one, else the one before. */
export function successorOf(order: readonly string[], id: string, stays: (id: string) => boolean): string | null {
  const at = order.indexOf(id);
  const after = order.slice(at + 1).find(stays);
  return after ?? order.slice(0, Math.max(at, 0)).findLast(stays) ?? null;
}

export function openEpisode(store: AppStore, episodeId: string, vmId: string | null = null): void {
  store.setState({ episodeId, vmId, snapshotId: null, treeMark: null });
}

export function closeEpisode(store: AppStore): void {
  store.setState({ episodeId: null, snapshotId: null, treeMark: null });
}

/** Marks a second snapshot on the tree beside the selected one (side by side), or unmarks it when it is marked. */
export function toggleTreeMark(store: AppStore, snapshotId: string | null): void {
  store.setState((s) => ({ treeMark: snapshotId === s.treeMark ? null : snapshotId }));
}

export function selectVm(store: AppStore, vmId: string): void {
  store.setState({ vmId });
}

export function selectSnapshot(store: AppStore, snapshotId: string | null): void {
  store.setState({ snapshotId });
}

export function openDialog(store: AppStore, dialog: Dialog): void {
  store.setState({ dialog, paletteOpen: false });
}

export function closeDialog(store: AppStore): void {
  store.setState({ dialog: null });
}

export function setPaletteOpen(store: AppStore, open: boolean): void {
  store.setState({ paletteOpen: open });
}

/** Opens a collapsed chain of the tree (named by its first snapshot). */
export function expandChain(store: AppStore, episodeId: string, first: string): void {
  store.setState((s) => ({
    expandedChains: { ...s.expandedChains, [episodeId]: [...(s.expandedChains[episodeId] ?? []), first] },
  }));
}

export function setSearch(store: AppStore, search: string): void {
  store.setState({ search });
}

/** Ticks or unticks an episode in the list (for bulk actions). */
export function toggleTicked(store: AppStore, id: string): void {
  store.setState((s) => ({ ticked: s.ticked.includes(id) ? s.ticked.filter((t) => t !== id) : [...s.ticked, id] }));
}

export function setTicked(store: AppStore, ids: string[]): void {
  store.setState({ ticked: ids });
}

export function setHideAutomatic(store: AppStore, hide: boolean): void {
  store.setState({ hideAutomatic: hide });
}

/** Deleting more episodes than this at once asks first; fewer go at once, with one Undo toast for them all. */
export const BULK_CONFIRM = 3;

/** "Delete selected": at once (one Undo for the batch), or after a confirmation when there are many. */
export function deleteTicked(app: { store: AppStore; operations: Operations }, ids: readonly string[]): void {
  if (ids.length > BULK_CONFIRM) openDialog(app.store, { kind: 'confirm-delete', episodeIds: [...ids] });
  else void app.operations.bulk('delete', ids);
}
