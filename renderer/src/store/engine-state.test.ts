// The UI store as a projection of the engine's event stream: events in, state out.
import { describe, expect, it } from 'vitest';
import type { EngineEvent, Episode, Snapshot, Vm } from '../../../src/api/schema.js';
import { applyEvents, connectStore, createAppStore } from './app-store.js';
import {
  applyEvent,
  emptyEngineState,
  episodeSnapshots,
  loadEpisodes,
  loadSnapshots,
  loadRefusals,
  KEPT_REFUSALS,
  type EngineState,
} from './engine-state.js';
import type { EventStreamHandlers, Transport } from '../transport/transport.js';

const T = '2026-12-01T06:00:00.000Z';
const vm = (id: string, over: Partial<Vm> = {}): Vm => ({
  ...{ id, name: id.slice(3, 7), episode: 'ep-aaaaaaaaaa', state: 'running', snapshot: null, parentVm: null },
  ...{ created: T, runningSince: T, exit: null, cpus: 1, memoryMiB: 16, agent: 'none' as const },
  ...{ ports: [], network: { enabled: false, refused: 0 } },
  ...over,
});
const episode = (id: string, vms: Vm[], over: Partial<Episode> = {}): Episode => ({
  ...{ id, name: id.slice(3, 7), state: 'running', smolfile: { path: '/s/echo.smolfile', text: '' }, created: T },
  ...{ base: null, vms, snapshotCount: 0, diskBytes: 0 },
  ...over,
});
const snapshot = (id: string, parent: string | null, over: Partial<Snapshot> = {}): Snapshot => ({
  ...{ id, episode: 'ep-aaaaaaaaaa', parent, layerParent: parent, vm: 'vm-aaaaaaaaaa', kind: 'manual' },
  ...{ name: id.slice(3, 7), note: '', created: T, diskBytes: 4096, memoryBytes: 1 << 24, cpus: 1, deleted: false },
  ...over,
});
const run = (events: EngineEvent[], from: EngineState = emptyEngineState()) => events.reduce(applyEvent, from);

const EP = 'ep-aaaaaaaaaa';
const VM = 'vm-aaaaaaaaaa';

