// @vitest-environment happy-dom
// The renderer's half of Export… and Open machine… (the engine's half is e2e/ui-machine.test.ts, against a real
// engine): the export path prefilled from the engine's data dir, the desktop bridge's save dialog behind Choose…,
// the progress bar fed by 'pack' progress events, the toast with path and size; a dropped .smolmachine read at once
// with the bridge's path in the app, its manifest (and the CPU features this host lacks) shown before Open, and asking for the path in web mode. The bridge is faked here only.
import { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterEach, describe, expect, it } from 'vitest';
import type { SmolBridge } from '../../../electron/preload/bridge-types.js';
import type { Episode, Vm } from '../../../src/api/schema.js';
import { AppContext } from '../app-context.js';
import { installMachineDrop } from '../machine-drop.js';
import { applyEvents, createAppStore } from '../store/app-store.js';
import { MetricsStore } from '../store/metrics.js';
import { Operations } from '../store/operations.js';
import { openDialog } from '../store/selection.js';
import type { Transport } from '../transport/transport.js';
import { Dialogs } from './Dialogs.js';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const T = '2026-12-01T06:00:00.000Z';
const EP = 'ep-aaaaaaaaaa';
const VM = 'vm-aaaaaaaaaa';
const vm: Vm = {
  ...{ id: VM, name: 'main', episode: EP, state: 'running', snapshot: null, parentVm: null, created: T },
  ...{ runningSince: T, exit: null, cpus: 1, memoryMiB: 16, agent: 'none' as const, ports: [] },
  network: { enabled: false, refused: 0 },
};
const episode: Episode = {
  ...{ id: EP, name: 'counter', state: 'running', smolfile: { path: '/s/count.smolfile', text: '' }, created: T },
  ...{ base: null, vms: [vm], snapshotCount: 0, diskBytes: 0 },
};

/** The requests the page made, and a way to answer each one when the test says so. */
function recordingTransport() {
  const requests: { method: string; path: string; body: unknown; answer(value: unknown): void }[] = [];
  const transport: Transport = {
    request: <R,>(method: string, path: string, body?: unknown) =>
      new Promise<R>((resolve) => requests.push({ method, path, body, answer: (value) => resolve(value as R) })),
    events: () => () => undefined,
    console: () => ({ write: () => undefined, close: () => undefined }),
  };
  return { transport, requests };
}

let root: Root | null = null;
afterEach(() => {
  act(() => root?.unmount());
  root = null;
  document.body.innerHTML = '';
  delete (window as { smolBridge?: unknown }).smolBridge;
});

function render(transport: Transport) {
  const store = createAppStore();
  store.setState({ connection: { state: 'open', why: null } });
  applyEvents(store, [{ type: 'episode.created', episode }]);
  const container = document.createElement('div');
  document.body.append(container);
  root = createRoot(container);
  const app = { store, transport, operations: new Operations(store, transport), metrics: new MetricsStore() };
  act(() =>
    root!.render(
      <AppContext.Provider value={app}>
        <Dialogs />
      </AppContext.Provider>,
    ),
  );
  return store;
}

const flush = () => act(async () => await new Promise((resolve) => setTimeout(resolve, 0)));
const byLabel = <T extends Element>(label: string) => document.querySelector<T & Element>(`[aria-label="${label}"]`);
const button = (text: string) => [...document.querySelectorAll('button')].find((b) => b.textContent === text);

function type(input: HTMLInputElement, value: string) {
  const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value')!.set!;
  act(() => {
    setter.call(input, value);
    input.dispatchEvent(new Event('input', { bubbles: true }));
  });
}

function dropFile(name: string) {
  const file = new File(['x'], name);
  const event = Object.assign(new Event('drop', { cancelable: true }), {
    dataTransfer: { types: ['Files'], files: [file] },
  });
  act(() => void window.dispatchEvent(event));
  return { file, event };
}

