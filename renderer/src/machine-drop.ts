// A .smolmachine file dropped on the window opens it (docs/ui.md, "Portable machines"). In the desktop app the
// preload bridge gives the dropped file's path (Electron's webUtils.getPathForFile), and the Open machine dialog
// opens it at once, showing its progress and any refusal. A web page is never told where a dropped file is, so there
// the dialog opens asking for the path on the engine's host.
import type { SmolBridge } from '../../electron/preload/bridge-types.js';
import { toast, type AppStore } from './store/app-store.js';
import { connected, openDialog } from './store/selection.js';

const carriesFiles = (event: DragEvent) => [...(event.dataTransfer?.types ?? [])].includes('Files');

/** Listens on `target` (the window) for dropped files; returns the stop. */
export function installMachineDrop(store: AppStore, target: Window, bridge: SmolBridge | null): () => void {
  const over = (event: DragEvent) => {
    if (!carriesFiles(event)) return;
    event.preventDefault(); // without it the browser opens the file itself
    if (event.dataTransfer) event.dataTransfer.dropEffect = 'copy';
  };
  const drop = (event: DragEvent) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    const file = event.dataTransfer?.files[0];
    if (!file) return;
    if (!file.name.endsWith('.smolmachine')) {
      toast(store, 'error', `${file.name} is not a .smolmachine file: only machines open by dropping`);
      return;
    }
    if (!connected(store.getState())) {
      toast(store, 'error', `${file.name} cannot be opened while the engine is out of reach`);
      return;
    }
    const path = bridge?.pathForFile(file) ?? '';
    if (path) openDialog(store, { kind: 'open-machine', path, start: true });
    else
      openDialog(store, {
        kind: 'open-machine',
        note:
          `A web page is not told where a dropped file is: type the path of ${file.name} on the engine’s host ` +
          '(the desktop app opens a dropped file by itself).',
      });
  };
  target.addEventListener('dragover', over);
  target.addEventListener('drop', drop);
  return () => {
    target.removeEventListener('dragover', over);
    target.removeEventListener('drop', drop);
  };
}
