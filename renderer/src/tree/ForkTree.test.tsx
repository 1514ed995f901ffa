// @vitest-environment happy-dom
// The fork tree as a person reads it: a node per snapshot, the VMs that are on each ("you are here"), long chains
// collapsed into one node that opens on click.
import { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Snapshot, Vm } from '../../../src/api/schema.js';
import { AppContext } from '../app-context.js';
import { applyEvents, createAppStore } from '../store/app-store.js';
import { loadSnapshots } from '../store/engine-state.js';
import { MetricsStore } from '../store/metrics.js';
import { Operations } from '../store/operations.js';
import type { Transport } from '../transport/transport.js';
import { ForkTree } from './ForkTree.js';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const EP = 'ep-aaaaaaaaaa';
const T = '2026-12-01T06:00:00.000Z';
const snap = (n: number, parent: number | null, kind: Snapshot['kind'] = 'manual'): Snapshot => ({
  ...{
    id: `sn-${String(n).padStart(10, 'a')}`,
    episode: EP,
    parent: parent === null ? null : `sn-${String(parent).padStart(10, 'a')}`,
  },
  ...{ layerParent: null, vm: null, kind, name: `s${n}`, note: '', created: T, diskBytes: 0 },
  ...{ memoryBytes: 0, cpus: 1, deleted: false },
});
const vm = (id: string, name: string, at: number, state: Vm['state'] = 'running'): Vm => ({
  ...{ id, name, episode: EP, state, snapshot: snap(at, null).id, parentVm: null, created: T, runningSince: T },
  ...{ exit: null, cpus: 1, memoryMiB: 16, agent: 'none' as const },
  ...{ ports: [], network: { enabled: false, refused: 0 } },
});
const noEngine: Transport = {
  request: () => Promise.reject(new Error('no engine in this test')),
  events: () => () => undefined,
  console: () => ({ write: () => undefined, close: () => undefined }),
};

// happy-dom does no layout: React Flow and the tree's fit read sizes from offsetWidth/offsetHeight and
// getBoundingClientRect, so they are given here as a browser would measure them: the 1000×600 pane below, 184×58
// cards, 1×1 handles.
function sizeOf(element: HTMLElement): { width: number; height: number } {
  if (element.classList.contains('react-flow__node')) return { width: 184, height: 58 };
  if (element.classList.contains('react-flow__handle')) return { width: 1, height: 1 };
  return { width: 1000, height: 600 };
}
const saved = (['offsetWidth', 'offsetHeight'] as const).map(
  (key) => [key, Object.getOwnPropertyDescriptor(HTMLElement.prototype, key)] as const,
);
const savedRect = HTMLElement.prototype.getBoundingClientRect;
beforeAll(() => {
  HTMLElement.prototype.getBoundingClientRect = function (this: HTMLElement) {
    const { width, height } = sizeOf(this);
    return { x: 0, y: 0, top: 0, left: 0, width, height, right: width, bottom: height } as DOMRect;
  };
  for (const [key] of saved) {
    Object.defineProperty(HTMLElement.prototype, key, {
      configurable: true,
      get(this: HTMLElement) {
        return key === 'offsetWidth' ? sizeOf(this).width : sizeOf(this).height;
      },
    });
  }
});
afterAll(() => {
  HTMLElement.prototype.getBoundingClientRect = savedRect;
  for (const [key, descriptor] of saved) if (descriptor) Object.defineProperty(HTMLElement.prototype, key, descriptor);
});

let root: Root | null = null;
afterEach(() => {
  act(() => root?.unmount());
  document.body.innerHTML = '';
});

describe('the fork tree', () => {
  it('shows each snapshot, where each live VM is, and a long chain as one node that opens on click', async () => {
    const store = createAppStore();
    const vms = [
      vm('vm-aaaaaaaaaa', 'main', 9),
      vm('vm-bbbbbbbbbb', 'child', 11),
      vm('vm-cccccccccc', 'gone', 12, 'stopped'),
    ];
    applyEvents(store, [
      {
        type: 'episode.created',
        episode: {
          ...{ id: EP, name: 'demo', state: 'running', smolfile: { path: '/s', text: '' }, created: T, base: null },
          ...{ vms, snapshotCount: 13, diskBytes: 0 },
        },
      },
    ]);
    // s0 → s1 … s9 (a chain of automatic checkpoints but s9), s9 forks into s10 and s11; s12 hangs off s10.
    const snapshots = [
      snap(0, null),
      ...Array.from({ length: 9 }, (_, i) => snap(i + 1, i, i + 1 < 9 ? 'auto' : 'manual')),
      snap(10, 9),
      snap(11, 9),
      snap(12, 10),
    ];
    store.setState((s) => ({ engine: loadSnapshots(s.engine, EP, snapshots) }));
    const container = document.createElement('div');
    container.style.width = '1000px';
    container.style.height = '600px';
    document.body.append(container);
    root = createRoot(container);
    const app = {
      store,
      transport: noEngine,
      operations: new Operations(store, noEngine),
      metrics: new MetricsStore(),
    };
    await act(async () =>
      root!.render(
        <AppContext.Provider value={app}>
          <ForkTree episodeId={EP} />
        </AppContext.Provider>,
      ),
    );
    const items = () =>
      [...container.querySelectorAll('[role=treeitem]')].map((item) => item.getAttribute('aria-label'));
    expect(items()).toEqual([
      'Snapshot s0',
      '8 snapshots from s1 to s8, collapsed',
      'Snapshot s9, here: main',
      'Snapshot s10',
      'Snapshot s12',
      'Snapshot s11, here: child',
    ]);
    const chain = container.querySelector<HTMLElement>('[aria-label$="collapsed"]')!;
    await act(async () => chain.closest<HTMLElement>('.react-flow__node')!.click());
    // The tree re-fits to its new size (after a moment, with a short animation): then every card is in view.
    await act(async () => new Promise((resolve) => setTimeout(resolve, 500)));
    // Thirteen cards laid out (the overview draws them all); too wide to read whole, the pane shows those around
    // the selected VM, each snapshot on its own card.
    expect(container.querySelectorAll('.react-flow__minimap-node')).toHaveLength(13);
    expect(items()).toContain('Snapshot s8');
    expect(items().some((label) => label?.endsWith('collapsed'))).toBe(false);
    expect(store.getState().expandedChains[EP]).toEqual(['sn-aaaaaaaaa1']);
  });
});
