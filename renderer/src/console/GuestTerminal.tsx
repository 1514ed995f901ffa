// The Terminal tab: a shell on a pseudo-terminal in the guest, through its agent (docs/agent.md, "Terminals"),
// beside the serial console. Unlike the console it has a real window size: the pane's fit is sent as a resize, so
// full-screen programs and job control (Ctrl-C, Ctrl-Z) work as over ssh. Bytes go from the WebSocket straight into
// xterm.js, never through React state; closing the tab (or choosing another VM) hangs the shell up.
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import { useEffect, useRef, useState } from 'react';
import { useApp, useAppState } from '../app-context.js';
import type { TerminalStream } from '../transport/transport.js';
import { TERMINAL_THEME } from './console-sessions.js';

type Status =
  | { state: 'starting' | 'live' }
  | { state: 'exited'; how: string }
  | { state: 'closed'; why: string }
  | { state: 'unavailable'; why: string };

function exitText(exit: { exitCode: number | null; signal: string | null; timedOut: boolean }): string {
  if (exit.timedOut) return 'timed out';
  return exit.signal ? `ended by ${exit.signal}` : `exited with status ${exit.exitCode}`;
}

function statusText(status: Status): string {
  switch (status.state) {
    case 'starting':
      return 'starting a shell…';
    case 'live':
      return 'shell on /dev/pts in the guest';
    case 'exited':
      return `the shell ${status.how}`;
    case 'closed':
      return `closed: ${status.why}`;
    case 'unavailable':
      return status.why;
  }
}

export function GuestTerminal({ vmId }: { vmId: string }) {
  const { transport } = useApp();
  const host = useRef<HTMLDivElement>(null);
  const agent = useAppState((s) => s.engine.vms[vmId]?.agent);
  const vmState = useAppState((s) => s.engine.vms[vmId]?.state);
  const vmName = useAppState((s) => s.engine.vms[vmId]?.name ?? vmId);
  const [status, setStatus] = useState<Status>({ state: 'starting' });
  /** Bumped by "New shell": a new session. */
  const [generation, setGeneration] = useState(0);
  // Why no shell can be had now (null: it can). Only a change of this starts a new one: pausing the VM does not.
  const unavailable = !transport.terminal
    ? 'terminals are not carried by the desktop app’s bridge yet: use smol serve'
    : agent === 'none'
      ? 'this VM has no guest agent (a bare kernel): use the Console'
      : vmState !== 'running' && vmState !== 'paused'
        ? `the VM is ${vmState ?? 'gone'}`
        : agent !== 'ready'
          ? `waiting for the guest agent (${agent ?? 'unknown'})`
          : null;

  useEffect(() => {
    const container = host.current;
    if (!container) return;
    if (unavailable || !transport.terminal) {
      setStatus({ state: 'unavailable', why: unavailable ?? '' });
      return;
    }
    const terminal = new Terminal({
      fontFamily: 'ui-monospace, "JetBrains Mono", "DejaVu Sans Mono", monospace',
      fontSize: 13,
      scrollback: 5000,
      theme: TERMINAL_THEME,
    });
    const fit = new FitAddon();
    terminal.loadAddon(fit);
    terminal.open(container);
    if (container.clientWidth > 0 && container.clientHeight > 0) fit.fit();
    setStatus({ state: 'starting' });
    const stream: TerminalStream = transport.terminal(
      vmId,
      { argv: ['sh'], rows: terminal.rows, cols: terminal.cols, env: { TERM: 'xterm-256color' } },
      {
        onData: (data) => terminal.write(data),
        onStart: () => setStatus({ state: 'live' }),
        onExit: (exit) => setStatus({ state: 'exited', how: exitText(exit) }),
        onClose: (why) => setStatus({ state: 'closed', why }),
      },
    );
    const typed = terminal.onData((data) => stream.write(data));
    const binary = terminal.onBinary((data) => stream.write(Uint8Array.from(data, (c) => c.charCodeAt(0))));
    const resized = terminal.onResize(({ rows, cols }) => stream.resize(rows, cols));
    const observer = new ResizeObserver(() => {
      if (container.clientWidth > 0 && container.clientHeight > 0) fit.fit();
    });
    observer.observe(container);
    return () => {
      observer.disconnect();
      typed.dispose();
      binary.dispose();
      resized.dispose();
      stream.close();
      terminal.dispose();
    };
  }, [transport, vmId, unavailable, generation]);

  return (
    <section className="console" aria-label={`Terminal in ${vmName}`}>
      <div className="toolbar small">
        <span
          className={`console-status ${status.state === 'live' ? 'live' : status.state === 'starting' ? '' : 'closed'}`}
          role="status"
          data-testid="terminal-status"
        >
          {statusText(status)}
        </span>
        <div className="spacer" />
        {(status.state === 'exited' || status.state === 'closed') && (
          <button onClick={() => setGeneration((n) => n + 1)}>New shell</button>
        )}
      </div>
      <div className="console-host" ref={host} data-testid="terminal" />
    </section>
  );
}
