// Keyboard shortcuts: Ctrl-K (anywhere but the console, where Ctrl-K belongs to the guest) and Ctrl-Shift-K
// (anywhere) open the palette; single keys run commands when no text field or console has the focus, on the engine
// of the open episode (`active`: a remote engine's App and name, else the page's own).
import type { App } from './app-context.js';
import { commands, type OtherEngine } from './commands.js';
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

/** The engine commands act on: a remote engine's App and name while one of its episodes is open, else null. */
export type ActiveEngine = () => OtherEngine | null;

export function installShortcuts(app: App, target: Window = window, active: ActiveEngine = () => null): () => void {
  const onKey = (event: KeyboardEvent) => {
    const state = app.store.getState();
    const remote = active();
    const acting = remote ? remote.app.store.getState() : state;
    const inConsole = (event.target as HTMLElement | null)?.closest?.('.xterm') != null;
    if (event.key.toLowerCase() === 'k' && (event.ctrlKey || event.metaKey) && (event.shiftKey || !inConsole)) {
      event.preventDefault();
      setPaletteOpen(app.store, !state.paletteOpen);
      return;
    }
    if (
      state.paletteOpen ||
      state.dialog ||
      acting.dialog ||
      typing(event.target) ||
      event.ctrlKey ||
      event.metaKey ||
      event.altKey
    )
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
    const command = id && commands(remote?.app ?? app, acting, remote?.name).find((c) => c.id === id);
    if (command && !command.disabled) {
      event.preventDefault();
      command.run();
    }
  };
  target.addEventListener('keydown', onKey);
  return () => target.removeEventListener('keydown', onKey);
}
