// What the actions send and when, through a transport that records requests (the engine itself is tested end to
// end in e2e/ and tests/engine/).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Transport } from '../transport/transport.js';
import { TransportError } from '../transport/transport.js';
import { applyEvents, createAppStore } from './app-store.js';
import { Operations, UNDO_MS } from './operations.js';

const T = '2026-12-01T06:00:00.000Z';

function recorder(fail: (path: string) => string | null = () => null) {
  const sent: string[] = [];
  const transport: Transport = {
    request: async <T>(method: string, path: string) => {
      sent.push(`${method} ${path}`);
      const failure = fail(path);
      if (failure) throw new TransportError(409, failure);
      return undefined as T;
    },
    events: () => () => undefined,
    console: () => ({ write: () => undefined, close: () => undefined }),
  };
  return { transport, sent };
}

function setup(fail?: (path: string) => string | null) {
  const store = createAppStore();
  const { transport, sent } = recorder(fail);
  applyEvents(store, [
    {
      type: 'episode.created',
      episode: {
        ...{ id: 'ep-aaaaaaaaaa', name: 'demo', state: 'running', smolfile: { path: '/s', text: '' }, created: T },
        ...{ base: null, snapshotCount: 0, diskBytes: 0, vms: [] },
      },
    },
  ]);
  return { store, sent, operations: new Operations(store, transport) };
}

describe('deleting with an undo toast', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('hides the thing at once and sends the DELETE only when the toast expires', async () => {
    const { store, sent, operations } = setup();
    store.setState({ episodeId: 'ep-aaaaaaaaaa' });
    operations.deleteEpisode('ep-aaaaaaaaaa');
    expect(store.getState().pendingDeletes).toEqual(['ep-aaaaaaaaaa']);
    expect(store.getState().episodeId).toBeNull(); // its view closed
    expect(store.getState().toasts.map((t) => [t.text, t.action?.label])).toEqual([['Episode demo deleted', 'Undo']]);
    await vi.advanceTimersByTimeAsync(UNDO_MS - 1);
    expect(sent).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toEqual(['DELETE /episodes/ep-aaaaaaaaaa?force=true']);
    expect(store.getState().pendingDeletes).toEqual([]);
  });

  it('sends nothing after Undo, and shows the thing again', async () => {
    const { store, sent, operations } = setup();
    operations.deleteSnapshot('sn-aaaaaaaaaa');
    store.getState().toasts[0]!.action!.run();
    expect(store.getState().pendingDeletes).toEqual([]);
    await vi.advanceTimersByTimeAsync(UNDO_MS * 2);
    expect(sent).toEqual([]);
  });

  it('brings the thing back and says why when the engine refuses the delete', async () => {
    const { store, sent, operations } = setup(() => 'sn-aaaaaaaaaa is a base snapshot; delete its episodes');
    operations.deleteSnapshot('sn-aaaaaaaaaa');
    await vi.advanceTimersByTimeAsync(UNDO_MS);
    expect(sent).toEqual(['DELETE /snapshots/sn-aaaaaaaaaa']);
    expect(store.getState().pendingDeletes).toEqual([]);
    const error = store.getState().toasts.find((t) => t.kind === 'error');
    expect(error?.text).toBe('Deleting failed: sn-aaaaaaaaaa is a base snapshot; delete its episodes');
    expect(error?.expires).toBeNull(); // an error stays until dismissed
  });
});

describe('actions show their progress and failure where they happen', () => {
  it('marks the VM busy while it checkpoints and keeps the failure on it', async () => {
    const { store, operations } = setup((path) => (path.endsWith('/checkpoint') ? 'vm-aaaaaaaaaa is suspended' : null));
    const running = operations.checkpoint('vm-aaaaaaaaaa', 'step-1', 'a note');
    expect(store.getState().busy['vm:vm-aaaaaaaaaa']).toBe('Checkpointing…');
    expect(await running).toBeUndefined();
    expect(store.getState().busy).toEqual({});
    expect(store.getState().failures['vm:vm-aaaaaaaaaa']).toBe('vm-aaaaaaaaaa is suspended');
  });

  it('checkpoints before a restore when asked, and does not restore when that fails', async () => {
    const { sent, operations } = setup((path) => (path.endsWith('/checkpoint') ? 'disk full' : null));
    await operations.restore('vm-aaaaaaaaaa', 'sn-aaaaaaaaaa', { name: 'pre' });
    expect(sent).toEqual(['POST /vms/vm-aaaaaaaaaa/checkpoint']);
  });
});
