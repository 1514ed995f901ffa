// What each side of the compare view is (a VM, a snapshot, or what is wrong with what the address names), and
// whether the diff API takes the pair (docs/diff.md: two snapshots of one episode; a running VM is not a point yet).
// Plain functions of the store's engine state, so they are tested without a page.
import type { Snapshot, Vm } from '../../../src/api/schema.js';
import type { EngineState } from '../store/engine-state.js';

const VM_ID = /^vm-[a-z2-7]{10}$/;
const SNAPSHOT_ID = /^sn-[a-z2-7]{10}$/;

export type Side =
  | { kind: 'vm'; id: string; vm: Vm }
  | { kind: 'snapshot'; id: string; snapshot: Snapshot }
  /** An id the store does not hold (yet): a snapshot of an episode not opened, or the list still loading. */
  | { kind: 'loading'; id: string }
  | { kind: 'empty' }
  | { kind: 'problem'; text: string; message: string };

/**
 * `missing`: snapshot ids the engine answered 404 for (or another failure, with its message), so they say so
 * instead of loading for ever.
 */
export function sideOf(engine: EngineState, text: string | null, missing: Readonly<Record<string, string>>): Side {
  if (text === null) return { kind: 'empty' };
  if (VM_ID.test(text)) {
    const vm = engine.vms[text];
    if (vm && vm.state !== 'destroyed') return { kind: 'vm', id: text, vm };
    if (text in missing) return { kind: 'problem', text, message: missing[text]! };
    return { kind: 'loading', id: text };
  }
  if (SNAPSHOT_ID.test(text)) {
    const snapshot = engine.snapshots[text];
    if (snapshot) return { kind: 'snapshot', id: text, snapshot };
    if (text in missing) return { kind: 'problem', text, message: missing[text]! };
    return { kind: 'loading', id: text };
  }
  return {
    kind: 'problem',
    text,
    message: `“${text.slice(0, 80)}” is not a VM or snapshot id: the address takes ids such as vm-abcdefgh23 or sn-abcdefgh23.`,
  };
}

/** The episode a side belongs to (a base snapshot: none), for its heading and the diff's rule. */
export const episodeOf = (side: Side): string | null =>
  side.kind === 'vm' ? side.vm.episode : side.kind === 'snapshot' ? side.snapshot.episode : null;

export type DiffPair = { ok: true; from: Snapshot; to: Snapshot } | { ok: false; why: string };

/** Whether "Diff these" can ask the engine for the pair: two snapshots of one episode, the older one first. */
export function diffPair(a: Side, b: Side): DiffPair {
  if (a.kind === 'vm' || b.kind === 'vm') {
    return {
      ok: false,
      why: 'The diff compares two snapshots: a VM is not a point of it yet (docs/diff.md). Checkpoint the VM, then compare the checkpoint.',
    };
  }
  if (a.kind !== 'snapshot' || b.kind !== 'snapshot') return { ok: false, why: 'Two snapshots are needed for a diff.' };
  if (a.id === b.id) return { ok: false, why: 'Both sides are the same snapshot: nothing to diff.' };
  if (a.snapshot.episode !== b.snapshot.episode) {
    return { ok: false, why: 'The diff compares two snapshots of one episode; these are of two episodes.' };
  }
  const [from, to] = a.snapshot.created <= b.snapshot.created ? [a.snapshot, b.snapshot] : [b.snapshot, a.snapshot];
  return { ok: true, from, to };
}

/** The VM of an episode that stands for it when two episodes are compared from the list: a live one, else the first. */
export function episodeVm(engine: EngineState, episodeId: string): string | null {
  const ids = engine.episodes[episodeId]?.vmIds ?? [];
  const live = ids.find((id) => ['running', 'paused'].includes(engine.vms[id]?.state ?? ''));
  return live ?? ids[0] ?? null;
}
