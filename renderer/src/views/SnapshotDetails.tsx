// One snapshot: its name and note (editable, saved with PATCH), its labels (LabelsEditor.tsx), kind, time, parent, size on disk, the VMs here,
// the screen as it was when it was taken (from the recording of the VM that took it), and its actions.
import { useEffect, useState } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useApp, useAppState } from '../app-context.js';
import { formatBytes, formatTime } from '../format.js';
import { markerOf } from '../replay/asciicast.js';
import { screenAt } from '../replay/screen-at.js';
import { useRecording } from '../replay/use-recording.js';
import { openDialog, selectSnapshot, selectedVmId } from '../store/selection.js';
import { useImplicitCr } from '../console/implicit-cr.js';
import { LabelsEditor } from './LabelsEditor.js';
import { showCompare } from '../compare/compare-route.js';
import { useAway } from '../engines/engine-stores.js';

/** The screen as it was when the snapshot was taken (also a side of the compare view). */
export function LastScreen({ vmId, snapshotId }: { vmId: string; snapshotId: string }) {
  const snapshot = useAppState((s) => s.engine.snapshots[snapshotId]);
  const result = useRecording(vmId, snapshotId);
  const [text, setText] = useState<string | null>(null);
  const implicitCr = useImplicitCr(vmId);
  useEffect(() => {
    setText(null);
    if (result.state !== 'ready' || !snapshot) return;
    const marker = markerOf(result.recording, snapshot);
    if (!marker) return setText('');
    let current = true;
    void screenAt(result.recording, marker.time, implicitCr).then((screen) => current && setText(screen));
    return () => {
      current = false;
    };
  }, [result, snapshot, implicitCr]);
  if (result.state === 'failed') return <p className="muted">No screen: {result.message}</p>;
  if (text === null) return <p className="muted">Reading the recording…</p>;
  if (text === '') return <p className="muted">The recording has no mark for this snapshot.</p>;
  return (
    <pre className="screen-text" aria-label="Last screen">
      {text}
    </pre>
  );
}

