// @vitest-environment happy-dom
// The Terminal tab's wiring (the real thing, a shell on the agent's terminal, is tests/linux/terminal.test.ts): a VM
// whose agent is ready gets a shell asked for at the pane's size; the status follows the session (started, its exit
// status, a refusal); "New shell" asks again; leaving the tab hangs up; a VM without an agent, or a transport that
// cannot carry terminals, says why instead of asking.
import { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterEach, describe, expect, it } from 'vitest';
import type { Episode, Vm } from '../../../src/api/schema.js';
import { AppContext } from '../app-context.js';
import { applyEvents, createAppStore, type AppStore } from '../store/app-store.js';
import { MetricsStore } from '../store/metrics.js';
import { Operations } from '../store/operations.js';
import type { TerminalHandlers, TerminalRequest, Transport } from '../transport/transport.js';
import { GuestTerminal } from './GuestTerminal.js';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;
(globalThis as { ResizeObserver?: unknown }).ResizeObserver ??= class {
  observe() {}
  disconnect() {}
};

const T = '2026-12-01T06:00:00.000Z';
const EP = 'ep-aaaaaaaaaa';
const VM = 'vm-aaaaaaaaaa';
const vm = (over: Partial<Vm> = {}): Vm => ({
  ...{ id: VM, name: 'shell', episode: EP, state: 'running', snapshot: null, parentVm: null, created: T },
  ...{ runningSince: T, exit: null, cpus: 1, memoryMiB: 256, agent: 'ready' as const },
  ...{ ports: [], network: { enabled: false, refused: 0 }, labels: {} },
  ...over,
});
const episode = (vms: Vm[]): Episode => ({
  ...{ id: EP, name: 'term', state: 'running', smolfile: { path: '/s/shell.smolfile', text: '' }, created: T },
  ...{ base: null, vms, snapshotCount: 0, diskBytes: 0 },
});

interface Session {
  vm: string;
  request: TerminalRequest;
  handlers: TerminalHandlers;
  typed: (string | Uint8Array)[];
  closed: boolean;
}

function transportWith(sessions: Session[], terminals = true): Transport {
  return {
    request: async <R,>() => ({}) as R,
    events: () => () => undefined,
    console: () => ({ write: () => undefined, close: () => undefined }),
    ...(terminals && {
      terminal: (vmId: string, request: TerminalRequest, handlers: TerminalHandlers) => {
        const session: Session = { vm: vmId, request, handlers, typed: [], closed: false };
        sessions.push(session);
        return {
          write: (data) => void session.typed.push(data),
          resize: () => undefined,
          close: () => void (session.closed = true),
        };
      },
    }),
  };
}

let root: Root | null = null;
afterEach(() => {
  act(() => root?.unmount());
  root = null;
  document.body.innerHTML = '';
});

function render(store: AppStore, transport: Transport) {
  const container = document.createElement('div');
  document.body.append(container);
  root = createRoot(container);
  const app = { store, transport, operations: new Operations(store, transport), metrics: new MetricsStore() };
  act(() =>
    root!.render(
      <AppContext.Provider value={app}>
        <GuestTerminal vmId={VM} />
      </AppContext.Provider>,
    ),
  );
  return container;
}

function storeWith(one: Vm): AppStore {
  const store = createAppStore();
  applyEvents(store, [{ type: 'episode.created', episode: episode([one]) }]);
  return store;
}

const status = (container: HTMLElement) => container.querySelector('[data-testid=terminal-status]')?.textContent;

describe('the Terminal tab', () => {
  it('asks for a shell on a terminal of the pane, follows it to its exit, and opens a new one', () => {
    const sessions: Session[] = [];
    const container = render(storeWith(vm()), transportWith(sessions));
    expect(sessions).toHaveLength(1);
    const [first] = sessions;
    expect(first!.vm).toBe(VM);
    expect(first!.request.argv).toEqual(['sh']);
    expect(first!.request.env).toEqual({ TERM: 'xterm-256color' });
    expect(first!.request.rows).toBeGreaterThanOrEqual(1);
    expect(first!.request.cols).toBeGreaterThanOrEqual(1);
    expect(status(container)).toBe('starting a shell…');
    act(() => first!.handlers.onStart());
    expect(status(container)).toBe('shell on /dev/pts in the guest');
    act(() => first!.handlers.onExit({ exitCode: 3, signal: null, timedOut: false }));
    expect(status(container)).toBe('the shell exited with status 3');
    const again = [...container.querySelectorAll('button')].find((b) => b.textContent === 'New shell');
    expect(again).toBeDefined();
    act(() => again!.click());
    expect(sessions).toHaveLength(2);
    expect(first!.closed).toBe(true);
    act(() => sessions[1]!.handlers.onClose('resize: this command has no terminal'));
    expect(status(container)).toBe('closed: resize: this command has no terminal');
  });

  it('leaving the tab hangs the shell up', () => {
    const sessions: Session[] = [];
    render(storeWith(vm()), transportWith(sessions));
    act(() => root?.unmount());
    root = null;
    expect(sessions.map((s) => s.closed)).toEqual([true]);
  });

  it('says why there is no shell: a VM without an agent, or a transport without terminals', () => {
    const sessions: Session[] = [];
    const bare = render(storeWith(vm({ agent: 'none' })), transportWith(sessions));
    expect(status(bare)).toBe('this VM has no guest agent (a bare kernel): use the Console');
    act(() => root?.unmount());
    const app = render(storeWith(vm()), transportWith(sessions, false));
    expect(status(app)).toMatch(/not carried by the desktop app/);
    expect(sessions).toHaveLength(0);
  });
});
