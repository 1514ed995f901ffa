// One episode: its VMs (state, where each is, and its actions), the fork tree, the selected snapshot's details,
// and the selected VM's console or replay. While its engine is out of reach, what is live (states, uptimes, the
// agent, sparklines) shows as unknown with the state last seen, and the actions that need the engine say why they
// are off (engine-stores.ts useAway), until the engine answers again.
import { useState } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useApp, useAppState } from '../app-context.js';
import { useNow } from '../clock.js';
import { Console } from '../console/Console.js';
import { GuestTerminal } from '../console/GuestTerminal.js';
import { formatBytes, formatDuration } from '../format.js';
import { Replay } from '../replay/Replay.js';
import { ForkTree } from '../tree/ForkTree.js';
import {
  closeEpisode,
  openDialog,
  selectVm,
  selectedVmId,
  setHideAutomatic,
  shownVmIds,
  toggleTreeMark,
} from '../store/selection.js';
import { ActivityLog } from '../activity/ActivityLog.js';
import { LabelsEditor } from './LabelsEditor.js';
import { SnapshotDetails } from './SnapshotDetails.js';
import { Sparklines } from './Sparkline.js';
import { StateBadge, UnknownState } from './StateBadge.js';
import { useAway } from '../engines/engine-stores.js';
import { VmNetwork } from './VmNetwork.js';
import { showCompare } from '../compare/compare-route.js';
import { VM_PICKER_FROM, VmPicker } from './VmPicker.js';

function Uptime({ since }: { since: string }) {
  const now = useNow();
  return <span className="muted">up {formatDuration(now - Date.parse(since))}</span>;
}

/** The action bar's note saying why its actions are off (the disabled buttons point at it). */
const AWAY_NOTE = 'vm-actions-away';

function VmActions({ vmId }: { vmId: string }) {
  const { store, operations } = useApp();
  const vm = useAppState((s) => s.engine.vms[vmId]);
  const busy = useAppState((s) => s.busy[`vm:${vmId}`]);
  const failure = useAppState((s) => s.failures[`vm:${vmId}`]);
  const progress = useAppState((s) => s.engine.progress[vmId]);
  // Busy, or the engine out of reach: the buttons wait (saying why, for the latter).
  const away = useAway();
  const off = useAppState((s) => !!s.busy[`vm:${vmId}`]) || away !== null;
  // On a button that needs the engine, after its own title: the reason it is off.
  const needsEngine = away ? { title: away, 'aria-describedby': AWAY_NOTE } : {};
  if (!vm) return null;
  const live = vm.state === 'running' || vm.state === 'paused';
  const can = { start: vm.state === 'suspended', stop: live, reset: vm.state !== 'creating' };
  return (
    <div className="vm-actions" role="group" aria-label={`Actions for ${vm.name}`}>
      <span className="acting-on" title="The selected VM: these buttons, the palette and the shortcuts act on it">
        <span className="muted">VM</span> <strong data-testid="acting-on">{vm.name}</strong>
      </span>
      <button disabled={!live || off} {...needsEngine} onClick={() => openDialog(store, { kind: 'checkpoint', vmId })}>
        Checkpoint…
      </button>
      <button
        disabled={!live || off}
        {...needsEngine}
        onClick={() => openDialog(store, { kind: 'fork', vmId, snapshotId: null })}
      >
        Fork…
      </button>
      {vm.state === 'paused' ? (
        <button disabled={off} {...needsEngine} onClick={() => void operations.lifecycle(vmId, 'resume')}>
          Resume
        </button>
      ) : (
        <button
          disabled={vm.state !== 'running' || off}
          {...needsEngine}
          onClick={() => void operations.lifecycle(vmId, 'pause')}
        >
          Pause
        </button>
      )}
      {can.start ? (
        <button disabled={off} {...needsEngine} onClick={() => void operations.lifecycle(vmId, 'start')}>
          Start
        </button>
      ) : (
        <button disabled={!can.stop || off} {...needsEngine} onClick={() => void operations.lifecycle(vmId, 'stop')}>
          Stop
        </button>
      )}
      <button
        disabled={!can.reset || off}
        onClick={() => void operations.reset(vmId)}
        title="Boots a clean machine; where it was is kept as a checkpoint, with Undo"
        {...needsEngine}
      >
        Reset
      </button>
      <button
        disabled={(!live && !vm.snapshot) || off}
        title="Pack the VM into a .smolmachine file (a running one is checkpointed first)"
        {...needsEngine}
        onClick={() => openDialog(store, { kind: 'export', source: { vmId } })}
      >
        Export…
      </button>
      <button title="This VM side by side with another VM or a snapshot" onClick={() => showCompare(store, vmId, null)}>
        Side by side…
      </button>
      <button className="danger" disabled={off} {...needsEngine} onClick={() => operations.removeVm(vmId)}>
        Remove VM
      </button>
      <div className="spacer" />
      {away && (
        <span id={AWAY_NOTE} className="away-note" role="note">
          {away}
        </span>
      )}
      <VmNetwork vmId={vmId} />
      {live && !away && <Sparklines vmIds={[vmId]} />}
      {busy && (
        <span className="busy" role="status">
          {busy}
          {progress && ` ${Math.round((progress.done / Math.max(progress.total, 1)) * 100)}%`}
        </span>
      )}
      {vm.exit && !live && (
        <span className="muted" title={vm.exit.message}>
          ended: {vm.exit.reason}
          {vm.exit.message ? ` (${vm.exit.message})` : ''}
        </span>
      )}
      {failure && !busy && (
        <span className="error" role="alert">
          {failure}
        </span>
      )}
    </div>
  );
}

