// The Engines dialog of the top bar: the remote engines the local engine reaches, each with its state, and adding
// one: name, URL and token, then the fingerprint the engine presents, to be compared with the one `smol serve`
// printed there and confirmed, and only then added (docs/remote.md, "The app with several engines"). Each engine's
// state is its store's connection (engines/engine-stores.ts), so the dialog shows what the list shows, live.
import { useState } from 'react';
import { useShallow } from 'zustand/react/shallow';
import type { EngineProbe } from '../../../src/api/schema.js';
import { AppContext, useApp, useAppState } from '../app-context.js';
import { Modal } from '../views/Modal.js';
import { useEngines, useEnginesState, type RemoteEngine } from './engine-stores.js';
import { addEngine, probeEngine, removeEngine } from './remote-engines.js';

const why = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** The context engine's state, live from its event stream (which retries with backoff while it is away). */
function EngineState() {
  const { state, why } = useAppState((s) => s.connection);
  if (state === 'connecting') return <span className="muted">connecting…</span>;
  if (state === 'open') return <span className="engine-state reachable">reachable</span>;
  // The local engine's 502 says "the engine NAME (URL) is unreachable: …" already.
  const reason = why ?? 'no answer';
  return (
    <span className="engine-state unreachable">{/unreachable/.test(reason) ? reason : `unreachable: ${reason}`}</span>
  );
}

function EngineRow({ engine, busy, remove }: { engine: RemoteEngine; busy: boolean; remove: () => void }) {
  return (
    <tr aria-label={`Engine ${engine.name}`}>
      <td>{engine.name}</td>
      <td>
        {engine.url}
        {engine.fingerprint && (
          <div className="sub fingerprint" title={`pinned certificate SHA-256 ${engine.fingerprint}`}>
            {engine.fingerprint.slice(0, 23)}…
          </div>
        )}
      </td>
      <td>
        <AppContext.Provider value={engine.app}>
          <EngineState />
        </AppContext.Provider>
      </td>
      <td>
        <button onClick={remove} disabled={busy} aria-label={`Remove ${engine.name}`}>
          Remove
        </button>
      </td>
    </tr>
  );
}

export function EnginesDialog({ onClose }: { onClose: () => void }) {
  const { transport } = useApp();
  const engines = useEngines();
  const rows = useEnginesState(useShallow((s) => s.engines));
  const listFailure = useEnginesState((s) => s.failure);
  const supported = useEnginesState((s) => s.supported);
  const [failure, setFailure] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [token, setToken] = useState('');
  const [probe, setProbe] = useState<EngineProbe | null>(null);
  const [busy, setBusy] = useState<string | null>(null);

  const run = (label: string, work: () => Promise<void>) => {
    setBusy(label);
    setFailure(null);
    work()
      .catch((error: unknown) => setFailure(why(error)))
      .finally(() => setBusy(null));
  };
  const check = () => run('Checking…', async () => setProbe(await probeEngine(transport, url.trim())));
  const confirm = () =>
    run('Adding…', async () => {
      await addEngine(transport, { name: name.trim(), url: probe!.url, token, fingerprint: probe!.fingerprint });
      setName('');
      setUrl('');
      setToken('');
      setProbe(null);
      await engines.sync();
    });
  const remove = (engine: string) =>
    run('Removing…', async () => {
      await removeEngine(transport, engine);
      await engines.sync();
    });

  return (
    <Modal title="Engines" onClose={onClose}>
      <table className="engines" aria-label="Engines">
        <thead>
          <tr>
            <th>Name</th>
            <th>URL</th>
            <th>State</th>
            <th />
          </tr>
        </thead>
        <tbody>
          <tr aria-label="Engine local">
            <td>local</td>
            <td className="muted">this engine</td>
            <td>
              <EngineState />
            </td>
            <td />
          </tr>
          {rows.map((row) => (
            <EngineRow key={row.name} engine={row} busy={!!busy} remove={() => remove(row.name)} />
          ))}
        </tbody>
      </table>
      {listFailure && <p className="error">{listFailure}</p>}
      {!supported && (
        <p className="muted">
          Remote engines are reached through the page of <code>smol serve</code> for now: the desktop app’s bridge
          carries one engine’s events.
        </p>
      )}
      <form
        hidden={!supported}
        onSubmit={(e) => {
          e.preventDefault();
          if (probe) confirm();
          else check();
        }}
      >
        <h3>Add an engine</h3>
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} aria-label="Engine name" spellCheck={false} />
        </label>
        <label>
          URL
          <input
            value={url}
            onChange={(e) => (setUrl(e.target.value), setProbe(null))}
            placeholder="https://10.0.0.2:7443"
            aria-label="Engine URL"
            spellCheck={false}
          />
        </label>
        <label>
          Token
          <input
            type="password"
            value={token}
            onChange={(e) => setToken(e.target.value)}
            aria-label="Engine token"
            autoComplete="off"
          />
        </label>
        {probe && (
          <p role="note" aria-label="Certificate fingerprint" className="probe">
            {probe.fingerprint ? (
              <>
                {probe.url} presents the certificate with SHA-256 fingerprint:<code>{probe.fingerprint}</code>Compare it
                with the one <code>smol serve</code> printed there before adding it.
                {probe.pinned && probe.pinned !== probe.fingerprint && (
                  <strong> It is not the {probe.pinned} pinned for that address before.</strong>
                )}
              </>
            ) : (
              <>{probe.url} is plain HTTP: there is no certificate to compare.</>
            )}
          </p>
        )}
        {failure && (
          <p className="error" role="alert">
            {failure}
          </p>
        )}
        <div className="row end">
          <button type="button" onClick={onClose}>
            Done
          </button>
          <button type="submit" className="primary" disabled={!!busy || !name.trim() || !url.trim() || !token}>
            {busy ?? (probe ? 'Confirm and add' : 'Check the certificate')}
          </button>
        </div>
      </form>
    </Modal>
  );
}

/** The top bar's Engines button and its dialog. */
export function EnginesButton() {
  const [open, setOpen] = useState(false);
  return (
    <>
      <button onClick={() => setOpen(true)} aria-pressed={open}>
        Engines
      </button>
      {open && <EnginesDialog onClose={() => setOpen(false)} />}
    </>
  );
}
