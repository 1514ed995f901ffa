// @vitest-environment happy-dom
// The episodes list as a person uses it: rows from the store, search, ticking for bulk actions, live updates.
import { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterEach, describe, expect, it } from 'vitest';
import type { Episode, Vm } from '../../../src/api/schema.js';
import { AppContext } from '../app-context.js';
import { applyEvents, createAppStore, type AppStore } from '../store/app-store.js';
import { MetricsStore } from '../store/metrics.js';
import { Operations } from '../store/operations.js';
import type { Transport } from '../transport/transport.js';
import { EpisodeList } from './EpisodeList.js';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const T = '2026-12-01T06:00:00.000Z';
const vm = (id: string, episode: string, state: Vm['state'] = 'running'): Vm => ({
  ...{ id, name: `${episode.slice(3, 6)}-vm`, episode, state, snapshot: null, parentVm: null, created: T },
  ...{ runningSince: state === 'running' ? T : null, exit: null, cpus: 1, memoryMiB: 16, agent: 'none' as const },
  ...{ ports: [], network: { enabled: false, refused: 0 } },
});
const episode = (id: string, name: string, vms: Vm[], over: Partial<Episode> = {}): Episode => ({
  ...{ id, name, state: 'running', smolfile: { path: `/s/${name}.smolfile`, text: '' }, created: T, base: null },
  ...{ vms, snapshotCount: 3, diskBytes: 5 << 20 },
  ...over,
});

const noEngine: Transport = {
  request: () => Promise.reject(new Error('no engine in this test')),
  events: () => () => undefined,
  console: () => ({ write: () => undefined, close: () => undefined }),
};

let root: Root | null = null;
afterEach(() => {
  act(() => root?.unmount());
  root = null;
  document.body.innerHTML = '';
});

function render(store: AppStore) {
  const container = document.createElement('div');
  document.body.append(container);
  root = createRoot(container);
  const app = { store, transport: noEngine, operations: new Operations(store, noEngine), metrics: new MetricsStore() };
  act(() =>
    root!.render(
      <AppContext.Provider value={app}>
        <EpisodeList />
      </AppContext.Provider>,
    ),
  );
  return container;
}

const rows = (container: HTMLElement) =>
  [...container.querySelectorAll('tbody tr')].map((row) => row.querySelector('button')?.textContent);

function type(input: HTMLInputElement, text: string) {
  const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value')!.set!;
  act(() => {
    setter.call(input, text);
    input.dispatchEvent(new Event('input', { bubbles: true }));
  });
}

describe('the episodes list', () => {
  it('shows each episode, newest first, with its state, VMs and snapshot count, and follows events', () => {
    const store = createAppStore();
    applyEvents(store, [
      { type: 'episode.created', episode: episode('ep-aaaaaaaaaa', 'first', [vm('vm-aaaaaaaaaa', 'ep-aaaaaaaaaa')]) },
      { type: 'episode.created', episode: episode('ep-bbbbbbbbbb', 'second', [], { state: 'empty' }) },
    ]);
    const container = render(store);
    expect(rows(container)).toEqual(['second', 'first']);
    const first = container.querySelectorAll('tbody tr')[1]!;
    expect(first.textContent).toContain('running');
    expect(first.querySelectorAll('td.num')[0]!.textContent).toBe('1'); // VMs
    act(() => applyEvents(store, [{ type: 'vm.updated', vm: vm('vm-aaaaaaaaaa', 'ep-aaaaaaaaaa', 'suspended') }]));
    act(() =>
      applyEvents(store, [
        {
          type: 'episode.updated',
          episode: episode('ep-aaaaaaaaaa', 'first', [vm('vm-aaaaaaaaaa', 'ep-aaaaaaaaaa', 'suspended')], {
            state: 'suspended',
          }),
        },
      ]),
    );
    expect(container.querySelectorAll('tbody tr')[1]!.textContent).toContain('suspended');
    act(() => applyEvents(store, [{ type: 'episode.deleted', id: 'ep-bbbbbbbbbb' }]));
    expect(rows(container)).toEqual(['first']);
  });

  it('filters by what is typed in the search, and ticks rows for the bulk actions', () => {
    const store = createAppStore();
    store.setState({ connection: { state: 'open', why: null } }); // the bulk actions wait for the engine
    applyEvents(store, [
      { type: 'episode.created', episode: episode('ep-aaaaaaaaaa', 'alpha', []) },
      { type: 'episode.created', episode: episode('ep-bbbbbbbbbb', 'beta', []) },
    ]);
    const container = render(store);
    const bulk = () => container.querySelector<HTMLButtonElement>('button.danger')!;
    expect(bulk().disabled).toBe(true);
    type(container.querySelector<HTMLInputElement>('input[type=search]')!, 'alp');
    expect(rows(container)).toEqual(['alpha']);
    act(() => container.querySelector<HTMLInputElement>('tbody input[type=checkbox]')!.click());
    expect(store.getState().ticked).toEqual(['ep-aaaaaaaaaa']);
    expect(bulk().disabled).toBe(false);
    expect(container.textContent).toContain('1 selected');
  });

  it('says there is nothing yet when the engine has no episode', () => {
    const store = createAppStore();
    store.setState({ connection: { state: 'open', why: null } });
    const container = render(store);
    expect(container.querySelector('h2')?.textContent).toBe('No episodes yet');
    expect(container.textContent).toContain('smol up -f smolfiles/echo.smolfile');
  });
});