/** The selected VM's labels, above the snapshot's details (docs/labels.md). */
function VmLabels({ vmId }: { vmId: string }) {
  const { operations } = useApp();
  const vm = useAppState((s) => s.engine.vms[vmId]);
  if (!vm) return null;
  return (
    <section className="details" aria-label="VM labels">
      <h4>Labels of VM {vm.name}</h4>
      <LabelsEditor
        key={vm.id}
        what={`VM ${vm.name}`}
        labels={vm.labels}
        busyKey={`vm-labels:${vm.id}`}
        save={(labels) => operations.labelVm(vm.id, labels)}
      />
    </section>
  );
}

/** The tree bar's pair: the selected snapshot and the one shift-clicked beside it, side by side. */
function TreePair() {
  const { store } = useApp();
  const selected = useAppState((s) => (s.snapshotId ? (s.engine.snapshots[s.snapshotId] ?? null) : null));
  const marked = useAppState((s) => (s.treeMark ? (s.engine.snapshots[s.treeMark] ?? null) : null));
  if (!selected) return null;
  if (!marked || marked.id === selected.id) {
    return <span className="muted">Shift-click a second card to compare it with {selected.name}</span>;
  }
  return (
    <>
      <button
        onClick={() => showCompare(store, selected.id, marked.id)}
        title="The two snapshots side by side, with Diff these"
      >
        Side by side: {selected.name} ↔ {marked.name}
      </button>
      <button onClick={() => toggleTreeMark(store, null)} aria-label={`Unmark ${marked.name}`}>
        ×
      </button>
    </>
  );
}

function VmTab({ vmId, active }: { vmId: string; active: boolean }) {
  const { store } = useApp();
  const vm = useAppState((s) => s.engine.vms[vmId]);
  const away = useAway();
  const at = useAppState((s) => {
    const id = s.engine.vms[vmId]?.snapshot;
    return id ? (s.engine.snapshots[id]?.name ?? null) : null;
  });
  if (!vm) return null;
  return (
    <button
      role="tab"
      aria-selected={active}
      className={`vm-tab${active ? ' active' : ''}`}
      onClick={() => selectVm(store, vmId)}
      aria-label={`VM ${vm.name}`}
      title={vm.exit ? `${vm.exit.reason}: ${vm.exit.message}` : vm.id}
    >
      <span className="vm-tab-name">{vm.name}</span>
      {away ? <UnknownState last={vm.state} why={away} /> : <StateBadge state={vm.state} />}
      {vm.runningSince && !away && <Uptime since={vm.runningSince} />}
      {vm.agent !== 'none' && !away && (
        <span className={`agent-state agent-${vm.agent}`} title="The guest agent (smol exec, files)">
          agent {vm.agent}
        </span>
      )}
      {at && <span className="muted">at {at}</span>}
      {vm.ports.length > 0 && (
        <span className="muted small" title={vm.ports.map((p) => `${p.guest} → 127.0.0.1:${p.host}`).join(', ')}>
          {vm.ports.length} port{vm.ports.length === 1 ? '' : 's'}
        </span>
      )}
      {vm.network.refused > 0 && <span className="refused-count small">{vm.network.refused} refused</span>}
    </button>
  );
}

/** The bar between the tree and the console: drag it, or focus it and use the arrow keys. */
function PaneSplitter({ share, setShare }: { share: number; setShare: (share: number) => void }) {
  const clamp = (value: number) => Math.round(Math.min(85, Math.max(15, value)));
  return (
    <div
      className="pane-splitter"
      role="separator"
      aria-orientation="horizontal"
      aria-label="Resize the tree and the console"
      aria-valuenow={share}
      aria-valuemin={15}
      aria-valuemax={85}
      tabIndex={0}
      onKeyDown={(e) => {
        if (e.key === 'ArrowUp' || e.key === 'ArrowDown') {
          e.preventDefault();
          setShare(clamp(share + (e.key === 'ArrowUp' ? -5 : 5)));
        }
      }}
      onPointerDown={(e) => {
        const body = e.currentTarget.closest('.episode-body')!.getBoundingClientRect();
        const move = (event: PointerEvent) => setShare(clamp(((event.clientY - body.top) / body.height) * 100));
        const up = () => {
          window.removeEventListener('pointermove', move);
          window.removeEventListener('pointerup', up);
        };
        window.addEventListener('pointermove', move);
        window.addEventListener('pointerup', up);
        e.preventDefault();
      }}
    />
  );
}

