// The Electron main process (docs/electron.md): one window on smol-app://, the preload bridge, the menu, the tray
// and notifications, and a link to the data dir's engine. Its decisions live in pure modules (app-security.ts,
// app-protocol.ts, ipc-contract.ts, ipc-bridge.ts, window-state.ts, app-menu.ts); this file only applies them.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  app,
  BrowserWindow,
  dialog,
  ipcMain,
  Menu,
  nativeImage,
  net,
  Notification,
  protocol,
  screen,
  session,
  shell,
  Tray,
} from 'electron';
import type { Episode } from '../../src/api/schema.js';
import { enginePaths } from '../../src/engine/engine-paths.js';
import { packageRoot } from '../../src/package-root.js';
import { smolHomeDir } from '../../src/smol-dirs.js';
import { appMenuTemplate, shouldNotify, trayMenuTemplate, trayTooltip, type MenuCommand } from './app-menu.js';
import { resolveAppRequest } from './app-protocol.js';
import { APP_ENTRY, APP_SCHEME, appWindowOptions, externalUrl, isAppNavigation } from './app-security.js';
import { linkEngine, type EngineLink } from './engine-link.js';
import { IpcBridge } from './ipc-bridge.js';
import { CHANNELS, PUSH_CHANNELS } from './ipc-contract.js';
import { restoreWindowState, serializeWindowState } from './window-state.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const PRELOAD = path.join(here, '..', 'preload', 'preload.cjs');
const RENDERER_ROOT = path.join(packageRoot, 'dist', 'renderer');
const ICON = path.join(packageRoot, 'resources', 'icons', 'smol.png');
const dev = !app.isPackaged;

protocol.registerSchemesAsPrivileged([
  { scheme: APP_SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: false, corsEnabled: false } },
]);

if (!app.requestSingleInstanceLock()) app.quit();

const home = path.resolve(smolHomeDir());
const stateFile = () => path.join(app.getPath('userData'), 'window-state.json');
let window: BrowserWindow | null = null;
let link: EngineLink | null = null;
let tray: Tray | null = null;
let episodes: Episode[] = [];
let quitting = false;

