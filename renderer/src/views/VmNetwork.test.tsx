// @vitest-environment happy-dom
// A networked VM's ports and refusals in its toolbar: a web port is a link (opened through the desktop bridge in the
// app), another port is text, the refused count follows events, and a VM without a network shows nothing.
import { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterEach, describe, expect, it } from 'vitest';
import type { SmolBridge } from '../../../electron/preload/bridge-types.js';
import type { Episode, Vm } from '../../../src/api/schema.js';
import { AppContext } from '../app-context.js';
import { applyEvents, createAppStore, type AppStore } from '../store/app-store.js';
import { MetricsStore } from '../store/metrics.js';
import { Operations } from '../store/operations.js';
import type { Transport } from '../transport/transport.js';
import { VmNetwork } from './VmNetwork.js';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const T = '2026-12-01T06:00:00.000Z';
const EP = 'ep-aaaaaaaaaa';
const VM = 'vm-aaaaaaaaaa';
const vm = (over: Partial<Vm> = {}): Vm => ({
  ...{ id: VM, name: 'web', episode: EP, state: 'running', snapshot: null, parentVm: null, created: T },
  ...{ runningSince: T, exit: null, cpus: 1, memoryMiB: 16, agent: 'none' as const },
  ports: [
    { host: 41235, guest: 80, url: 'http://127.0.0.1:41235/' },
    { host: 41236, guest: 22 },
  ],
  network: { enabled: true, refused: 0 },
  ...over,
});
const episode = (vms: Vm[]): Episode => ({
  ...{ id: EP, name: 'net', state: 'running', smolfile: { path: '/s/net.smolfile', text: '' }, created: T },
  ...{ base: null, vms, snapshotCount: 0, diskBytes: 0 },
});
/** The engine's answer to GET /vms/:vm/network, for the list of refusals. */
const refusal = { seq: 1, at: T, destination: '10.0.2.2', port: 9090, protocol: 'tcp' as const, rule: 'host' as const };
const transport: Transport = {
  request: async <R,>() =>
    ({ vm: VM, enabled: true, ports: [], refused: 1, rules: {}, frames: null, sockets: null, events: [refusal] }) as R,
  events: () => () => undefined,
  console: () => ({ write: () => undefined, close: () => undefined }),
};

let root: Root | null = null;
afterEach(() => {
  act(() => root?.unmount());
  root = null;
  document.body.innerHTML = '';
  delete (window as { smolBridge?: unknown }).smolBridge;
});

function render(store: AppStore) {
  const container = document.createElement('div');
  document.body.append(container);
  root = createRoot(container);
  const app = { store, transport, operations: new Operations(store, transport), metrics: new MetricsStore() };
  act(() =>
    root!.render(
      <AppContext.Provider value={app}>
        <VmNetwork vmId={VM} />
      </AppContext.Provider>,
    ),
  );
  return container;
}

describe('a VM’s network in its toolbar', () => {
  it('links the web port, shows the other as text, and counts refusals as they arrive', async () => {
    const store = createAppStore();
    applyEvents(store, [{ type: 'episode.created', episode: episode([vm()]) }]);
    const container = render(store);
    const links = [...container.querySelectorAll('a')];
    expect(links.map((a) => [a.textContent, a.getAttribute('href'), a.target])).toEqual([
      ['80 → 127.0.0.1:41235 ↗', 'http://127.0.0.1:41235/', '_blank'],
    ]);
    expect(container.textContent).toContain('22 → 127.0.0.1:41236');
    const badge = container.querySelector<HTMLButtonElement>('button.refused-badge')!;
    expect(badge.textContent).toBe('0 refused');
    act(() =>
      applyEvents(store, [
        { type: 'vm.network.refused', vm: VM, episode: EP, refusal: { ...refusal, seq: 2 }, refused: 2 },
      ]),
    );
    expect(badge.textContent).toBe('2 refused');
    await act(async () => badge.click());
    const rows = [...container.querySelectorAll('.refusals tbody tr')].map((row) => row.textContent);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain('10.0.2.2:9090');
  });

  it('opens a port link through the desktop bridge in the app', () => {
    const opened: string[] = [];
    (window as { smolBridge?: Partial<SmolBridge> }).smolBridge = {
      request: async () => ({ ok: true, status: 200, body: null }) as never,
      openExternal: (url) => opened.push(url),
    };
    const store = createAppStore();
    applyEvents(store, [{ type: 'episode.created', episode: episode([vm()]) }]);
    const container = render(store);
    const link = container.querySelector('a')!;
    const click = new MouseEvent('click', { bubbles: true, cancelable: true });
    act(() => void link.dispatchEvent(click));
    expect(opened).toEqual(['http://127.0.0.1:41235/']);
    expect(click.defaultPrevented).toBe(true);
  });

  it('shows nothing for a VM without a network', () => {
    const store = createAppStore();
    applyEvents(store, [
      { type: 'episode.created', episode: episode([vm({ ports: [], network: { enabled: false, refused: 0 } })]) },
    ]);
    expect(render(store).textContent).toBe('');
  });
});
