// One side of the compare view: what it is (name, id, episode, state), its screen (a VM's live console, or a
// snapshot's screen as it was when taken, read-only), its labels (editable as in the details pane) and its metrics
// (a VM's live CPU and memory; a snapshot stores none, which it says, with the size it was taken at).
import { useShallow } from 'zustand/react/shallow';
import { useApp, useAppState } from '../app-context.js';
import { Console } from '../console/Console.js';
import { formatBytes, formatTime } from '../format.js';
import { LabelsEditor } from '../views/LabelsEditor.js';
import { LastScreen } from '../views/SnapshotDetails.js';
import { Sparklines } from '../views/Sparkline.js';
import { StateBadge } from '../views/StateBadge.js';
import type { Side } from './compare-sides.js';

const LIVE = new Set(['running', 'paused']);

function VmSide({ vmId }: { vmId: string }) {
  const { operations } = useApp();
  const vm = useAppState((s) => s.engine.vms[vmId]);
  if (!vm) return null;
  return (
    <>
      <div className="compare-screen">
        <Console vmId={vm.id} />
      </div>
      <h4>Labels</h4>
      <LabelsEditor
        what={`VM ${vm.name}`}
        labels={vm.labels}
        busyKey={`vm-labels:${vm.id}`}
        save={(labels) => operations.labelVm(vm.id, labels)}
      />
      <h4>Metrics</h4>
      {LIVE.has(vm.state) ? (
        <div data-testid="compare-metrics">
          <Sparklines vmIds={[vm.id]} />
        </div>
      ) : (
        <p className="muted small" data-testid="compare-metrics">
          No live figures: the VM is {vm.state}.
        </p>
      )}
    </>
  );
}

function SnapshotSide({ snapshotId }: { snapshotId: string }) {
  const { operations } = useApp();
  const snapshot = useAppState((s) => s.engine.snapshots[snapshotId]);
  const takerKnown = useAppState((s) => {
    const id = s.engine.snapshots[snapshotId]?.vm;
    return !!id && id in s.engine.vms;
  });
  if (!snapshot) return null;
  return (
    <>
      <div className="compare-screen snapshot-screen" aria-label={`Screen of snapshot ${snapshot.name} when taken`}>
        {snapshot.vm && takerKnown ? (
          <LastScreen vmId={snapshot.vm} snapshotId={snapshot.id} />
        ) : (
          <p className="muted pad">No screen: the VM that took it is gone, and its recording with it.</p>
        )}
      </div>
      <h4>Labels</h4>
      <LabelsEditor
        what={`snapshot ${snapshot.name}`}
        labels={snapshot.labels}
        busyKey={`snapshot-labels:${snapshot.id}`}
        save={(labels) => operations.labelSnapshot(snapshot.id, labels)}
      />
      <h4>Metrics</h4>
      <p className="muted small" data-testid="compare-metrics">
        None stored: a snapshot keeps no CPU or memory figures. Taken with {formatBytes(snapshot.memoryBytes)} of memory
        and {snapshot.cpus} vCPU; {formatBytes(snapshot.diskBytes)} on disk.
      </p>
    </>
  );
}

/** The side's heading: name, kind, state or kind of snapshot, episode and id. */
function Heading({ side }: { side: Extract<Side, { kind: 'vm' | 'snapshot' }> }) {
  const episodeId = side.kind === 'vm' ? side.vm.episode : side.snapshot.episode;
  const episodeName = useAppState((s) => (episodeId ? (s.engine.episodes[episodeId]?.name ?? episodeId) : null));
  const at = useAppState((s) => {
    if (side.kind !== 'vm' || !side.vm.snapshot) return null;
    return s.engine.snapshots[side.vm.snapshot]?.name ?? null;
  });
  return (
    <div className="compare-heading">
      <h3>
        {side.kind === 'vm' ? 'VM' : 'Snapshot'} {side.kind === 'vm' ? side.vm.name : side.snapshot.name}
      </h3>
      {side.kind === 'vm' ? (
        <StateBadge state={side.vm.state} />
      ) : (
        <span className="muted">
          {side.snapshot.kind} · taken {formatTime(side.snapshot.created)}
        </span>
      )}
      <div className="muted small">
        episode {episodeName ?? '— (a base snapshot)'}
        {at && ` · at ${at}`} · <span className="mono">{side.id}</span>
      </div>
    </div>
  );
}

/** What the address names for an empty side: any VM, or a snapshot of the other side's episode. */
function Chooser({ other, choose }: { other: Side; choose: (id: string) => void }) {
  const otherEpisode =
    other.kind === 'vm' ? other.vm.episode : other.kind === 'snapshot' ? other.snapshot.episode : null;
  const vms = useAppState(
    useShallow((s) =>
      Object.values(s.engine.vms)
        .filter((vm) => vm.state !== 'destroyed')
        .map((vm) => `${vm.id}\tVM ${vm.name} (${s.engine.episodes[vm.episode]?.name ?? vm.episode})`),
    ),
  );
  const snapshots = useAppState(
    useShallow((s) =>
      (otherEpisode ? (s.engine.timeline[otherEpisode] ?? []) : [])
        .map((id) => s.engine.snapshots[id])
        .filter((sn) => sn !== undefined)
        .map((sn) => `${sn.id}\tsnapshot ${sn.name}`),
    ),
  );
  const otherId = other.kind === 'vm' || other.kind === 'snapshot' ? other.id : null;
  // Strings, not objects, from the selectors: useShallow compares the items by identity.
  const options = [...vms, ...snapshots]
    .map((line) => ({ id: line.slice(0, line.indexOf('\t')), text: line.slice(line.indexOf('\t') + 1) }))
    .filter((o) => o.id !== otherId);
  return (
    <div className="compare-empty">
      <p className="muted">Nothing on this side. Choose what to put here:</p>
      <select aria-label="Choose the other side" value="" onChange={(e) => e.target.value && choose(e.target.value)}>
        <option value="">A VM or a snapshot…</option>
        {options.map((o) => (
          <option key={o.id} value={o.id}>
            {o.text}
          </option>
        ))}
      </select>
    </div>
  );
}

export function CompareSide({
  side,
  label,
  other,
  close,
  choose,
}: {
  side: Side;
  /** "Left" or "Right" (above and below in a narrow window): the region's name. */
  label: string;
  other: Side;
  close: () => void;
  choose: (id: string) => void;
}) {
  const closeButton = (
    <button onClick={close} aria-label={`Close the ${label.toLowerCase()} side`} title="Close this side">
      ×
    </button>
  );
  return (
    <section className="compare-side" aria-label={`${label} side`}>
      {side.kind === 'vm' || side.kind === 'snapshot' ? (
        <>
          <div className="compare-side-bar">
            <Heading side={side} />
            <div className="spacer" />
            {closeButton}
          </div>
          {side.kind === 'vm' ? (
            <VmSide key={side.id} vmId={side.id} />
          ) : (
            <SnapshotSide key={side.id} snapshotId={side.id} />
          )}
        </>
      ) : side.kind === 'loading' ? (
        <p className="muted pad" role="status">
          Loading snapshot {side.id}…
        </p>
      ) : side.kind === 'problem' ? (
        <div className="compare-problem">
          <p className="error" role="alert">
            {side.message}
          </p>
          {closeButton}
        </div>
      ) : (
        <Chooser other={other} choose={choose} />
      )}
    </section>
  );
}
