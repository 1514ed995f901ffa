// Side by side (issue 24, item 3; docs/ui.md, "Side by side"): two VMs or snapshots next to each other, each with its
// screen, labels and metrics (CompareSide.tsx), swapped or closed from the bar, and "Diff these" for a pair the diff
// API takes (DiffPanel.tsx). The sides come from the address (compare-route.ts); an id the store does not hold is
// asked of the engine, so a reloaded or linked address opens the same view, and a wrong one says what is wrong.
import { useEffect, useState } from 'react';
import { useApp, useAppState } from '../app-context.js';
import { putEpisodeSnapshots } from '../store/app-store.js';
import { call, TransportError } from '../transport/transport.js';
import { CompareSide } from './CompareSide.js';
import { replaceCompare, type CompareRoute } from './compare-route.js';
import { ViewBack } from '../views/ViewBack.js';
import { diffPair, sideOf, type Side } from './compare-sides.js';
import { DiffPanel } from './DiffPanel.js';

/** Asks the engine about ids the store does not hold: a snapshot's episode's snapshots are loaded, a 404 noted. */
function useFetchUnknown(sides: readonly Side[]) {
  const { store, transport } = useApp();
  const [missing, setMissing] = useState<Record<string, string>>({});
  const online = useAppState((s) => s.connection.state === 'open');
  const loadingKey = sides
    .filter((s) => s.kind === 'loading')
    .map((s) => s.id)
    .join(',');
  useEffect(() => {
    if (!online || !loadingKey) return;
    let current = true;
    const note = (id: string, message: string) => current && setMissing((m) => ({ ...m, [id]: message }));
    const failed = (id: string, what: string) => (error: Error) =>
      note(
        id,
        error instanceof TransportError && error.status === 404
          ? `No ${what} ${id} on this engine (deleted, or never here).`
          : `Asking the engine about ${id} failed: ${error.message}`,
      );
    for (const id of loadingKey.split(',')) {
      if (id.startsWith('vm-')) {
        // Known to the engine: the episodes' load brings it; else it says so.
        void call(transport, 'getVm', { params: { vm: id } }).then(() => undefined, failed(id, 'VM'));
        continue;
      }
      void call(transport, 'getSnapshot', { params: { snapshot: id } }).then(
        async (snapshot) => {
          if (!snapshot.episode) {
            return note(id, `Snapshot ${id} is a base snapshot: compare it from an episode that starts from it.`);
          }
          const list = await call(transport, 'listSnapshots', { params: { episode: snapshot.episode } });
          if (current) putEpisodeSnapshots(store, snapshot.episode, list.snapshots);
        },
        failed(id, 'snapshot'),
      );
    }
    return () => {
      current = false;
    };
  }, [online, loadingKey, store, transport]);
  return missing;
}

export function CompareView({ route }: { route: CompareRoute }) {
  const online = useAppState((s) => s.connection.state === 'open');
  const engine = useAppState((s) => s.engine);
  const unknown = [sideOf(engine, route.a, {}), sideOf(engine, route.b, {})];
  const missing = useFetchUnknown(unknown);
  const [a, b] = [sideOf(engine, route.a, missing), sideOf(engine, route.b, missing)];
  const [diffShown, setDiffShown] = useState(false);
  const pair = diffPair(a, b);
  const pairKey = pair.ok ? `${pair.from.id}>${pair.to.id}` : '';
  useEffect(() => setDiffShown(false), [pairKey]);
  const set = (next: CompareRoute) => replaceCompare(next);
  const nothing = route.a === null && route.b === null;
  return (
    <section className="compare" aria-label="Side by side">
      <header className="episode-head">
        <ViewBack />
        <h2>Side by side</h2>
        <div className="spacer" />
        <button
          disabled={route.a === null && route.b === null}
          onClick={() => set({ a: route.b, b: route.a })}
          title="The left side goes right and the right side left"
        >
          Swap sides
        </button>
        <button
          className="primary"
          disabled={!pair.ok || !online}
          aria-describedby={pair.ok ? undefined : 'diff-why'}
          title={pair.ok ? `What changed from ${pair.from.name} to ${pair.to.name}` : pair.why}
          onClick={() => setDiffShown(true)}
        >
          Diff these
        </button>
      </header>
      {!pair.ok && (a.kind === 'vm' || a.kind === 'snapshot') && (b.kind === 'vm' || b.kind === 'snapshot') && (
        <p className="muted pad small" id="diff-why" role="note">
          {pair.why}
        </p>
      )}
      {nothing && (
        <p className="error pad" role="alert">
          The address names nothing to compare: it takes #/compare?a=ID&amp;b=ID with VM or snapshot ids. Choose them
          below, or tick two episodes in the list and press Compare.
        </p>
      )}
      {!online && <p className="muted pad">Waiting for the engine…</p>}
      <div className="compare-sides">
        <CompareSide
          side={a}
          other={b}
          label="Left"
          close={() => set({ a: null, b: route.b })}
          choose={(id) => set({ a: id, b: route.b })}
        />
        <CompareSide
          side={b}
          other={a}
          label="Right"
          close={() => set({ a: route.a, b: null })}
          choose={(id) => set({ a: route.a, b: id })}
        />
      </div>
      {diffShown && pair.ok && <DiffPanel from={pair.from} to={pair.to} close={() => setDiffShown(false)} />}
    </section>
  );
}
