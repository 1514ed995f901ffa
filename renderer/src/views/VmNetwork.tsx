// A networked VM's forwarded ports and refused connections, in its toolbar (docs/ui.md, "Networks"): each forward
// as `80 → 127.0.0.1:41235`, a web server's (the engine gives it a URL) as a link that opens it in the browser (the
// system's, through the desktop bridge, in the app); a count of refused connections that opens their list.
import { useState } from 'react';
import type { PortForward } from '../../../src/api/schema.js';
import { useApp, useAppState } from '../app-context.js';
import { loadVmRefusals } from '../store/network.js';
import { smolBridge } from '../transport/electron-transport.js';

/** In the desktop app the system browser opens the link (main checks it is http(s)); a page follows it. */
function openOutside(event: React.MouseEvent<HTMLAnchorElement>, url: string): void {
  const bridge = smolBridge(window);
  if (!bridge) return;
  event.preventDefault();
  bridge.openExternal(url);
}

function Port({ port }: { port: PortForward }) {
  const text = `${port.guest} → 127.0.0.1:${port.host}`;
  const title = `TCP 127.0.0.1:${port.host} on this machine reaches the guest's port ${port.guest}`;
  if (!port.url) {
    return (
      <span className="port mono" title={title}>
        {text}
      </span>
    );
  }
  return (
    <a
      className="port mono"
      href={port.url}
      target="_blank"
      rel="noopener noreferrer"
      title={`${title}: open ${port.url}`}
      onClick={(event) => openOutside(event, port.url!)}
    >
      {text} ↗
    </a>
  );
}

function Refusals({ vmId, name }: { vmId: string; name: string }) {
  const refusals = useAppState((s) => s.engine.refusals[vmId]);
  const list = refusals ?? [];
  return (
    <div className="refusals" role="region" aria-label={`Refused connections of ${name}`}>
      {list.length === 0 ? (
        <p className="muted small">{refusals ? 'None refused yet.' : 'Loading…'}</p>
      ) : (
        <table className="grid small">
          <thead>
            <tr>
              <th>Time</th>
              <th>Destination</th>
              <th>Protocol</th>
              <th>Rule</th>
            </tr>
          </thead>
          <tbody>
            {list
              .slice(-20)
              .reverse()
              .map((r) => (
                <tr key={r.seq}>
                  <td>{new Date(r.at).toLocaleTimeString()}</td>
                  <td className="mono">
                    {r.port ? `${r.destination}:${r.port}` : r.destination}
                    {r.name ? ` (${r.name})` : ''}
                  </td>
                  <td>{r.protocol}</td>
                  <td>{r.rule}</td>
                </tr>
              ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

export function VmNetwork({ vmId }: { vmId: string }) {
  const { store, transport } = useApp();
  const vm = useAppState((s) => s.engine.vms[vmId]);
  const [open, setOpen] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  if (!vm?.network.enabled) return null;
  const refused = vm.network.refused;
  const toggle = () => {
    setOpen(!open);
    if (open) return;
    setFailure(null);
    loadVmRefusals(store, transport, vmId).catch((error: Error) => setFailure(error.message));
  };
  return (
    <div className="vm-network" role="group" aria-label={`Network of ${vm.name}`}>
      {vm.ports.length > 0 && <span className="muted small">Ports</span>}
      {vm.ports.map((port) => (
        <Port key={`${port.host}-${port.guest}`} port={port} />
      ))}
      <button
        className={`refused-badge${refused > 0 ? ' some' : ''}`}
        aria-expanded={open}
        onClick={toggle}
        title="Packets the VM's network policy refused (smol logs --network)"
      >
        {refused} refused
      </button>
      {open && (
        <>
          <Refusals vmId={vmId} name={vm.name} />
          {failure && (
            <span className="error" role="alert">
              {failure}
            </span>
          )}
        </>
      )}
    </div>
  );
}