function readText(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function sendCommand(command: MenuCommand): void {
  showWindow();
  window?.webContents.send(PUSH_CHANNELS.menuCommand, command);
}

function showWindow(): void {
  if (!window) return;
  if (window.isMinimized()) window.restore();
  window.show();
  window.focus();
}

function createWindow(engine: EngineLink): BrowserWindow {
  const restored = restoreWindowState(
    readText(stateFile()),
    screen.getAllDisplays().map((d) => d.workArea),
  );
  if (restored.ignored) console.warn(`smol: ${restored.ignored}; opening with the default size`);
  const win = new BrowserWindow(appWindowOptions(restored.bounds, PRELOAD));
  if (restored.maximized) win.maximize();
  win.once('ready-to-show', () => win.show());
  const save = () => {
    try {
      writeFileSync(stateFile(), serializeWindowState(win.getNormalBounds(), win.isMaximized()));
    } catch (error) {
      console.warn(`smol: cannot save the window state: ${(error as Error).message}`);
    }
  };
  win.on('close', save);

  const contents = win.webContents;
  // Navigation and new windows are denied; http(s) links go to the system browser after validation.
  contents.setWindowOpenHandler(({ url }) => {
    const external = externalUrl(url);
    if (external) void shell.openExternal(external);
    return { action: 'deny' };
  });
  contents.on('will-navigate', (event, url) => {
    if (!isAppNavigation(url)) event.preventDefault();
  });
  contents.on('will-attach-webview', (event) => event.preventDefault());

  const bridge = new IpcBridge(engine.client, {
    push: ({ channel, payload }) => {
      if (!contents.isDestroyed()) contents.send(channel, payload);
    },
    openExternal: (url) => void shell.openExternal(url),
    operationDone: (title, ok) => {
      const visible = win.isDestroyed()
        ? null
        : { visible: win.isVisible(), focused: win.isFocused(), minimized: win.isMinimized() };
      if (shouldNotify(visible) && Notification.isSupported())
        new Notification({ title: ok ? 'Done' : 'Failed', body: title, silent: ok }).show();
    },
    chooseSavePath: async (defaultPath) => {
      const chosen = await dialog.showSaveDialog(win, {
        defaultPath,
        filters: [{ name: 'Smol machines', extensions: ['smolmachine'] }],
        properties: ['createDirectory', 'showOverwriteConfirmation'],
      });
      return chosen.canceled || !chosen.filePath ? null : chosen.filePath;
    },
    refused: (why) => console.warn(`smol: refused IPC: ${why}`),
  });
  const frameOf = (event: Electron.IpcMainEvent | Electron.IpcMainInvokeEvent) =>
    event.senderFrame ? { url: event.senderFrame.url, isMainFrame: event.senderFrame === contents.mainFrame } : null;
  for (const channel of Object.values(CHANNELS)) {
    if (channel === CHANNELS.request || channel === CHANNELS.consoleOpen || channel === CHANNELS.chooseSavePath)
      ipcMain.handle(channel, (event, payload: unknown) =>
        event.sender === contents ? bridge.handle(channel, frameOf(event), payload) : undefined,
      );
    else
      ipcMain.on(channel, (event, payload: unknown) => {
        if (event.sender === contents) void bridge.handle(channel, frameOf(event), payload);
      });
  }
  contents.on('did-start-navigation', (details) => {
    if (details.isMainFrame && !details.isSameDocument) bridge.dispose();
  });
  win.on('closed', () => {
    bridge.dispose();
    for (const channel of Object.values(CHANNELS)) {
      ipcMain.removeHandler(channel);
      ipcMain.removeAllListeners(channel);
    }
    window = null;
  });
  void win.loadURL(APP_ENTRY);
  return win;
}

function refreshTray(): void {
  if (!tray) return;
  tray.setToolTip(trayTooltip(episodes));
  tray.setContextMenu(
    Menu.buildFromTemplate(
      trayMenuTemplate(episodes, {
        show: showWindow,
        open: (id) => sendCommand(`open:${id}`),
        quit: () => app.quit(),
      }),
    ),
  );
}

/** The tray follows the engine's events: any episode or VM change refetches the list (at most twice a second). */
function followEpisodes(engine: EngineLink): void {
  let timer: NodeJS.Timeout | undefined;
  const refetch = () =>
    engine.client.request<{ episodes: Episode[] }>('GET', '/api/v1/episodes').then(
      (list) => {
        episodes = list.episodes;
        refreshTray();
      },
      () => undefined,
    );
  void refetch();
  const subscribe = () =>
    engine.client.events(
      (event) => {
        if (event.type.startsWith('episode.') || event.type.startsWith('vm.')) {
          clearTimeout(timer);
          timer = setTimeout(() => void refetch(), 500);
        }
      },
      { onClose: () => !quitting && setTimeout(subscribe, 2000) },
    );
  subscribe();
}

async function start(): Promise<void> {
  session.defaultSession.setPermissionRequestHandler((_contents, _permission, callback) => callback(false));
  session.defaultSession.setPermissionCheckHandler(() => false);
  protocol.handle(APP_SCHEME, async (request) => {
    const found = resolveAppRequest(RENDERER_ROOT, request.method, request.url);
    if (!found.ok) return new Response(found.message, { status: found.status });
    const file = await net.fetch(pathToFileURL(found.file).href);
    return new Response(request.method === 'HEAD' ? null : file.body, { status: 200, headers: found.headers });
  });
  Menu.setApplicationMenu(
    Menu.buildFromTemplate(
      appMenuTemplate(
        {
          command: sendCommand,
          openLog: () => void shell.openPath(enginePaths(home).log),
          openDataDir: () => void shell.openPath(home),
        },
        { dev },
      ),
    ),
  );
  link = await linkEngine(home);
  window = createWindow(link);
  try {
    tray = new Tray(nativeImage.createFromPath(ICON));
    tray.on('click', showWindow);
    refreshTray();
  } catch (error) {
    console.warn(`smol: no tray (${(error as Error).message})`);
  }
  followEpisodes(link);
}

app.on('second-instance', showWindow);
app.on('web-contents-created', (_event, contents) => {
  contents.on('will-navigate', (event, url) => {
    if (!isAppNavigation(url)) event.preventDefault();
  });
  contents.setWindowOpenHandler(() => ({ action: 'deny' }));
});
app.on('window-all-closed', () => app.quit());
app.on('before-quit', (event) => {
  // An engine this app started stops with it, suspending its VMs (the next engine resumes them); one that another
  // client started keeps running.
  if (quitting || !link?.owned) return;
  quitting = true;
  event.preventDefault();
  const owned = link.owned;
  owned.once('exit', () => app.quit());
  void link.client.request('POST', '/api/v1/engine/shutdown').catch(() => owned.kill());
});
app
  .whenReady()
  .then(start)
  .catch((error: unknown) => {
    console.error(`smol: ${(error as Error).message}`);
    app.exit(1);
  });
