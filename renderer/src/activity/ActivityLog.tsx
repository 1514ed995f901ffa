// The episode's activity (activity.ts) as a log in the details pane: a toggle per kind, a search, and rows that select
// what they name on a click (the snapshot in the tree, which brings it into view, and the VM, whose console and
// replay then show). docs/ui.md "Activity".
import { useMemo, useState } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useApp, useAppState } from '../app-context.js';
import { formatTime } from '../format.js';
import { snapshotsOf } from '../store/engine-state.js';
import { selectSnapshot, selectVm } from '../store/selection.js';
import { ACTIVITY_KINDS, activityOf, filterActivity, type ActivityKind } from './activity.js';

export function ActivityLog({ episodeId }: { episodeId: string }) {
  const { store } = useApp();
  const episode = useAppState((s) => s.engine.episodes[episodeId]);
  const vms = useAppState(
    useShallow((s) => (episode?.vmIds ?? []).map((id) => s.engine.vms[id]).filter((vm) => vm !== undefined)),
  );
  const timeline = useAppState((s) => s.engine.timeline[episodeId]);
  const snapshotsById = useAppState((s) => s.engine.snapshots);
  const refusals = useAppState((s) => s.engine.refusals);
  const selected = useAppState((s) => s.snapshotId);
  const [kinds, setKinds] = useState<ReadonlySet<ActivityKind>>(new Set(ACTIVITY_KINDS));
  const [query, setQuery] = useState('');
  const rows = useMemo(() => {
    if (!episode) return [];
    const snapshots = snapshotsOf(episode.base, timeline, snapshotsById);
    return activityOf({ episode, vms, snapshots, refusals });
  }, [episode, vms, timeline, snapshotsById, refusals]);
  const counts = useMemo(() => {
    const map = new Map<ActivityKind, number>();
    for (const row of rows) map.set(row.kind, (map.get(row.kind) ?? 0) + 1);
    return map;
  }, [rows]);
  const shown = filterActivity(rows, kinds, query);
  const live = new Set(vms.map((vm) => vm.id));
  if (!episode) return null;
  const toggle = (kind: ActivityKind) => {
    const next = new Set(kinds);
    if (next.has(kind)) next.delete(kind);
    else next.add(kind);
    setKinds(next);
  };
  return (
    <section className="details activity" aria-label="Activity">
      <h3>Activity</h3>
      <div className="activity-kinds row wrap small" role="group" aria-label="Show these kinds">
        {ACTIVITY_KINDS.map((kind) => (
          <button
            key={kind}
            className={`activity-kind kind-${kind}`}
            aria-pressed={kinds.has(kind)}
            onClick={() => toggle(kind)}
          >
            {kind} {counts.get(kind) ?? 0}
          </button>
        ))}
      </div>
      <input
        type="search"
        placeholder="Filter the log"
        aria-label="Filter the activity"
        value={query}
        onChange={(e) => setQuery(e.target.value)}
      />
      <p className="muted small">
        {shown.length} of {rows.length}
      </p>
      <ol className="activity-list" aria-label="Activity log">
        {shown.map((row) => (
          <li key={row.id}>
            <button
              className={`activity-row${row.snapshot && row.snapshot === selected ? ' selected' : ''}`}
              title={row.snapshot ? 'Select it in the tree' : row.vm ? 'Select the VM' : undefined}
              disabled={!row.snapshot && !(row.vm && live.has(row.vm))}
              onClick={() => {
                if (row.vm && live.has(row.vm)) selectVm(store, row.vm);
                if (row.snapshot) selectSnapshot(store, row.snapshot);
              }}
            >
              <span className="activity-time mono">{row.at ? formatTime(row.at) : '—'}</span>
              <span className={`activity-kind-badge kind-${row.kind}`}>{row.kind}</span>
              <span className="activity-text">{row.text}</span>
            </button>
          </li>
        ))}
        {shown.length === 0 && <li className="muted">Nothing of these kinds{query ? ` matches “${query}”` : ''}.</li>}
      </ol>
    </section>
  );
}
