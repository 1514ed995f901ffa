// The dialogs behind the actions: a new episode from a Smolfile (a path, or text in SmolfileEditor.tsx), a checkpoint with a name and a note, fork N, and
// restore (which says what happens and offers a named checkpoint first); Export… and Open machine… are in
// MachineDialogs.tsx. Each shows its progress and failure in
// place and closes when the engine answered.
import { useEffect, useState } from 'react';
import { useShallow } from 'zustand/react/shallow';
import type { HostReport, SmolfileExamples } from '../../../src/api/schema.js';
import { useApp, useAppState } from '../app-context.js';
import type { Dialog } from '../store/app-store.js';
import { call } from '../transport/transport.js';
import { connected, shownVmIds } from '../store/selection.js';
import { Failure, useClose } from './dialog-parts.js';
import { ExportMachine, OpenMachine } from './MachineDialogs.js';
import { Modal } from './Modal.js';
import { SmolfileEditor, useSmolfileCheck, type SmolfileDraft } from './SmolfileEditor.js';

const NAME_RULE = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const NAME_HELP = 'letters, digits, “.”, “_” and “-”, starting with a letter or digit';

function nameProblem(name: string): string | null {
  return name === '' || NAME_RULE.test(name) ? null : `A name takes ${NAME_HELP}.`;
}

function NewEpisode() {
  const { operations } = useApp();
  const close = useClose();
  const online = useAppState(connected);
  const busy = useAppState((s) => s.busy['new-episode']);
  const [examples, setExamples] = useState<SmolfileExamples['examples'] | null>(null);
  const [listFailure, setListFailure] = useState<string | null>(null);
  const [host, setHost] = useState<HostReport | null>(null);
  const [mode, setMode] = useState<'path' | 'editor'>('path');
  const [path, setPath] = useState('');
  const [draft, setDraft] = useState<SmolfileDraft>({ text: '', directory: '' });
  const [name, setName] = useState('');
  const verdict = useSmolfileCheck(operations.transport, draft);
  useEffect(() => {
    call(operations.transport, 'listSmolfileExamples').then(
      (answer) => setExamples(answer.examples),
      (error: Error) => setListFailure(error.message),
    );
    // smol doctor's verdict: a host whose KVM cannot boot Linux guests says so before one is started.
    call(operations.transport, 'hostReport').then(setHost, () => setHost(null));
  }, [operations]);
  const problem = nameProblem(name);
  const noLinux = host && !host.linuxGuests.ok ? host.linuxGuests.message : null;
  const chosen = examples?.find((example) => example.path === path);
  const ready = mode === 'path' ? !!path : verdict.checked && verdict.ok;
  const start = () => {
    const named = name || undefined;
    const body =
      mode === 'path'
        ? { smolfile: path, name: named }
        : { text: draft.text, directory: draft.directory || undefined, name: named };
    void operations.createEpisode(body).then((created) => created && close());
  };
  return (
    <Modal title="New episode" onClose={close} wide={mode === 'editor'}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!ready || problem) return;
          start();
        }}
      >
        {noLinux && (
          <p className="warning" role="note" aria-label="Linux guests on this host">
            <strong>Linux guests cannot run here.</strong> {noLinux}. The examples marked “needs hardware KVM” will fail
            to boot; the bare-kernel ones run.
          </p>
        )}
        <div className="tabs" role="tablist" aria-label="Smolfile from">
          <button type="button" role="tab" aria-selected={mode === 'path'} onClick={() => setMode('path')}>
            A file on the engine’s machine
          </button>
          <button type="button" role="tab" aria-selected={mode === 'editor'} onClick={() => setMode('editor')}>
            Write a Smolfile
          </button>
        </div>
        {mode === 'editor' ? (
          <SmolfileEditor draft={draft} onChange={setDraft} verdict={verdict} examples={examples} />
        ) : (
          <>
            <fieldset>
              <legend>Example Smolfiles</legend>
              {examples === null && !listFailure && <p className="muted">Loading…</p>}
              {listFailure && <p className="error">The examples could not be listed: {listFailure}</p>}
              {examples?.map((example) => (
                <label key={example.path} className="choice">
                  <input
                    type="radio"
                    name="smolfile"
                    value={example.path}
                    checked={path === example.path}
                    onChange={() => setPath(example.path)}
                  />
                  <span>
                    <strong>{example.name}</strong>{' '}
                    {noLinux && example.linux && (
                      <span className="badge cannot-run" title={noLinux}>
                        needs hardware KVM
                      </span>
                    )}{' '}
                    <span className="muted">{example.description}</span>
                  </span>
                </label>
              ))}
            </fieldset>
            <label>
              Smolfile path (on the engine’s machine)
              <input
                value={path}
                onChange={(e) => setPath(e.target.value)}
                placeholder="/home/me/project/Smolfile"
                aria-label="Smolfile path"
                spellCheck={false}
              />
            </label>
          </>
        )}
        <label>
          Name (optional)
          <input value={name} onChange={(e) => setName(e.target.value)} aria-label="Episode name" spellCheck={false} />
        </label>
        {problem && <p className="error">{problem}</p>}
        {noLinux && mode === 'path' && chosen?.linux && (
          <p className="error">
            {chosen.name} boots a Linux guest, which this host’s KVM cannot run: it will fail to boot.
          </p>
        )}
        <Failure on="new-episode" />
        <div className="row end">
          <button type="button" onClick={close}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={!online || !ready || !!problem || !!busy}>
            {busy ?? 'Start episode'}
          </button>
        </div>
      </form>
    </Modal>
  );
}