/** What the engine's inspectMachine answers for a packed two-vCPU guest with a root disk layer. */
function inspected(path: string, missing: string[]) {
  return {
    ...{ path, bytes: 5 << 20, format: 2, layers: 2, memoryData: 60 << 10, raw: 9 << 20, stored: 5 << 20, chunks: 4 },
    made: { smol: '0.1.0', host: 'build-7', platform: 'Linux 6.1.0 x86_64', at: T, from: 'main' },
    snapshot: { id: 'sn-aaaaaaaaaa', name: 'checkpoint-1', kind: 'manual', created: T, cpus: 2, memoryBytes: 16 << 20 },
    boot: [],
    disks: [{ kind: 'layer', name: 'sn-aaaaaaaaaa-root.layer', bytes: 4 << 20 }],
    console: true,
    cpu: { vendor: 'GenuineIntel', model: 'Xeon', features: 90, missing },
    smolfile: { name: 'work.smolfile', text: 'image = "debian"\n' },
  };
}

describe('Export…', () => {
  it('prefills <data dir>/exports/<episode>-<vm>.smolmachine from the engine’s health', async () => {
    const { transport, requests } = recordingTransport();
    const store = render(transport);
    act(() => openDialog(store, { kind: 'export', source: { vmId: VM } }));
    expect(requests.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /health']);
    requests[0]!.answer({ version: '0', pid: 1, home: '/data/smol', started: T });
    await flush();
    expect(byLabel<HTMLInputElement>('Machine file path')!.value).toBe('/data/smol/exports/counter-main.smolmachine');
    expect(button('Choose…')).toBeUndefined(); // web mode: no native dialog
  });

  it('in the app, Choose… asks the bridge’s save dialog, starting at the default path', async () => {
    const asked: string[] = [];
    (window as { smolBridge?: Partial<SmolBridge> }).smolBridge = {
      request: async () => ({ ok: true, value: null }),
      chooseSavePath: async (defaultPath) => (asked.push(defaultPath), '/home/me/picked.smolmachine'),
    };
    const { transport, requests } = recordingTransport();
    const store = render(transport);
    act(() => openDialog(store, { kind: 'export', source: { vmId: VM } }));
    requests[0]!.answer({ version: '0', pid: 1, home: '/data/smol', started: T });
    await flush();
    act(() => button('Choose…')!.click());
    await flush();
    expect(asked).toEqual(['/data/smol/exports/counter-main.smolmachine']);
    expect(byLabel<HTMLInputElement>('Machine file path')!.value).toBe('/home/me/picked.smolmachine');
  });

  it('shows the pack’s progress events, then a toast with the path and size', async () => {
    const { transport, requests } = recordingTransport();
    const store = render(transport);
    act(() => openDialog(store, { kind: 'export', source: { vmId: VM } }));
    requests[0]!.answer({ version: '0', pid: 1, home: '/data/smol', started: T });
    await flush();
    type(byLabel<HTMLInputElement>('Machine file path')!, '/tmp/out/m.smolmachine');
    act(() => button('Export')!.click());
    expect(requests[1]).toMatchObject({
      method: 'POST',
      path: '/machines/pack',
      body: { source: VM, path: '/tmp/out/m.smolmachine' },
    });
    act(() => applyEvents(store, [{ type: 'progress', operation: 'pack', vm: VM, done: 30, total: 120 }]));
    const bar = byLabel<HTMLProgressElement>('Export progress')!;
    expect([bar.value, bar.max]).toEqual([30, 120]);
    expect(document.querySelector('.machine-progress')!.textContent).toContain('25%');
    const snapshot = { id: 'sn-aaaaaaaaaa', name: 'checkpoint-1', note: 'packed' };
    requests[1]!.answer({ path: '/tmp/out/m.smolmachine', bytes: 3 << 20, snapshot, memoryData: 1, layers: 1 });
    await flush();
    expect(store.getState().dialog).toBeNull();
    expect(store.getState().toasts.at(-1)!.text).toBe('Exported to /tmp/out/m.smolmachine (3.0 MiB)');
  });
});

describe('a .smolmachine dropped on the window', () => {
  it('shows the manifest at once in the app, with the path the bridge gives; Open starts it and selects it', async () => {
    const paths = new Map<File, string>();
    const bridge = { pathForFile: (file: File) => paths.get(file) ?? '' } as SmolBridge;
    const { transport, requests } = recordingTransport();
    const store = render(transport);
    const stop = installMachineDrop(store, window, bridge);
    const file = new File(['x'], 'work.smolmachine');
    paths.set(file, '/home/me/work.smolmachine');
    const event = Object.assign(new Event('drop', { cancelable: true }), {
      dataTransfer: { types: ['Files'], files: [file] },
    });
    act(() => void window.dispatchEvent(event));
    expect(event.defaultPrevented).toBe(true);
    await flush();
    // The engine reads the file first (nothing is opened yet); its manifest shows, then Open opens it.
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({
      method: 'POST',
      path: '/machines/inspect',
      body: { path: '/home/me/work.smolmachine' },
    });
    expect(byLabel<HTMLInputElement>('Machine file to open')!.value).toBe('/home/me/work.smolmachine');
    requests[0]!.answer(inspected('/home/me/work.smolmachine', []));
    await flush();
    const manifest = byLabel<HTMLElement>('Machine manifest')!.textContent!;
    expect(manifest).toContain('smol 0.1.0 on build-7 (Linux 6.1.0 x86_64)');
    expect(manifest).toContain('16 MiB, 60 KiB of it in the file');
    expect(manifest).toContain('vCPUs2');
    expect(manifest).toContain('layer sn-aaaaaaaaaa-root.layer (4.0 MiB)');
    expect(byLabel('Missing CPU features')).toBeNull();
    act(() => button('Open')!.click());
    await flush();
    expect(requests[1]).toMatchObject({
      method: 'POST',
      path: '/machines',
      body: { path: '/home/me/work.smolmachine' },
    });
    act(() => applyEvents(store, [{ type: 'progress', operation: 'open', vm: null, done: 5, total: 10 }]));
    expect(byLabel<HTMLProgressElement>('Open progress')!.value).toBe(5);
    const opened = { ...episode, id: 'ep-bbbbbbbbbb', name: 'work', vms: [{ ...vm, id: 'vm-bbbbbbbbbb' }] };
    act(() => applyEvents(store, [{ type: 'episode.created', episode: opened }]));
    requests[1]!.answer({ episode: opened, vm: opened.vms[0] });
    await flush();
    expect(store.getState()).toMatchObject({ dialog: null, episodeId: 'ep-bbbbbbbbbb', vmId: 'vm-bbbbbbbbbb' });
    stop();
  });

  it('names the CPU features this host lacks and does not offer to open the file', async () => {
    const { transport, requests } = recordingTransport();
    const store = render(transport);
    const stop = installMachineDrop(store, window, {
      pathForFile: () => '/x/avx.smolmachine',
    } as Partial<SmolBridge> as SmolBridge);
    dropFile('avx.smolmachine');
    await flush();
    requests[0]!.answer(inspected('/x/avx.smolmachine', ['avx512f', 'amx_tile']));
    await flush();
    expect(byLabel('Missing CPU features')!.textContent).toContain('avx512f amx_tile');
    expect(button('Open')!.disabled).toBe(true);
    // Another path is another file: it is read again before it can be opened.
    type(byLabel<HTMLInputElement>('Machine file to open')!, '/x/other.smolmachine');
    expect(byLabel('Machine manifest')).toBeNull();
    expect(button('Inspect')!.disabled).toBe(false);
    stop();
  });

  it('shows the engine’s refusal in the dialog', async () => {
    const { transport } = recordingTransport();
    const refusing: Transport = {
      ...transport,
      request: async () => {
        throw new Error('/x/bad.smolmachine: the file’s sha256 is not the one its footer gives');
      },
    };
    const store = render(refusing);
    const stop = installMachineDrop(store, window, {
      pathForFile: () => '/x/bad.smolmachine',
    } as Partial<SmolBridge> as SmolBridge);
    dropFile('bad.smolmachine');
    await flush();
    expect(document.querySelector('[role="dialog"] [role="alert"]')!.textContent).toBe(
      '/x/bad.smolmachine: the file’s sha256 is not the one its footer gives',
    );
    expect(store.getState().dialog).toMatchObject({ kind: 'open-machine' });
    stop();
  });

  it('in web mode asks for the path on the engine’s host, and refuses other files', () => {
    const { transport, requests } = recordingTransport();
    const store = render(transport);
    const stop = installMachineDrop(store, window, null);
    dropFile('work.smolmachine');
    expect(requests).toHaveLength(0);
    expect(document.querySelector('[role="dialog"] .note')!.textContent).toContain(
      'type the path of work.smolmachine on the engine’s host',
    );
    act(() => store.setState({ dialog: null }));
    dropFile('notes.txt');
    expect(store.getState().dialog).toBeNull();
    expect(store.getState().toasts.at(-1)!.text).toBe(
      'notes.txt is not a .smolmachine file: only machines open by dropping',
    );
    stop();
  });
});
