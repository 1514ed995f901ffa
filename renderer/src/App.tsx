// The window: a top bar with the connection's state, the episodes list or an open episode, and the overlays.
import { useEffect } from 'react';
import { useStore } from 'zustand';
import { AppContext, useApp, useAppState } from './app-context.js';
import { installMachineDrop } from './machine-drop.js';
import { installShortcuts } from './shortcuts.js';
import { smolBridge } from './transport/electron-transport.js';
import { createAppStore } from './store/app-store.js';
import { closeEpisode, setPaletteOpen } from './store/selection.js';
import { CommandPalette } from './views/CommandPalette.js';
import { Dialogs } from './views/Dialogs.js';
import { EnginesButton } from './engines/EnginesDialog.js';
import { useEngines, useEnginesState } from './engines/engine-stores.js';
import { EpisodeList } from './views/EpisodeList.js';
import { EpisodeView } from './views/EpisodeView.js';
import { ImagesView } from './images/ImagesView.js';
import { showImages, useImagesOpen } from './images/images-route.js';
import { Toasts } from './views/Toasts.js';
import { CompareView } from './compare/CompareView.js';
import { useCompareRoute } from './compare/compare-route.js';

function Connection() {
  const { state, why } = useAppState((s) => s.connection);
  const label =
    state === 'open'
      ? 'Engine connected'
      : state === 'connecting'
        ? 'Connecting to the engine…'
        : `Engine unreachable: ${why}`;
  return (
    <span className={`connection ${state}`} role="status" title={label}>
      <span className="dot" aria-hidden="true" />
      {state === 'open' ? 'connected' : state === 'connecting' ? 'connecting…' : `disconnected: ${why ?? ''}`}
    </span>
  );
}

/** While the engine is out of reach: what that means, shown over the page until it is back. */
function Disconnected() {
  const { state, why } = useAppState((s) => s.connection);
  if (state !== 'closed') return null;
  return (
    <div className="disconnected" role="alert">
      <strong>The engine is out of reach</strong> ({why ?? 'no answer'}). What you see is as it was; actions are off
      until it is back, and this page keeps trying: the next engine of this data dir is served at this address with the
      same token (<code>smol serve</code> keeps both). Only if <code>smol serve</code> says this port was taken, or its
      token was replaced, open the URL it prints.
    </div>
  );
}

/** A remote engine's open episode: the same views over that engine's store (engines/engine-stores.ts). */
function RemoteEpisode({ name }: { name: string }) {
  const engine = useEnginesState((s) => s.engines.find((e) => e.name === name));
  const episodeId = useStore(engine?.app.store ?? NO_STORE, (s) => s.episodeId);
  if (!engine || !episodeId) return null;
  return (
    <AppContext.Provider value={engine.app}>
      <p className="engine-banner" role="status">
        Engine <strong>{name}</strong>: <RemoteConnection />
      </p>
      <EpisodeView episodeId={episodeId} />
      <Dialogs />
      <Toasts />
    </AppContext.Provider>
  );
}

/** The remote engine's reachability, where the local one's out-of-reach wall would be. */
function RemoteConnection() {
  const { state, why } = useAppState((s) => s.connection);
  return state === 'open' ? (
    <>connected</>
  ) : state === 'connecting' ? (
    <>connecting…</>
  ) : (
    <span className="unreachable">unreachable ({why ?? 'no answer'}), retrying; actions are off until it is back</span>
  );
}

const NO_STORE = createAppStore();

export function App() {
  const app = useApp();
  const engines = useEngines();
  const remoteOpen = useEnginesState((s) => s.open);
  const episodeId = useAppState((s) => s.episodeId);
  const imagesOpen = useImagesOpen();
  const compare = useCompareRoute();
  // The brand goes to the list, from an episode of any engine or a view.
  const home = () => {
    if (imagesOpen || compare) return void (window.location.hash = '#/');
    const remote = engines.store.getState().engines.find((e) => e.name === remoteOpen);
    closeEpisode(remote?.app.store ?? app.store);
  };
  const stores = () => [app.store, ...engines.store.getState().engines.map((e) => e.app.store)];
  useEffect(() => installShortcuts(app, window, () => engines.active()), [app, engines]);
  useEffect(() => installMachineDrop(app.store, window, smolBridge(window)), [app]);
  // Consoles of VMs that are gone end with them.
  useEffect(
    () =>
      app.store.subscribe((state, previous) => {
        if (state.engine.vms !== previous.engine.vms) engines.pruneConsoles();
      }),
    [app, engines],
  );
  return (
    <div className="app">
      <header className="topbar">
        <button className="brand link" onClick={home}>
          Smol Studio
        </button>
        <Connection />
        <div className="spacer" />
        <EnginesButton />
        <button onClick={() => showImages(stores())} aria-pressed={imagesOpen}>
          Images
        </button>
        <button onClick={() => setPaletteOpen(app.store, true)} aria-label="Open the command palette">
          Commands <kbd>Ctrl K</kbd>
        </button>
      </header>
      <Disconnected />
      <main>
        {imagesOpen ? (
          <ImagesView />
        ) : compare ? (
          <CompareView route={compare} />
        ) : episodeId ? (
          <EpisodeView episodeId={episodeId} />
        ) : remoteOpen ? (
          <RemoteEpisode name={remoteOpen} />
        ) : (
          <EpisodeList />
        )}
      </main>
      <Dialogs />
      <CommandPalette />
      <Toasts />
    </div>
  );
}
