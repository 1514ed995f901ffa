// The episodes: live status, uptime, snapshot count and disk use, search, and ticked rows for bulk actions. Each
// row subscribes to its own episode only, so an event about one episode re-renders one row.
// CPU and memory sparklines sum the episode's running VMs (metrics events, Sparkline.tsx). A click on a column's
// header sorts by it, again the other way (sort-order.ts: kept across reloads); newest first until then.
// With remote engines added (docs/remote.md), an Engine column and filter: every engine's episodes in one list sorted
// by the chosen column, each row drawn from its own engine's store (engines/engine-stores.ts); an engine out of reach
// keeps its rows, marked unreachable with the state they were last seen in, or says so in one row.
import { memo, useEffect, useMemo, useRef, useState } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { AppContext, useApp, useAppState, type App } from '../app-context.js';
import { useEngines, useEnginesState, type RemoteEngine } from '../engines/engine-stores.js';
import { useNow } from '../clock.js';
import { formatBytes, formatDuration, formatTime } from '../format.js';
import { sortBy, useSortOrder, type SortOrder } from '../sort-order.js';
import type { AppState, AppStore } from '../store/app-store.js';
import {
  connected,
  deleteTicked,
  openDialog,
  openEpisode,
  setSearch,
  setTicked,
  toggleTicked,
} from '../store/selection.js';
import { showCompare } from '../compare/compare-route.js';
import { episodeVm } from '../compare/compare-sides.js';
import { SortHeader } from './SortHeader.js';
import { Sparklines } from './Sparkline.js';
import { StateBadge, UnknownState } from './StateBadge.js';

const COLUMNS = ['name', 'state', 'vms', 'uptime', 'snapshots', 'disk', 'created'] as const;
type Column = (typeof COLUMNS)[number];
const NEWEST_FIRST: SortOrder<Column> = { column: 'created', direction: 'desc' };

/**
 * What an episode sorts by in `column` (created: the engine's order, which is the order of creation; across several
 * engines its creation time, ties in each engine's order).
 */
function sortKey(s: AppState, id: string, column: Column, several = false): string | number {
  const episode = s.engine.episodes[id]!;
  switch (column) {
    case 'name':
      return episode.name;
    case 'state':
      return episode.state;
    case 'vms':
      return episode.vmIds.length;
    case 'uptime': {
      // The earliest start among its running VMs, as a number that grows with the uptime; not running: none.
      const since = episode.vmIds
        .map((vm) => s.engine.vms[vm]?.runningSince)
        .filter((t): t is string => !!t)
        .map((t) => Date.parse(t));
      return since.length ? -Math.min(...since) : -Number.MAX_VALUE;
    }
    case 'snapshots':
      return episode.snapshotCount;
    case 'disk':
      return episode.diskBytes;
    case 'created':
      return several ? Date.parse(episode.created) : s.engine.episodeIds.indexOf(id);
  }
}

function Uptime({ since }: { since: string }) {
  const now = useNow();
  return <>{formatDuration(now - Date.parse(since))}</>;
}

/** Rows have one height, so only those in view are rendered (a thousand episodes stay quick). */
const ROW_HEIGHT = 44;
const OVERSCAN = 12;