describe('the store fed by engine events', () => {
  it('lists a created episode with its VM, and follows the VM through its states', () => {
    const state = run([
      { type: 'episode.created', episode: episode(EP, [vm(VM, { state: 'creating', runningSince: null })]) },
      { type: 'vm.updated', vm: vm(VM, { state: 'running' }) },
      { type: 'episode.updated', episode: episode(EP, [vm(VM)], { state: 'running' }) },
      { type: 'vm.updated', vm: vm(VM, { state: 'suspended', runningSince: null }) },
    ]);
    expect(state.episodeIds).toEqual([EP]);
    expect(state.episodes[EP]!.vmIds).toEqual([VM]);
    expect(state.vms[VM]!.state).toBe('suspended');
    expect(state.vms[VM]!.runningSince).toBeNull();
  });

  it('adds forked children to their episode and drops a removed VM', () => {
    const kids = ['vm-bbbbbbbbbb', 'vm-cccccccccc', 'vm-dddddddddd'];
    const state = run([
      { type: 'episode.created', episode: episode(EP, [vm(VM)]) },
      ...kids.map((id): EngineEvent => ({ type: 'vm.updated', vm: vm(id, { parentVm: VM }) })),
      { type: 'vm.removed', id: kids[1]!, episode: EP },
    ]);
    expect(state.episodes[EP]!.vmIds).toEqual([VM, kids[0], kids[2]]);
    expect(state.vms[kids[1]!]).toBeUndefined();
  });

  it('treats an episode’s VM list as complete: a VM it no longer names is gone', () => {
    const other = 'vm-eeeeeeeeee';
    const state = run([
      { type: 'episode.created', episode: episode(EP, [vm(VM), vm(other)]) },
      { type: 'episode.updated', episode: episode(EP, [vm(VM)]) },
    ]);
    expect(state.vms[other]).toBeUndefined();
    expect(state.episodes[EP]!.vmIds).toEqual([VM]);
  });

  it('keeps a loaded episode’s timeline in creation order as snapshots arrive, and renames in place', () => {
    const base = snapshot('sn-baseaaaaaa', null, { episode: null, kind: 'base', created: '2026-12-01T05:00:00.000Z' });
    let state = run([{ type: 'episode.created', episode: episode(EP, [vm(VM)], { base: base.id }) }]);
    state = loadSnapshots(state, EP, [base, snapshot('sn-aaaaaaaaaa', base.id)]);
    state = run(
      [
        {
          type: 'snapshot.created',
          snapshot: snapshot('sn-cccccccccc', 'sn-aaaaaaaaaa', { created: '2026-12-01T06:00:02.000Z' }),
        },
        // Arrives late but was taken earlier: it goes before the one above.
        {
          type: 'snapshot.created',
          snapshot: snapshot('sn-bbbbbbbbbb', 'sn-aaaaaaaaaa', { created: '2026-12-01T06:00:01.000Z' }),
        },
        {
          type: 'snapshot.updated',
          snapshot: snapshot('sn-bbbbbbbbbb', 'sn-aaaaaaaaaa', { name: 'renamed', note: 'why' }),
        },
      ],
      state,
    );
    expect(state.timeline[EP]).toEqual(['sn-aaaaaaaaaa', 'sn-bbbbbbbbbb', 'sn-cccccccccc']);
    expect(episodeSnapshots(state, EP).map((s) => s.id)).toEqual([
      base.id,
      'sn-aaaaaaaaaa',
      'sn-bbbbbbbbbb',
      'sn-cccccccccc',
    ]);
    expect(state.snapshots['sn-bbbbbbbbbb']).toMatchObject({ name: 'renamed', note: 'why' });
  });

  it('counts an episode’s snapshots and their bytes as they are taken and deleted, between episode summaries', () => {
    const state = run([
      { type: 'episode.created', episode: episode(EP, [vm(VM)]) },
      { type: 'snapshot.created', snapshot: snapshot('sn-1111111111', null) },
      { type: 'snapshot.created', snapshot: snapshot('sn-2222222222', 'sn-1111111111') },
      { type: 'snapshot.updated', snapshot: snapshot('sn-2222222222', 'sn-1111111111', { note: 'renamed' }) },
      { type: 'snapshot.deleted', id: 'sn-1111111111', episode: EP },
    ]);
    expect(state.episodes[EP]).toMatchObject({ snapshotCount: 1, diskBytes: 8192 });
    // The engine's next summary is the truth again (a deleted layer's files may stay).
    const summarised = run([{ type: 'episode.updated', episode: episode(EP, [vm(VM)], { snapshotCount: 1 }) }], state);
    expect(summarised.episodes[EP]).toMatchObject({ snapshotCount: 1, diskBytes: 0 });
  });

  it('hangs a deleted snapshot’s children from its parent, as the engine lists them', () => {
    let state = run([{ type: 'episode.created', episode: episode(EP, [vm(VM)]) }]);
    state = loadSnapshots(state, EP, [
      snapshot('sn-aaaaaaaaaa', null),
      snapshot('sn-bbbbbbbbbb', 'sn-aaaaaaaaaa'),
      snapshot('sn-cccccccccc', 'sn-bbbbbbbbbb'),
      snapshot('sn-dddddddddd', 'sn-bbbbbbbbbb'),
    ]);
    state = run([{ type: 'snapshot.deleted', id: 'sn-bbbbbbbbbb', episode: EP }], state);
    expect(state.timeline[EP]).toEqual(['sn-aaaaaaaaaa', 'sn-cccccccccc', 'sn-dddddddddd']);
    expect(state.snapshots['sn-cccccccccc']!.parent).toBe('sn-aaaaaaaaaa');
    expect(state.snapshots['sn-dddddddddd']!.parent).toBe('sn-aaaaaaaaaa');
  });

  it('forgets a deleted episode with its VMs, snapshots and progress', () => {
    let state = run([
      { type: 'episode.created', episode: episode(EP, [vm(VM)]) },
      { type: 'progress', operation: 'checkpoint', vm: VM, done: 1, total: 4 },
    ]);
    state = loadSnapshots(state, EP, [snapshot('sn-aaaaaaaaaa', null)]);
    expect(state.progress[VM]).toEqual({ operation: 'checkpoint', done: 1, total: 4 });
    state = run([{ type: 'episode.deleted', id: EP }], state);
    expect(state).toEqual(emptyEngineState());
  });

  it('counts a VM’s refused connections and keeps the last ones once each, merged with a load in seq order', () => {
    const refusal = (seq: number) => ({
      ...{ seq, at: T, destination: '10.0.2.2', port: 9000 + seq, protocol: 'tcp' as const, rule: 'host' as const },
    });
    const refused = (seq: number): EngineEvent => ({
      ...{ type: 'vm.network.refused', vm: VM, episode: EP, refusal: refusal(seq), refused: seq },
    });
    const network = { enabled: true, refused: 0 };
    let state = run([{ type: 'episode.created', episode: episode(EP, [vm(VM, { network })]) }, refused(2), refused(3)]);
    state = run([refused(3)], state);
    expect(state.vms[VM]!.network).toEqual({ enabled: true, refused: 3 });
    expect(state.refusals[VM]!.map((r) => r.seq)).toEqual([2, 3]);
    state = loadRefusals(state, VM, [refusal(1), refusal(2)]);
    expect(state.refusals[VM]!.map((r) => r.seq)).toEqual([1, 2, 3]);
    state = run(
      Array.from({ length: 60 }, (_, i) => refused(4 + i)),
      state,
    );
    expect(state.refusals[VM]).toHaveLength(KEPT_REFUSALS);
    expect(state.refusals[VM]!.at(-1)!.seq).toBe(63);
    expect(run([{ type: 'vm.removed', id: VM, episode: EP }], state).refusals[VM]).toBeUndefined();
  });

  it('shows progress until it completes', () => {
    const state = run([
      { type: 'episode.created', episode: episode(EP, [vm(VM)]) },
      { type: 'progress', operation: 'fork', vm: VM, done: 1, total: 2 },
      { type: 'progress', operation: 'fork', vm: VM, done: 2, total: 2 },
    ]);
    expect(state.progress).toEqual({});
  });

  it('replaces everything on a reload, dropping what the engine no longer has', () => {
    let state = run([
      { type: 'episode.created', episode: episode(EP, [vm(VM)]) },
      {
        type: 'episode.created',
        episode: episode('ep-bbbbbbbbbb', [vm('vm-bbbbbbbbbb', { episode: 'ep-bbbbbbbbbb' })]),
      },
    ]);
    state = loadSnapshots(state, 'ep-bbbbbbbbbb', [snapshot('sn-bbbbbbbbbb', null, { episode: 'ep-bbbbbbbbbb' })]);
    state = loadEpisodes(state, [episode(EP, [vm(VM, { state: 'paused' })])]);
    expect(state.episodeIds).toEqual([EP]);
    expect(Object.keys(state.vms)).toEqual([VM]);
    expect(state.vms[VM]!.state).toBe('paused');
    expect(state.snapshots).toEqual({});
    expect(state.timeline).toEqual({});
  });
});