function Checkpoint({ vmId }: { vmId: string }) {
  const { operations } = useApp();
  const close = useClose();
  const online = useAppState(connected);
  const vmName = useAppState((s) => s.engine.vms[vmId]?.name ?? vmId);
  const busy = useAppState((s) => s.busy[`vm:${vmId}`]);
  const [name, setName] = useState('');
  const [note, setNote] = useState('');
  const problem = nameProblem(name);
  return (
    <Modal title={`Checkpoint ${vmName}`} onClose={close}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (problem) return;
          void operations.checkpoint(vmId, name || undefined, note || undefined).then((saved) => saved && close());
        }}
      >
        <label>
          Name (optional: the engine names it checkpoint-N)
          <input
            value={name}
            onChange={(e) => setName(e.target.value)}
            aria-label="Checkpoint name"
            spellCheck={false}
          />
        </label>
        <label>
          Note
          <textarea value={note} onChange={(e) => setNote(e.target.value)} rows={3} aria-label="Checkpoint note" />
        </label>
        {problem && <p className="error">{problem}</p>}
        <Failure on={`vm:${vmId}`} />
        <div className="row end">
          <button type="button" onClick={close}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={!online || !!problem || !!busy}>
            {busy ?? 'Save checkpoint'}
          </button>
        </div>
      </form>
    </Modal>
  );
}

function Fork({ vmId, snapshotId }: { vmId: string | null; snapshotId: string | null }) {
  const { operations } = useApp();
  const close = useClose();
  const online = useAppState(connected);
  const what = useAppState((s) =>
    vmId
      ? `VM ${s.engine.vms[vmId]?.name ?? vmId}`
      : `snapshot ${s.engine.snapshots[snapshotId ?? '']?.name ?? snapshotId}`,
  );
  const key = vmId ? `vm:${vmId}` : `snapshot:${snapshotId}`;
  const busy = useAppState((s) => s.busy[key]);
  const [count, setCount] = useState(3);
  const valid = Number.isInteger(count) && count >= 1 && count <= 64;
  return (
    <Modal title={`Fork ${what}`} onClose={close}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!valid) return;
          const from = vmId ? { vmId } : { snapshotId: snapshotId! };
          void operations.fork(from, count).then((forked) => forked && close());
        }}
      >
        <p>
          {vmId
            ? 'The VM pauses for a moment while a fork point is saved; each new VM starts exactly there, and the VM keeps running.'
            : 'Each new VM is restored from this snapshot.'}
        </p>
        <label>
          How many VMs (1 to 64)
          <input
            type="number"
            min={1}
            max={64}
            value={count}
            onChange={(e) => setCount(Number(e.target.value))}
            aria-label="Number of forks"
          />
        </label>
        {!valid && <p className="error">Between 1 and 64.</p>}
        <Failure on={key} />
        <div className="row end">
          <button type="button" onClick={close}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={!online || !valid || !!busy}>
            {busy ?? `Fork ×${valid ? count : '?'}`}
          </button>
        </div>
      </form>
    </Modal>
  );
}