/** The rows of a scrolling list that are in view, with the space above and below them. */
function useWindow(count: number) {
  const scroller = useRef<HTMLDivElement>(null);
  const [view, setView] = useState({ top: 0, height: 900 });
  useEffect(() => {
    const element = scroller.current;
    if (!element) return;
    let frame = 0;
    const measure = () => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => setView({ top: element.scrollTop, height: element.clientHeight || 900 }));
    };
    element.addEventListener('scroll', measure, { passive: true });
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    return () => {
      cancelAnimationFrame(frame);
      element.removeEventListener('scroll', measure);
      observer.disconnect();
    };
  }, []);
  const first = Math.max(0, Math.floor(view.top / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(count, Math.ceil((view.top + view.height) / ROW_HEIGHT) + OVERSCAN);
  return { scroller, first, last, above: first * ROW_HEIGHT, below: (count - last) * ROW_HEIGHT };
}

/** The Engine cell of a row: the engine's name, and whether it is out of reach now. */
function EngineCell({ name }: { name: string }) {
  const connection = useAppState((s) => s.connection);
  return (
    <td className="engine-cell">
      {name}
      {connection.state === 'closed' && (
        <div className="sub unreachable" title={connection.why ?? undefined}>
          unreachable
        </div>
      )}
    </td>
  );
}

const EpisodeRow = memo(function EpisodeRow({
  id,
  index,
  engine,
}: {
  id: string;
  index: number;
  /** The Engine column's name (`local` or a remote engine's), or null when there is no such column. */
  engine: string | null;
}) {
  const { store } = useApp();
  const away = useAppState((s) => engine !== null && engine !== 'local' && s.connection.state === 'closed');
  const episode = useAppState((s) => s.engine.episodes[id]);
  const ticked = useAppState((s) => s.ticked.includes(id));
  const busy = useAppState((s) => s.busy[`episode:${id}`]);
  // The earliest start among its running VMs: how long the episode has been running.
  const since = useAppState((s) => {
    const times = (s.engine.episodes[id]?.vmIds ?? []).map((vm) => s.engine.vms[vm]?.runningSince).filter(Boolean);
    return times.length ? (times as string[]).sort()[0]! : null;
  });
  const vmCount = useAppState((s) => s.engine.episodes[id]?.vmIds.length ?? 0);
  const running = useAppState(
    useShallow((s) =>
      (s.engine.episodes[id]?.vmIds ?? []).filter((vm) =>
        ['running', 'paused'].includes(s.engine.vms[vm]?.state ?? ''),
      ),
    ),
  );
  // Why a crashed or stopped episode ended: its first VM's exit.
  const exit = useAppState((s) => {
    const vm = (s.engine.episodes[id]?.vmIds ?? []).map((v) => s.engine.vms[v]).find((v) => v?.exit);
    return vm?.exit ? `${vm.exit.reason}${vm.exit.message ? `: ${vm.exit.message}` : ''}` : null;
  });
  if (!episode) return null;
  const open = () => openEpisode(store, id, episode.vmIds[0] ?? null);
  const tick = () => toggleTicked(store, id);
  return (
    <tr
      className={[ticked && 'ticked', away && 'away'].filter(Boolean).join(' ') || undefined}
      aria-selected={ticked}
      aria-rowindex={index + 2}
    >
      <td className="check">
        {/* Bulk actions are the local engine's: a remote engine's rows have no box. */}
        {(engine === null || engine === 'local') && (
          <input type="checkbox" checked={ticked} onChange={tick} aria-label={`Select ${episode.name}`} />
        )}
      </td>
      <td>
        <button className="link" onClick={open} aria-label={`Open episode ${episode.name}`}>
          {episode.name}
        </button>
        <div className="sub" title={episode.smolfile.path}>
          {episode.smolfile.path.split('/').at(-1)}
        </div>
      </td>
      {engine !== null && <EngineCell name={engine} />}
      <td>
        {away ? (
          // Its engine is out of reach: the state now is unknown; the one last seen is kept, dimmed.
          <UnknownState last={episode.state} why={`unknown while ${engine} is unreachable`} under />
        ) : (
          <>
            <StateBadge state={episode.state} />
            {busy && <span className="busy">{busy}</span>}
            {exit && episode.state !== 'running' && (
              <div className="sub" title={exit}>
                {exit}
              </div>
            )}
          </>
        )}
      </td>
      <td className="num">{vmCount}</td>
      <td className="num">{since && !away ? <Uptime since={since} /> : '—'}</td>
      <td className="spark">
        {running.length > 0 && !away ? <Sparklines vmIds={running} fromCgroup /> : <span className="muted">—</span>}
      </td>
      <td className="num">{episode.snapshotCount}</td>
      <td className="num">{formatBytes(episode.diskBytes)}</td>
      <td className="num">{formatTime(episode.created)}</td>
    </tr>
  );
});

/** The ids of `s`'s episodes that `search` matches, in the engine's order. */
function matching(s: AppState, search: string): string[] {
  const needle = search.trim().toLowerCase();
  return s.engine.episodeIds.filter((id) => {
    if (s.pendingDeletes.includes(id)) return false;
    const episode = s.engine.episodes[id];
    if (!episode) return false;
    if (!needle) return true;
    const names = episode.vmIds.map((vm) => s.engine.vms[vm]?.name ?? '');
    return [episode.name, episode.id, episode.state, episode.smolfile.path, ...names].some((text) =>
      text.toLowerCase().includes(needle),
    );
  });
}

/** A row of the list: an episode of the local engine (`app` null) or of the remote engine `engine`. */
interface Row {
  key: string;
  id: string;
  engine: string;
  app: App | null;
}

interface Listed {
  rows: Row[];
  /** Every shown engine's episodes, matching or not. */
  total: number;
  /** The remote engines out of reach (or connecting) with nothing loaded: one row each, saying so. */
  notes: { name: string; state: 'connecting' | 'closed'; why: string | null }[];
}

/**
 * The rows of every engine shown (`remotes` beside the local one, unless `filter` picks one) that `search` matches,
 * in one `order`: re-sorted when any of their stores' episodes, VMs or connection change.
 */
function useRows(
  local: AppStore,
  remotes: RemoteEngine[],
  filter: string | null,
  search: string,
  order: SortOrder<Column>,
): Listed {
  const [version, setVersion] = useState(0);
  const stores = useMemo(() => [local, ...remotes.map((e) => e.app.store)], [local, remotes]);
  useEffect(() => {
    const unsubscribe = stores.map((store) =>
      store.subscribe((state, previous) => {
        if (
          state.engine.episodeIds !== previous.engine.episodeIds ||
          state.engine.episodes !== previous.engine.episodes ||
          state.engine.vms !== previous.engine.vms ||
          state.pendingDeletes !== previous.pendingDeletes ||
          state.connection !== previous.connection
        )
          setVersion((v) => v + 1);
      }),
    );
    return () => unsubscribe.forEach((stop) => stop());
  }, [stores]);
  return useMemo(() => {
    const several = remotes.length > 0;
    const engines = [
      { name: 'local', app: null as App | null, store: local },
      ...remotes.map((e) => ({ name: e.name, app: e.app as App | null, store: e.app.store })),
    ].filter((e) => filter === null || filter === e.name);
    const keyed: { row: Row; key: string | number; tie: number }[] = [];
    const notes: Listed['notes'] = [];
    let total = 0;
    for (const engine of engines) {
      const s = engine.store.getState();
      if (engine.app && s.engine.episodeIds.length === 0 && s.connection.state !== 'open') {
        notes.push({ name: engine.name, state: s.connection.state, why: s.connection.why ?? null });
        continue;
      }
      total += s.engine.episodeIds.filter((id) => !s.pendingDeletes.includes(id)).length;
      matching(s, search).forEach((id, index) =>
        keyed.push({
          row: { key: `${engine.name}\n${id}`, id, engine: engine.name, app: engine.app },
          key: sortKey(s, id, order.column, several),
          tie: index,
        }),
      );
    }
    const rows = sortBy(
      keyed,
      (k) => k.key,
      order.direction,
      (k) => k.tie,
    ).map((k) => k.row);
    return { rows, total, notes };
    // `version` stands for the stores' contents, read with getState() above.
  }, [version, local, remotes, filter, search, order]);
}

const COLUMN_COUNT = 10;

/** A remote engine out of reach with nothing loaded: one row saying so. */
function EngineNote({ name, state, why }: Listed['notes'][number]) {
  return (
    <tr className="engine-note" aria-label={`Engine ${name}`}>
      <td className="check" />
      <td colSpan={COLUMN_COUNT - 1} className={state === 'closed' ? 'unreachable' : 'muted'}>
        {name}: {state === 'closed' ? `unreachable (${why ?? 'no answer'}), retrying` : 'connecting…'}
      </td>
    </tr>
  );
}

/** All engines, or one: shown once a remote engine is added. */
function EngineFilter() {
  const engines = useEngines();
  const names = useEnginesState(useShallow((s) => s.engines.map((e) => e.name)));
  const filter = useEnginesState((s) => s.filter);
  return (
    <select
      aria-label="Filter by engine"
      value={filter ?? ''}
      onChange={(e) => engines.setFilter(e.target.value || null)}
    >
      <option value="">All engines</option>
      <option value="local">local</option>
      {names.map((name) => (
        <option key={name} value={name}>
          {name}
        </option>
      ))}
    </select>
  );
}

export function EpisodeList() {
  const { store, operations } = useApp();
  const search = useAppState((s) => s.search);
  const ticked = useAppState(useShallow((s) => s.ticked));
  const online = useAppState(connected);
  const total = useAppState((s) => s.engine.episodeIds.filter((id) => !s.pendingDeletes.includes(id)).length);
  const connection = useAppState((s) => s.connection.state);
  const [order, sortOn] = useSortOrder('episodes', COLUMNS, NEWEST_FIRST);
  const remotes = useEnginesState((s) => s.engines);
  const filter = useEnginesState((s) => s.filter);
  const several = remotes.length > 0;
  const { rows, total: shownTotal, notes } = useRows(store, remotes, several ? filter : null, search, order);
  // Bulk actions are the local engine's: select-all ticks its shown rows.
  const ids = useMemo(() => rows.filter((r) => r.app === null).map((r) => r.id), [rows]);
  const { scroller, first, last, above, below } = useWindow(rows.length);
  const allTicked = ids.length > 0 && ids.every((id) => ticked.includes(id));
  return (
    <section className="episodes" aria-label="Episodes">
      <div className="toolbar">
        <input
          type="search"
          id="episode-search"
          placeholder="Search episodes  /"
          aria-label="Search episodes"
          value={search}
          onChange={(e) => setSearch(store, e.target.value)}
        />
        {several && <EngineFilter />}
        <div className="spacer" />
        <span className="muted" aria-live="polite">
          {ticked.length > 0 ? `${ticked.length} selected` : `${rows.length} of ${several ? shownTotal : total}`}
        </span>
        <button disabled={ticked.length === 0 || !online} onClick={() => void operations.bulk('checkpoint', ticked)}>
          Checkpoint selected
        </button>
        <button disabled={ticked.length === 0 || !online} onClick={() => void operations.bulk('stop', ticked)}>
          Stop selected
        </button>
        <button
          className="danger"
          disabled={ticked.length === 0 || !online}
          onClick={() => deleteTicked({ store, operations }, ticked)}
        >
          Delete selected
        </button>
        <button
          disabled={ticked.length !== 2}
          title="Two ticked episodes side by side (each by its live VM, else its first)"
          onClick={() => {
            const engine = store.getState().engine;
            showCompare(store, episodeVm(engine, ticked[0]!), episodeVm(engine, ticked[1]!));
          }}
        >
          Compare
        </button>
        <button disabled={!online} onClick={() => openDialog(store, { kind: 'open-machine' })}>
          Open machine…
        </button>
        <button className="primary" onClick={() => openDialog(store, { kind: 'new-episode' })}>
          New episode
        </button>
      </div>
      {total === 0 && !several ? (
        <div className="empty">
          <h2>No episodes yet</h2>
          {connection === 'open' ? (
            <>
              <p>Start one from a Smolfile here, or from a terminal:</p>
              <pre>smol up -f smolfiles/echo.smolfile</pre>
              <button className="primary" onClick={() => openDialog(store, { kind: 'new-episode' })}>
                New episode
              </button>
            </>
          ) : (
            <p>Waiting for the engine…</p>
          )}
        </div>
      ) : (
        <div className="table-scroll" ref={scroller}>
          <table className="grid" aria-rowcount={rows.length + 1}>
            <thead>
              <tr>
                <th className="check">
                  <input
                    type="checkbox"
                    aria-label="Select all shown episodes"
                    checked={allTicked}
                    onChange={() => setTicked(store, allTicked ? [] : ids)}
                  />
                </th>
                <SortHeader column="name" order={order} choose={sortOn}>
                  Episode
                </SortHeader>
                {several && <th>Engine</th>}
                <SortHeader column="state" order={order} choose={sortOn}>
                  State
                </SortHeader>
                <SortHeader column="vms" order={order} choose={sortOn} className="num">
                  VMs
                </SortHeader>
                <SortHeader column="uptime" order={order} choose={sortOn} className="num">
                  Uptime
                </SortHeader>
                <th>CPU · memory</th>
                <SortHeader column="snapshots" order={order} choose={sortOn} className="num">
                  Snapshots
                </SortHeader>
                <SortHeader column="disk" order={order} choose={sortOn} className="num">
                  Disk
                </SortHeader>
                <SortHeader column="created" order={order} choose={sortOn} className="num">
                  Created
                </SortHeader>
              </tr>
            </thead>
            <tbody>
              {above > 0 && <tr className="spacer-row" style={{ height: above }} aria-hidden="true" />}
              {rows.slice(first, last).map((row, i) =>
                row.app ? (
                  <AppContext.Provider key={row.key} value={row.app}>
                    <EpisodeRow id={row.id} index={first + i} engine={row.engine} />
                  </AppContext.Provider>
                ) : (
                  <EpisodeRow key={row.key} id={row.id} index={first + i} engine={several ? 'local' : null} />
                ),
              )}
              {below > 0 && <tr className="spacer-row" style={{ height: below }} aria-hidden="true" />}
              {notes.map((note) => (
                <EngineNote key={note.name} {...note} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      {total > 0 && rows.length === 0 && !several && <p className="empty">No episode matches “{search}”.</p>}
    </section>
  );
}
