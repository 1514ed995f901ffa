// The UI's entry. In the desktop app the preload bridge is there and carries the API (electron-transport.ts); in web
// mode the engine that served this page is the one to talk to, with the page's token, and the remote engines it
// reaches (engines/engine-stores.ts).
import '@xterm/xterm/css/xterm.css';
import '@xyflow/react/dist/style.css';
import './styles.css';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App.js';
import { installRouting } from './route.js';
import { AppContext } from './app-context.js';
import { connectStore, createAppStore } from './store/app-store.js';
import { MetricsStore } from './store/metrics.js';
import { Operations } from './store/operations.js';
import { installDesktop } from './desktop.js';
import { ElectronTransport, smolBridge } from './transport/electron-transport.js';
import { takePageToken } from './transport/page-token.js';
import type { Transport } from './transport/transport.js';
import { WebTransport } from './transport/web-transport.js';
import { CrashPage } from './views/CrashPage.js';
import { createEngines, EnginesContext } from './engines/engine-stores.js';

const bridge = smolBridge(window);
const transport: Transport = bridge
  ? new ElectronTransport(bridge)
  : new WebTransport(window.location.origin, takePageToken(window.location, window.history, window.sessionStorage));
const store = createAppStore();
const operations = new Operations(store, transport);
const metrics = new MetricsStore(transport);
connectStore(store, transport, requestAnimationFrame, metrics);
installRouting(store, window);
const app = { store, operations, transport, metrics };
const engines = createEngines(app, window);
if (bridge) installDesktop(app, bridge);

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <AppContext.Provider value={app}>
      <EnginesContext.Provider value={engines}>
        <CrashPage>
          <App />
        </CrashPage>
      </EnginesContext.Provider>
    </AppContext.Provider>
  </StrictMode>,
);
