// A VM's live console: its session (console-sessions.ts) placed here, fitted to the pane, with find, copy and
// reconnect. It never takes the keyboard by itself: a click in it does, and it says so ("typing goes to the guest"),
// so the page's single-key shortcuts never reach the guest by accident. A paste goes in chunks.
import { useEffect, useRef, useState, useSyncExternalStore } from 'react';
import { useApp, useAppState } from '../app-context.js';
import { consoleSession } from './console-sessions.js';
import { useImplicitCr } from './implicit-cr.js';

export function Console({ vmId }: { vmId: string }) {
  const { transport } = useApp();
  const host = useRef<HTMLDivElement>(null);
  const session = consoleSession(vmId, transport, useImplicitCr(vmId));
  const status = useSyncExternalStore(
    (listener) => session.onStatus(listener),
    () => session.status,
  );
  const typing = useSyncExternalStore(
    (listener) => session.onTyping(listener),
    () => session.typing,
  );
  const vmState = useAppState((s) => s.engine.vms[vmId]?.state);
  const vmName = useAppState((s) => s.engine.vms[vmId]?.name ?? vmId);
  const [needle, setNeedle] = useState('');
  const [found, setFound] = useState<string | null>(null);

  useEffect(() => {
    const container = host.current;
    if (!container) return;
    const hide = session.show(container);
    const fit = () => {
      if (container.clientWidth > 0 && container.clientHeight > 0) session.fit.fit();
    };
    const observer = new ResizeObserver(fit);
    observer.observe(container);
    fit();
    return () => {
      observer.disconnect();
      hide();
    };
  }, [session]);

  // A VM that runs after its console closed (stop then start, restore, reset): attach again, after a moment so a
  // console the engine keeps refusing is not asked again at once.
  useEffect(() => {
    if (vmState !== 'running' || status.state !== 'closed') return;
    const timer = setTimeout(() => session.connect(), 1000);
    return () => clearTimeout(timer);
  }, [vmState, status, session]);

  useEffect(() => {
    const subscription = session.search.onDidChangeResults(({ resultIndex, resultCount }) =>
      setFound(resultCount === 0 ? 'no match' : `${resultIndex + 1} of ${resultCount}`),
    );
    return () => subscription.dispose();
  }, [session]);

  const find = (backwards: boolean) => {
    if (!needle) return;
    const options = { decorations: { matchOverviewRuler: '#888', activeMatchColorOverviewRuler: '#ff0' } };
    if (backwards) session.search.findPrevious(needle, options);
    else session.search.findNext(needle, options);
  };

  return (
    <section className="console" aria-label={`Console of ${vmName}`}>
      <div className="toolbar small">
        <span className={`console-status ${status.state}`} role="status">
          {status.state === 'closed'
            ? `closed: ${status.why}`
            : status.state === 'connecting'
              ? 'attaching…'
              : vmState === 'running' || vmState === 'paused'
                ? 'live'
                : `the VM is ${vmState ?? 'gone'}: its last output`}
        </span>
        <span className={`console-keys${typing ? ' typing' : ''}`} role="status" data-testid="console-keys">
          {typing ? '⌨ typing goes to the guest (click outside to stop)' : 'click the console to type'}
        </span>
        <div className="spacer" />
        <input
          type="search"
          aria-label="Find in console"
          placeholder="Find"
          value={needle}
          onChange={(e) => setNeedle(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter') find(e.shiftKey);
          }}
        />
        <button onClick={() => find(true)} aria-label="Previous match" disabled={!needle}>
          ↑
        </button>
        <button onClick={() => find(false)} aria-label="Next match" disabled={!needle}>
          ↓
        </button>
        {found && needle && <span className="muted">{found}</span>}
        <button
          onClick={() => void navigator.clipboard?.writeText(session.terminal.getSelection())}
          aria-label="Copy selection"
        >
          Copy
        </button>
        <button onClick={() => session.fit.fit()} aria-label="Fit console to pane">
          Fit
        </button>
        <button
          disabled={vmState !== 'running'}
          onClick={() => session.type(`stty rows ${session.terminal.rows} cols ${session.terminal.cols}\r`)}
          title="A serial line has no window size: this types stty rows/cols into the guest's shell"
        >
          Sync size to guest
        </button>
        {status.state === 'closed' && <button onClick={() => session.connect()}>Reconnect</button>}
      </div>
      <div className={`console-host${typing ? ' typing' : ''}`} ref={host} data-testid="console" />
    </section>
  );
}