export function SnapshotDetails({ snapshotId }: { snapshotId: string }) {
  const { store, operations } = useApp();
  const snapshot = useAppState((s) => s.engine.snapshots[snapshotId]);
  const parent = useAppState((s) => {
    const id = s.engine.snapshots[snapshotId]?.parent;
    return id ? (s.engine.snapshots[id]?.name ?? id) : null;
  });
  const vmName = useAppState((s) => {
    const id = s.engine.snapshots[snapshotId]?.vm;
    return id ? (s.engine.vms[id]?.name ?? null) : null;
  });
  const here = useAppState(
    useShallow((s) =>
      Object.values(s.engine.vms)
        .filter((vm) => vm.snapshot === snapshotId && vm.state !== 'destroyed' && !s.pendingDeletes.includes(vm.id))
        .map((vm) => vm.name),
    ),
  );
  const activeVm = useAppState(selectedVmId);
  // The engine out of reach: the buttons that need it are off, saying why.
  const away = useAway();
  const online = away === null;
  const activeName = useAppState((s) => (activeVm ? (s.engine.vms[activeVm]?.name ?? activeVm) : null));
  const busy = useAppState((s) => s.busy[`snapshot:${snapshotId}`]);
  const failure = useAppState((s) => s.failures[`snapshot:${snapshotId}`]);
  const [name, setName] = useState('');
  const [note, setNote] = useState('');
  useEffect(() => {
    setName(snapshot?.name ?? '');
    setNote(snapshot?.note ?? '');
  }, [snapshot?.id, snapshot?.name, snapshot?.note]);
  if (!snapshot) return null;
  const changed = name !== snapshot.name || note !== snapshot.note;
  const save = () => {
    const changes = { ...(name !== snapshot.name ? { name } : {}), ...(note !== snapshot.note ? { note } : {}) };
    void operations.updateSnapshot(snapshot.id, changes);
  };
  return (
    <section className="details" aria-label="Snapshot details">
      <h3>Snapshot</h3>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (changed) save();
        }}
      >
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} aria-label="Snapshot name" />
        </label>
        <label>
          Note
          <textarea value={note} rows={3} onChange={(e) => setNote(e.target.value)} aria-label="Snapshot note" />
        </label>
        <div className="row">
          <button type="submit" disabled={!changed || !!busy || !online} title={away ?? undefined}>
            {busy ?? 'Save'}
          </button>
          {changed && (
            <button type="button" onClick={() => (setName(snapshot.name), setNote(snapshot.note))}>
              Revert
            </button>
          )}
        </div>
        {failure && (
          <p className="error" role="alert">
            {failure}
          </p>
        )}
      </form>
      <h4>Labels</h4>
      <LabelsEditor
        key={snapshot.id}
        what={`snapshot ${snapshot.name}`}
        labels={snapshot.labels}
        busyKey={`snapshot-labels:${snapshot.id}`}
        save={(labels) => operations.labelSnapshot(snapshot.id, labels)}
      />
      <dl>
        <dt>Kind</dt>
        <dd>{snapshot.kind}</dd>
        <dt>Taken</dt>
        <dd>{formatTime(snapshot.created)}</dd>
        <dt>Parent</dt>
        <dd>
          {parent ? (
            <button className="link" onClick={() => selectSnapshot(store, snapshot.parent)}>
              {parent}
            </button>
          ) : (
            '— (a root)'
          )}
        </dd>
        <dt>Taken by</dt>
        <dd>{vmName ?? (snapshot.vm ? 'a VM that is gone' : '—')}</dd>
        <dt>Size on disk</dt>
        <dd>{formatBytes(snapshot.diskBytes)}</dd>
        <dt>Memory</dt>
        <dd>
          {formatBytes(snapshot.memoryBytes)}, {snapshot.cpus} vCPU
        </dd>
        <dt>Here now</dt>
        <dd>{here.length ? here.join(', ') : '—'}</dd>
        <dt>Id</dt>
        <dd className="mono">{snapshot.id}</dd>
      </dl>
      <div className="row wrap">
        <button
          disabled={!activeVm || !online}
          title={
            away ??
            (activeName ? `Moves ${activeName} to this snapshot; the dialog lets you choose another VM` : undefined)
          }
          onClick={() => activeVm && openDialog(store, { kind: 'restore', vmId: activeVm, snapshotId: snapshot.id })}
        >
          {activeName ? `Restore ${activeName} here…` : 'Restore…'}
        </button>
        <button
          disabled={!online}
          title={away ?? undefined}
          onClick={() => openDialog(store, { kind: 'fork', vmId: null, snapshotId: snapshot.id })}
        >
          Fork from here…
        </button>
        <button
          title={
            activeName ? `This snapshot and ${activeName} side by side` : 'This snapshot side by side with another'
          }
          onClick={() => showCompare(store, snapshot.id, activeVm)}
        >
          Side by side…
        </button>
        <button
          disabled={!online}
          title={away ?? 'Pack this snapshot into a .smolmachine file'}
          onClick={() => openDialog(store, { kind: 'export', source: { snapshotId: snapshot.id } })}
        >
          Export…
        </button>
        <button
          className="danger"
          disabled={snapshot.kind === 'base' || !online}
          title={snapshot.kind === 'base' ? 'A base snapshot goes with its episodes' : (away ?? undefined)}
          onClick={() => operations.deleteSnapshot(snapshot.id)}
        >
          Delete snapshot
        </button>
      </div>
      <h4>Screen when taken</h4>
      {snapshot.vm && vmName ? (
        <LastScreen vmId={snapshot.vm} snapshotId={snapshot.id} />
      ) : (
        <p className="muted">The VM that took it is gone, and its recording with it.</p>
      )}
    </section>
  );
}
