// Keyboard shortcuts: Ctrl-K (anywhere but the console, where Ctrl-K belongs to the guest) and Ctrl-Shift-K
// (anywhere) open the palette; single keys run commands when no text field or console has the focus.
import type { App } from './app-context.js';
import { commands } from './commands.js';
import { setPaletteOpen } from './store/selection.js';

const SINGLE: Record<string, string> = {
  n: 'new',
  c: 'checkpoint',
  f: 'fork',
  r: 'restore',
  Delete: 'delete-snapshot',
  Escape: 'back',
};

function typing(target: EventTarget | null): boolean {
  const element = target as HTMLElement | null;
  if (!element) return false;
  return (
    element.isContentEditable ||
    ['INPUT', 'TEXTAREA', 'SELECT'].includes(element.tagName) ||
    element.closest('.xterm') !== null
  );
}

export function installShortcuts(app: App, target: Window = window): () => void {
  const onKey = (event: KeyboardEvent) => {
    const state = app.store.getState();
    const inConsole = (event.target as HTMLElement | null)?.closest?.('.xterm') != null;
    if (event.key.toLowerCase() === 'k' && (event.ctrlKey || event.metaKey) && (event.shiftKey || !inConsole)) {
      event.preventDefault();
      setPaletteOpen(app.store, !state.paletteOpen);
      return;
    }
    if (state.paletteOpen || state.dialog || typing(event.target) || event.ctrlKey || event.metaKey || event.altKey)
      return;
    if (event.key === '/') {
      // The episodes' search, or in an episode with many VMs the VM search (VmPicker.tsx).
      const search = document.getElementById('episode-search') ?? document.getElementById('vm-search');
      if (search) {
        event.preventDefault();
        search.focus();
      }
      return;
    }
    const id = SINGLE[event.key];
    const command = id && commands(app, state).find((c) => c.id === id);
    if (command) {
      event.preventDefault();
      command.run();
    }
  };
  target.addEventListener('keydown', onKey);
  return () => target.removeEventListener('keydown', onKey);
}
