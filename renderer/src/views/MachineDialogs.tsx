// Portable machines in the UI (docs/smolmachine.md, docs/ui.md "Portable machines"): "Export…" packs a VM or a
// snapshot into a .smolmachine file on the engine's host, "Open machine…" starts an episode from one. Both show the
// engine's progress events for their operation ('pack', 'open') and its refusals as it words them; Open machine…
// shows the file's manifest (inspectMachine: what made it, when, memory, vCPUs, disks, CPU features this host lacks)
// before the user opens it. In the desktop
// app a native save dialog picks the export's path (the preload bridge's chooseSavePath).
import { useEffect, useState } from 'react';
import { useApp, useAppState } from '../app-context.js';
import { connected } from '../store/selection.js';
import { smolBridge } from '../transport/electron-transport.js';
import type { ResponseOf } from '../../../src/api/operations.js';
import { formatBytes } from '../format.js';
import { call } from '../transport/transport.js';
import { Failure, useClose } from './dialog-parts.js';
import { Modal } from './Modal.js';

/** A file name's part from a name: what names allow, anything else as '-'. */
const namePart = (name: string) => name.replace(/[^A-Za-z0-9._-]+/g, '-');

/** `<data dir>/exports/<episode>-<snapshot or vm>.smolmachine`, the engine making the folder when it is missing. */
export function defaultExportPath(home: string, episode: string, source: string): string {
  return `${home.replace(/\/+$/, '')}/exports/${namePart(episode)}-${namePart(source)}.smolmachine`;
}

function OperationProgress({ operation, label }: { operation: 'pack' | 'open'; label: string }) {
  const progress = useAppState((s) => s.engine.operationProgress[operation]);
  const total = Math.max(progress?.total ?? 0, 1);
  const done = Math.min(progress?.done ?? 0, total);
  return (
    <div className="machine-progress" role="status">
      <progress aria-label={label} max={progress ? total : undefined} value={progress ? done : undefined} />
      <span className="muted small">{progress ? `${Math.round((done / total) * 100)}%` : 'starting…'}</span>
    </div>
  );
}

export function ExportMachine({ source }: { source: { vmId: string } | { snapshotId: string } }) {
  const { operations } = useApp();
  const close = useClose();
  const online = useAppState(connected);
  const busy = useAppState((s) => s.busy['export']);
  const isVm = 'vmId' in source;
  const id = isVm ? source.vmId : source.snapshotId;
  const name = useAppState((s) => (isVm ? s.engine.vms[id]?.name : s.engine.snapshots[id]?.name) ?? id);
  const live = useAppState((s) => isVm && ['running', 'paused'].includes(s.engine.vms[id]?.state ?? ''));
  const episodeName = useAppState((s) => {
    const episode = isVm ? s.engine.vms[id]?.episode : s.engine.snapshots[id]?.episode;
    return episode ? (s.engine.episodes[episode]?.name ?? episode) : 'episode';
  });
  const [path, setPath] = useState('');
  const [typed, setTyped] = useState(false);
  const [homeFailure, setHomeFailure] = useState<string | null>(null);
  const bridge = smolBridge(window);
  // The default path needs the data dir, which only the engine knows (its health call).
  useEffect(() => {
    let current = true;
    call(operations.transport, 'health').then(
      (health) => current && !typed && setPath(defaultExportPath(health.home, episodeName, name)),
      (error: Error) => current && setHomeFailure(error.message),
    );
    return () => {
      current = false;
    };
    // Once per dialog (`typed` is read as it was then: a path typed before the answer stays).
  }, [operations]);
  const choose = async () => {
    const chosen = await bridge?.chooseSavePath(path || `${name}.smolmachine`);
    if (chosen) {
      setPath(chosen);
      setTyped(true);
    }
  };
  return (
    <Modal title={`Export ${isVm ? 'VM' : 'snapshot'} ${name}`} onClose={close}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!path.trim()) return;
          void operations.packMachine(id, path.trim()).then((packed) => packed && close());
        }}
      >
        <p>
          One <code>.smolmachine</code> file with everything needed to go on from {isVm ? 'where the VM is' : 'here'} on
          any host (<code>smol up --from FILE</code>, or Open machine… there).
          {live && ' The VM pauses for a moment while a checkpoint is taken; that checkpoint is what goes in the file.'}
        </p>
        <label>
          File (on the engine’s host)
          <div className="row">
            <input
              value={path}
              onChange={(e) => (setPath(e.target.value), setTyped(true))}
              placeholder="/home/me/machines/work.smolmachine"
              aria-label="Machine file path"
              spellCheck={false}
              className="grow"
            />
            {bridge && (
              <button type="button" onClick={() => void choose()} disabled={!!busy}>
                Choose…
              </button>
            )}
          </div>
        </label>
        {homeFailure && <p className="error">The data dir could not be asked for: {homeFailure}</p>}
        {busy && <OperationProgress operation="pack" label="Export progress" />}
        <Failure on="export" />
        <div className="row end">
          <button type="button" onClick={close}>
            {busy ? 'Close' : 'Cancel'}
          </button>
          <button type="submit" className="primary" disabled={!online || !path.trim() || !!busy}>
            {busy ?? 'Export'}
          </button>
        </div>
      </form>
    </Modal>
  );
}