export function EpisodeView({ episodeId }: { episodeId: string }) {
  const { store, operations } = useApp();
  const episode = useAppState((s) => s.engine.episodes[episodeId]);
  const vmIds = useAppState(useShallow((s) => shownVmIds(s, episodeId)));
  const vmId = useAppState(selectedVmId);
  const snapshotId = useAppState((s) =>
    s.snapshotId && !s.pendingDeletes.includes(s.snapshotId) ? s.snapshotId : null,
  );
  const [pane, setPane] = useState<'console' | 'terminal' | 'replay'>('console');
  // The tree pane's share of the height (a percentage), or the whole of it.
  const [share, setShare] = useState(42);
  const [maximised, setMaximised] = useState(false);
  // The details pane shows the selection's details, or the episode's activity log.
  const [activity, setActivity] = useState(false);
  const hideAutomatic = useAppState((s) => s.hideAutomatic);
  const away = useAway();
  if (!episode) return null;
  return (
    <section className="episode" aria-label={`Episode ${episode.name}`}>
      <header className="episode-head">
        <button onClick={() => closeEpisode(store)} aria-label="Back to episodes">
          ← Episodes
        </button>
        <h2>{episode.name}</h2>
        {away ? <UnknownState last={episode.state} why={away} /> : <StateBadge state={episode.state} />}
        <span className="muted" title={episode.smolfile.path}>
          {episode.smolfile.path.split('/').at(-1)} · {episode.snapshotCount} snapshots ·{' '}
          {formatBytes(episode.diskBytes)}
        </span>
        <div className="spacer" />
        <button
          className="danger"
          disabled={away !== null}
          title={away ?? undefined}
          onClick={() => operations.deleteEpisode(episodeId)}
        >
          Delete episode
        </button>
      </header>
      {vmIds.length >= VM_PICKER_FROM ? (
        // Many VMs: a search and list of them, and the selected one's tab (VmPicker.tsx).
        <div className="vm-bar many">
          <VmPicker vmIds={vmIds} selected={vmId} />
          <div role="tablist" aria-label="VMs">
            {vmId && <VmTab key={vmId} vmId={vmId} active />}
          </div>
        </div>
      ) : (
        <div className="vm-bar" role="tablist" aria-label="VMs">
          {vmIds.map((id) => (
            <VmTab key={id} vmId={id} active={id === vmId} />
          ))}
          {vmIds.length === 0 && <span className="muted pad">No VMs: fork a snapshot to run one.</span>}
        </div>
      )}
      {vmId && <VmActions vmId={vmId} />}
      <div
        className={`episode-body${maximised ? ' tree-maximised' : ''}`}
        style={maximised ? undefined : { gridTemplateRows: `minmax(120px, ${share}%) minmax(0, 1fr)` }}
      >
        <div className="tree-pane">
          <div className="tree-toolbar small">
            <span className="muted">Fork tree</span>
            <TreePair />
            <div className="spacer" />
            <label className="choice">
              <input
                type="checkbox"
                checked={!hideAutomatic}
                onChange={(e) => setHideAutomatic(store, !e.target.checked)}
              />
              <span>Automatic checkpoints</span>
            </label>
            <button
              onClick={() => setActivity(!activity)}
              aria-pressed={activity}
              title={activity ? 'Show the selection’s details again' : 'The episode’s activity, as a log'}
            >
              Activity
            </button>
            <button
              onClick={() => setMaximised(!maximised)}
              aria-pressed={maximised}
              title={maximised ? 'Give the console its place again' : 'Give the tree the whole height'}
            >
              {maximised ? 'Restore size' : 'Maximise tree'}
            </button>
          </div>
          <ForkTree key={episodeId} episodeId={episodeId} />
        </div>
        <aside className="details-pane">
          {activity ? (
            <ActivityLog episodeId={episodeId} />
          ) : (
            <>
              {vmId && <VmLabels vmId={vmId} />}
              {snapshotId ? (
                <SnapshotDetails snapshotId={snapshotId} />
              ) : (
                <p className="muted pad">Select a snapshot in the tree.</p>
              )}
            </>
          )}
        </aside>
        <div className="bottom-pane">
          {!maximised && <PaneSplitter share={share} setShare={setShare} />}
          <div className="tabs" role="tablist" aria-label="Console, terminal or replay">
            <button role="tab" aria-selected={pane === 'console'} onClick={() => setPane('console')}>
              Console
            </button>
            <button
              role="tab"
              aria-selected={pane === 'terminal'}
              onClick={() => setPane('terminal')}
              title="A shell on a pseudo-terminal in the guest, through its agent"
            >
              Terminal
            </button>
            <button role="tab" aria-selected={pane === 'replay'} onClick={() => setPane('replay')}>
              Replay
            </button>
          </div>
          {vmId ? (
            pane === 'console' ? (
              <Console key={vmId} vmId={vmId} />
            ) : pane === 'terminal' ? (
              <GuestTerminal key={vmId} vmId={vmId} />
            ) : (
              <Replay key={vmId} vmId={vmId} />
            )
          ) : (
            <p className="muted pad">No VM selected.</p>
          )}
        </div>
      </div>
    </section>
  );
}