describe('the store connected to a transport', () => {
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

  it('applies events that arrive while the reload is in flight after it, so the reload cannot undo them', async () => {
    const store = createAppStore();
    const { transport, answers, handlers } = scripted();
    const frames: (() => void)[] = [];
    connectStore(store, transport, (flush) => (frames.push(() => flush(0)), 0));
    handlers().onState('open');
    expect(store.getState().connection.state).toBe('open');
    expect(answers.map((a) => a.path)).toEqual(['/episodes']);
    // The engine answered the list before this VM stopped; the event comes while the answer travels.
    handlers().onEvent({ type: 'vm.updated', vm: vm(VM, { state: 'stopped', runningSince: null }) });
    frames.splice(0).forEach((flush) => flush());
    expect(store.getState().engine.vms).toEqual({});
    answers[0]!.resolve({ episodes: [episode(EP, [vm(VM)])] });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(store.getState().engine.vms[VM]!.state).toBe('stopped');
  });

  it('closes what was open when its episode goes away', () => {
    const store = createAppStore();
    applyEvents(store, [{ type: 'episode.created', episode: episode(EP, [vm(VM)]) }]);
    store.setState({ episodeId: EP, vmId: VM, ticked: [EP] });
    applyEvents(store, [{ type: 'episode.deleted', id: EP }]);
    expect(store.getState()).toMatchObject({ episodeId: null, vmId: null, ticked: [] });
  });
});