/** A .smolmachine's manifest as the engine read it (inspectMachine): what made it, when, and what it needs here. */
function MachineManifest({ seen }: { seen: ResponseOf<'inspectMachine'> }) {
  const { made, snapshot, cpu } = seen;
  const rows: Array<[string, string]> = [
    ['Made by', `smol ${made.smol} on ${made.host} (${made.platform})`],
    ['When', new Date(made.at).toLocaleString()],
    ['Packed from', made.from],
    ['Snapshot', `${snapshot.name} (${snapshot.kind}, ${snapshot.id})`],
    ['Memory', `${formatBytes(snapshot.memoryBytes)}, ${formatBytes(seen.memoryData)} of it in the file`],
    ['vCPUs', String(snapshot.cpus)],
    ['Disks', seen.disks.map((d) => `${d.kind} ${d.name} (${formatBytes(d.bytes)})`).join(', ') || 'none'],
    ['Boots', seen.boot.map((b) => `${b.role} ${b.name}`).join(', ') || 'its image'],
    ['Smolfile', seen.smolfile.name],
    ['File', `${formatBytes(seen.bytes)}, format ${seen.format}${seen.console ? ', with its console screen' : ''}`],
    ['CPU', `${cpu.vendor} ${cpu.model}: ${cpu.features} features needed`],
  ];
  return (
    <>
      <dl className="machine-manifest" aria-label="Machine manifest">
        {rows.map(([term, value]) => (
          <div key={term}>
            <dt>{term}</dt>
            <dd>{value}</dd>
          </div>
        ))}
      </dl>
      {cpu.missing.length > 0 && (
        <p className="error" role="alert" aria-label="Missing CPU features">
          This host lacks CPU features the packed state may use, so the engine will not open it: {cpu.missing.join(' ')}
        </p>
      )}
    </>
  );
}

export function OpenMachine({ path: given, start, note }: { path?: string; start?: boolean; note?: string }) {
  const { operations } = useApp();
  const close = useClose();
  const online = useAppState(connected);
  const busy = useAppState((s) => s.busy['open-machine']);
  const [path, setPath] = useState(given ?? '');
  // The manifest of the file at `path`, once the engine has read it; opening asks for it first.
  const [seen, setSeen] = useState<ResponseOf<'inspectMachine'> | null>(null);
  const inspect = (file: string) => void operations.inspectMachine(file).then((found) => setSeen(found ?? null));
  const open = (file: string) => void operations.openMachine(file).then((opened) => opened && close());
  // A dropped file (in the app) is read at once; its manifest shows here to confirm.
  useEffect(() => {
    if (start && given && online) inspect(given);
  }, []);
  const blocked = !!seen && seen.cpu.missing.length > 0;
  return (
    <Modal title="Open machine" onClose={close}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!path.trim()) return;
          if (seen) open(path.trim());
          else inspect(path.trim());
        }}
      >
        <p>
          Starts a new episode from a <code>.smolmachine</code> file: its first VM goes on from the packed state. The
          engine reads the file first and shows what it holds; nothing reaches the store until you open it, and then the
          file is checked whole (its digest, every chunk, this host’s CPU features).
        </p>
        {note && <p className="note">{note}</p>}
        <label>
          File (on the engine’s host)
          <input
            value={path}
            onChange={(e) => {
              setPath(e.target.value);
              setSeen(null);
            }}
            placeholder="/home/me/machines/work.smolmachine"
            aria-label="Machine file to open"
            spellCheck={false}
          />
        </label>
        {seen && <MachineManifest seen={seen} />}
        {busy === 'Opening…' && <OperationProgress operation="open" label="Open progress" />}
        <Failure on="open-machine" />
        <div className="row end">
          <button type="button" onClick={close}>
            {busy ? 'Close' : 'Cancel'}
          </button>
          <button type="submit" className="primary" disabled={!online || !path.trim() || !!busy || blocked}>
            {busy ?? (seen ? 'Open' : 'Inspect')}
          </button>
        </div>
      </form>
    </Modal>
  );
}
