// How often the store changes while automatic checkpoints arrive (issue 23, "Measure"): every store update renders
// what selects the part it changed, so a frame's events are one update, and news that changes nothing is none.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Episode, Snapshot, Vm } from '../../../src/api/schema.js';
import type { EventStreamHandlers, Transport } from '../transport/transport.js';
import { applyEvents, connectStore, createAppStore } from './app-store.js';

const T = '2026-12-01T06:00:00.000Z';
const EP = 'ep-aaaaaaaaaa';
const vm = (n: number, over: Partial<Vm> = {}): Vm => ({
  ...{ id: `vm-${String(n).padStart(10, 'a')}`, name: `vm${n}`, episode: EP, state: 'running', snapshot: null },
  ...{ parentVm: null, created: T, runningSince: T, exit: null, cpus: 1, memoryMiB: 16, agent: 'none' as const },
  ...{ ports: [], network: { enabled: false, refused: 0 } },
  ...over,
});
const episode = (vms: Vm[], over: Partial<Episode> = {}): Episode => ({
  ...{ id: EP, name: 'scale', state: 'running', smolfile: { path: '/s/echo.smolfile', text: '' }, created: T },
  ...{ base: null, vms, snapshotCount: 0, diskBytes: 0 },
  ...over,
});
const auto = (n: number, on: Vm): Snapshot => ({
  ...{ id: `sn-${String(n).padStart(10, 'a')}`, episode: EP, parent: null, layerParent: null, vm: on.id },
  ...{ kind: 'auto', name: `auto-${n}`, note: '', created: T, diskBytes: 4096, memoryBytes: 1 << 24, cpus: 1 },
  deleted: false,
});

/** A transport whose events and answers the test hands over: nothing here claims to be the engine. */
function scripted() {
  let handlers!: EventStreamHandlers;
  const answers: { path: string; resolve: (value: unknown) => void }[] = [];
  const transport: Transport = {
    request: <T>(_method: string, path: string) =>
      new Promise<T>((resolve) => answers.push({ path, resolve: (value) => resolve(value as T) })),
    events: (h) => ((handlers = h), () => undefined),
    console: () => ({ write: () => undefined, close: () => undefined }),
  };
  return { transport, answers, handlers: () => handlers };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('the store while checkpoints arrive', () => {
  it('applies a frame’s events, and the episode summary they make it fetch, as one update each frame', async () => {
    vi.useFakeTimers();
    const vms = Array.from({ length: 23 }, (_, i) => vm(i + 1));
    const store = createAppStore();
    applyEvents(store, [{ type: 'episode.created', episode: episode(vms) }]);
    const { transport, answers, handlers } = scripted();
    const frames: (() => void)[] = [];
    connectStore(store, transport, (flush) => (frames.push(() => flush(0)), 0));
    let updates = 0;
    store.subscribe(() => updates++);
    // Five VMs checkpoint themselves within one frame: a snapshot and the VM moved onto it, each.
    for (const [i, on] of vms.slice(0, 5).entries()) {
      const snapshot = auto(i + 1, on);
      handlers().onEvent({ type: 'snapshot.created', snapshot });
      handlers().onEvent({ type: 'vm.updated', vm: { ...on, snapshot: snapshot.id } });
    }
    expect(updates).toBe(0);
    frames.splice(0).forEach((flush) => flush());
    expect(updates).toBe(1);
    // The counts they changed are fetched once for the burst; the answer waits for the next frame too.
    await vi.advanceTimersByTimeAsync(300);
    expect(answers.map((a) => a.path)).toEqual([`/episodes/${EP}`]);
    const moved = store.getState().engine.episodes[EP]!.vmIds.map((id) => store.getState().engine.vms[id]!);
    answers[0]!.resolve(episode(moved, { snapshotCount: 5 }));
    await vi.advanceTimersByTimeAsync(0);
    expect(updates).toBe(1);
    handlers().onEvent({ type: 'snapshot.created', snapshot: auto(6, vms[5]!) });
    frames.splice(0).forEach((flush) => flush());
    expect(updates).toBe(2);
    expect(store.getState().engine.episodes[EP]!.snapshotCount).toBe(6);
  });

  it('keeps every VM’s record as it was when a summary or an event repeats it unchanged', () => {
    const vms = Array.from({ length: 23 }, (_, i) => vm(i + 1));
    const store = createAppStore();
    applyEvents(store, [{ type: 'episode.created', episode: episode(vms) }]);
    const before = store.getState();
    let updates = 0;
    store.subscribe(() => updates++);
    // The same VM again (the engine repeats a record when something it does not show changed): no update at all.
    applyEvents(store, [{ type: 'vm.updated', vm: structuredClone(vms[3]!) }]);
    expect(updates).toBe(0);
    expect(store.getState()).toBe(before);
    // A summary in which one VM moved: that VM is new, the 22 others are the objects the page already drew.
    const summary = structuredClone(vms);
    summary[7] = { ...summary[7]!, snapshot: 'sn-aaaaaaaaa7' };
    applyEvents(store, [{ type: 'episode.updated', episode: episode(summary, { snapshotCount: 1 }) }]);
    const after = store.getState().engine.vms;
    const kept = vms.filter((v) => after[v.id] === before.engine.vms[v.id]).map((v) => v.name);
    expect(kept).toHaveLength(22);
    expect(kept).not.toContain('vm8');
    expect(after[vms[7]!.id]!.snapshot).toBe('sn-aaaaaaaaa7');
    expect(store.getState().ticked).toBe(before.ticked);
  });
});
