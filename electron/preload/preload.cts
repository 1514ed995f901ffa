// The preload of the app window (docs/electron.md, "IPC"): the only code with IPC, exposing `window.smolBridge`,
// a handful of verbs and no channel of the renderer's choosing. It runs sandboxed, so it is one CommonJS file that
// requires nothing but electron; the channel names repeat electron/main/ipc-contract.ts (a unit test keeps them
// equal). Everything that crosses is structured-clone data: strings, plain objects and Uint8Arrays.
import type { IpcRendererEvent } from 'electron';
import type { SmolBridge } from './bridge-types.js';

// A sandboxed preload is CommonJS run by Electron's own loader: `require` is how it gets the electron module.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { contextBridge, ipcRenderer, webUtils } = require('electron') as typeof import('electron');

const listen = <T,>(channel: string, listener: (payload: T) => void): (() => void) => {
  const wrapped = (_event: IpcRendererEvent, payload: T) => listener(payload);
  ipcRenderer.on(channel, wrapped);
  return () => void ipcRenderer.removeListener(channel, wrapped);
};

const bridge: SmolBridge = {
  request: (method, path, body) => ipcRenderer.invoke('smol:request', { method, path, body }),
  startEvents: () => ipcRenderer.send('smol:events-start'),
  stopEvents: () => ipcRenderer.send('smol:events-stop'),
  onEvent: (listener) => listen('smol:event', listener),
  openConsole: (vm) => ipcRenderer.invoke('smol:console-open', { vm }),
  writeConsole: (stream, data) => ipcRenderer.send('smol:console-write', { stream, data }),
  closeConsole: (stream) => ipcRenderer.send('smol:console-close', { stream }),
  onConsole: (listener) => listen('smol:console', listener),
  openExternal: (url) => ipcRenderer.send('smol:open-external', { url }),
  operationDone: (title, ok) => ipcRenderer.send('smol:operation-done', { title, ok }),
  onMenuCommand: (listener) => listen('smol:menu-command', listener),
  chooseSavePath: (defaultPath) => ipcRenderer.invoke('smol:choose-save-path', { defaultPath }),
  // The file's path on this machine, or '' for one that is not a file on disk; no IPC (Electron's renderer-side call).
  pathForFile: (file) => webUtils.getPathForFile(file),
};

contextBridge.exposeInMainWorld('smolBridge', bridge);
