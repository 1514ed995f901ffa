// The shape of `window.smolBridge`, which the preload exposes and the renderer's ElectronTransport uses
// (docs/electron.md, "IPC"). Types only: both sides import it, nothing of it runs.
import type { ConsolePush, EventPush, RequestResult } from '../main/ipc-bridge.js';

export type { ConsolePush, EventPush, RequestResult };

export interface SmolBridge {
  /** One API call under /api/v1; errors come back as data. */
  request(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<RequestResult>;
  /** Subscribes (again) to the engine's events; they arrive through onEvent. */
  startEvents(): void;
  stopEvents(): void;
  onEvent(listener: (push: EventPush) => void): () => void;
  /** Attaches to a VM's console; its output arrives through onConsole with the returned stream id. */
  openConsole(vm: string): Promise<number | undefined>;
  writeConsole(stream: number, data: string | Uint8Array): void;
  closeConsole(stream: number): void;
  onConsole(listener: (push: ConsolePush) => void): () => void;
  /** Opens an http(s) link in the system browser (main validates it again). */
  openExternal(url: string): void;
  /** A long operation ended: a native notification when the window is hidden. */
  operationDone(title: string, ok: boolean): void;
  /** Commands from the application menu and the tray (ids of renderer/src/commands.ts, `palette`, `search`). */
  onMenuCommand(listener: (command: string) => void): () => void;
  /** The native save dialog (main's), starting at `defaultPath`: the chosen path, or null when cancelled. */
  chooseSavePath(defaultPath: string): Promise<string | null>;
  /** The path of a file dropped on the window ('' when it is not a file on disk): Electron's webUtils. */
  pathForFile(file: File): string;
}
