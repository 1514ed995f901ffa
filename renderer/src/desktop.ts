// What the page does only inside the desktop app: run the commands the application menu and the tray send (the
// same registry the palette and the keyboard use, commands.ts), and report finished operations (their toasts) so
// main can show a native notification while the window is hidden (docs/electron.md).
import type { SmolBridge } from '../../electron/preload/bridge-types.js';
import type { App } from './app-context.js';
import { commands } from './commands.js';
import { setPaletteOpen } from './store/selection.js';

/** Runs a menu command; false when it does not apply right now (no VM selected for `checkpoint`, say). */
export function runMenuCommand(app: App, command: string, doc: Pick<Document, 'getElementById'> = document): boolean {
  const state = app.store.getState();
  if (command === 'palette') {
    setPaletteOpen(app.store, true);
    return true;
  }
  if (command === 'search') {
    const search = doc.getElementById('episode-search');
    search?.focus();
    return search !== null;
  }
  const found = commands(app, state).find((c) => c.id === command);
  found?.run();
  return found !== undefined;
}

export function installDesktop(app: App, bridge: SmolBridge): () => void {
  const offMenu = bridge.onMenuCommand((command) => void runMenuCommand(app, command));
  const seen = new Set(app.store.getState().toasts.map((t) => t.id));
  const offToasts = app.store.subscribe((state) => {
    for (const toast of state.toasts) {
      if (seen.has(toast.id)) continue;
      seen.add(toast.id);
      // A toast with an Undo is a pending delete, not a finished operation.
      if (!toast.action) bridge.operationDone(toast.text, toast.kind !== 'error');
    }
  });
  return () => {
    offMenu();
    offToasts();
  };
}