function Restore({ vmId: chosen, snapshotId }: { vmId: string; snapshotId: string }) {
  const { operations } = useApp();
  const close = useClose();
  const online = useAppState(connected);
  // The VM it moves: the one the action was for, or another of the episode the user picks here.
  const [vmId, setVmId] = useState(chosen);
  // Strings, so the shallow comparison sees an unchanged list as unchanged.
  const choices = useAppState(
    useShallow((s) => shownVmIds(s).map((id) => `${id}\t${s.engine.vms[id]!.name} (${s.engine.vms[id]!.state})`)),
  ).map((choice) => ({ id: choice.split('\t')[0]!, label: choice.split('\t')[1]! }));
  const vm = useAppState((s) => s.engine.vms[vmId]);
  const target = useAppState((s) => s.engine.snapshots[snapshotId]);
  const busy = useAppState((s) => s.busy[`vm:${vmId}`]);
  const [checkpointFirst, setCheckpointFirst] = useState(true);
  const [name, setName] = useState('');
  const [note, setNote] = useState('');
  const problem = checkpointFirst ? nameProblem(name) : null;
  const live = vm?.state === 'running' || vm?.state === 'paused';
  return (
    <Modal title={`Restore ${vm?.name ?? vmId} to ${target?.name ?? snapshotId}`} onClose={close}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (problem) return;
          const first = live && checkpointFirst ? { name: name || undefined, note: note || undefined } : undefined;
          void operations.restore(vmId, snapshotId, first).then((restored) => restored && close());
        }}
      >
        {choices.length > 1 && (
          <label>
            VM to move
            <select value={vmId} onChange={(e) => setVmId(e.target.value)} aria-label="VM to restore">
              {choices.map((choice) => (
                <option key={choice.id} value={choice.id}>
                  {choice.label}
                </option>
              ))}
            </select>
          </label>
        )}
        <p>
          <strong>{vm?.name ?? vmId}</strong>’s processes end and it continues from{' '}
          <strong>{target?.name ?? snapshotId}</strong>: its memory, disk and console as they were then.{' '}
          {live && 'The engine keeps where it is now as a restore-point snapshot, so nothing is lost.'}
        </p>
        {live && (
          <>
            <label className="choice">
              <input type="checkbox" checked={checkpointFirst} onChange={(e) => setCheckpointFirst(e.target.checked)} />
              <span>Save a named checkpoint of the current state first</span>
            </label>
            {checkpointFirst && (
              <>
                <label>
                  Checkpoint name (optional)
                  <input value={name} onChange={(e) => setName(e.target.value)} aria-label="Checkpoint name" />
                </label>
                <label>
                  Note
                  <textarea
                    value={note}
                    onChange={(e) => setNote(e.target.value)}
                    rows={2}
                    aria-label="Checkpoint note"
                  />
                </label>
              </>
            )}
          </>
        )}
        {problem && <p className="error">{problem}</p>}
        <Failure on={`vm:${vmId}`} />
        <div className="row end">
          <button type="button" onClick={close}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={!online || !!problem || !!busy}>
            {busy ?? 'Restore'}
          </button>
        </div>
      </form>
    </Modal>
  );
}

function ConfirmDelete({ episodeIds }: { episodeIds: string[] }) {
  const { operations } = useApp();
  const close = useClose();
  const online = useAppState(connected);
  const names = useAppState(useShallow((s) => episodeIds.map((id) => s.engine.episodes[id]?.name ?? id)));
  const running = useAppState(
    (s) =>
      episodeIds
        .flatMap((id) => s.engine.episodes[id]?.vmIds ?? [])
        .filter((vm) => s.engine.vms[vm]?.state === 'running').length,
  );
  return (
    <Modal title={`Delete ${episodeIds.length} episodes?`} onClose={close}>
      <p>
        {names.slice(0, 8).join(', ')}
        {names.length > 8 ? ` and ${names.length - 8} more` : ''}: their snapshots and recordings go
        {running ? `, and their ${running} running VMs are killed` : ''}. You can still undo it for a few seconds.
      </p>
      <div className="row end">
        <button type="button" onClick={close}>
          Cancel
        </button>
        <button
          type="button"
          className="danger"
          disabled={!online}
          onClick={() => {
            close();
            void operations.bulk('delete', episodeIds);
          }}
        >
          Delete {episodeIds.length} episodes
        </button>
      </div>
    </Modal>
  );
}

export function Dialogs() {
  const dialog = useAppState((s) => s.dialog);
  return dialog ? <DialogFor dialog={dialog} /> : null;
}

function DialogFor({ dialog }: { dialog: Dialog }) {
  switch (dialog.kind) {
    case 'new-episode':
      return <NewEpisode />;
    case 'checkpoint':
      return <Checkpoint vmId={dialog.vmId} />;
    case 'fork':
      return <Fork vmId={dialog.vmId} snapshotId={dialog.snapshotId} />;
    case 'restore':
      return <Restore vmId={dialog.vmId} snapshotId={dialog.snapshotId} />;
    case 'confirm-delete':
      return <ConfirmDelete episodeIds={dialog.episodeIds} />;
    case 'export':
      return <ExportMachine source={dialog.source} />;
    case 'open-machine':
      return <OpenMachine path={dialog.path} start={dialog.start} note={dialog.note} />;
  }
}
