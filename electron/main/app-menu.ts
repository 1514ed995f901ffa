// The application menu and the tray menu as templates (docs/electron.md, "Menu and tray"). Actions that belong to
// the UI are commands sent to the renderer, which runs them from its own command registry
// (renderer/src/commands.ts), so the menu, the palette and the keyboard always do the same thing.
// Accelerators use Ctrl+Shift: plain Ctrl keys belong to the guest's console.
import type { MenuItemConstructorOptions } from 'electron';
import type { Episode } from '../../src/api/schema.js';

/** Commands the menu sends: ids of renderer/src/commands.ts, plus `palette` and `search`. */
export const MENU_COMMANDS = [
  'new',
  'open-machine',
  'checkpoint',
  'fork',
  'restore',
  'back',
  'palette',
  'search',
] as const;
export type MenuCommand = (typeof MENU_COMMANDS)[number] | `open:${string}`;

export interface MenuActions {
  command(command: MenuCommand): void;
  openLog(): void;
  openDataDir(): void;
}

export function appMenuTemplate(actions: MenuActions, options: { dev: boolean }): MenuItemConstructorOptions[] {
  const send = (command: MenuCommand) => () => actions.command(command);
  return [
    {
      label: '&File',
      submenu: [
        { label: 'New Episode…', accelerator: 'CmdOrCtrl+Shift+N', click: send('new') },
        { label: 'Open Machine…', accelerator: 'CmdOrCtrl+Shift+O', click: send('open-machine') },
        { type: 'separator' },
        { label: 'Open Data Folder', click: () => actions.openDataDir() },
        { label: 'Open Engine Log', click: () => actions.openLog() },
        { type: 'separator' },
        { role: 'close' },
        { role: 'quit' },
      ],
    },
    {
      label: '&Edit',
      submenu: [
        { role: 'undo' },
        { role: 'redo' },
        { type: 'separator' },
        { role: 'cut' },
        { role: 'copy' },
        { role: 'paste' },
        { role: 'selectAll' },
      ],
    },
    {
      label: 'E&pisode',
      submenu: [
        { label: 'Checkpoint…', accelerator: 'CmdOrCtrl+Shift+S', click: send('checkpoint') },
        { label: 'Fork…', accelerator: 'CmdOrCtrl+Shift+F', click: send('fork') },
        { label: 'Restore to Selected Snapshot…', accelerator: 'CmdOrCtrl+Shift+R', click: send('restore') },
        { type: 'separator' },
        { label: 'Back to Episodes', click: send('back') },
      ],
    },
    {
      label: '&View',
      submenu: [
        // The renderer handles Ctrl+Shift+K itself (shortcuts.ts); the menu only shows it.
        {
          label: 'Command Palette',
          accelerator: 'CmdOrCtrl+Shift+K',
          registerAccelerator: false,
          click: send('palette'),
        },
        { label: 'Find Episode', accelerator: '/', registerAccelerator: false, click: send('search') },
        { type: 'separator' },
        { role: 'resetZoom' },
        { role: 'zoomIn' },
        { role: 'zoomOut' },
        { type: 'separator' },
        { role: 'togglefullscreen' },
        ...(options.dev
          ? ([{ type: 'separator' }, { role: 'reload' }, { role: 'toggleDevTools' }] as MenuItemConstructorOptions[])
          : []),
      ],
    },
  ];
}

/** How many of an episode's VMs run. */
const runningVms = (episode: Episode) => episode.vms.filter((vm) => vm.state === 'running').length;

/** The tray's menu: the episodes with a running VM (each opens it), then show and quit. */
export function trayMenuTemplate(
  episodes: Episode[],
  actions: { show(): void; open(episodeId: string): void; quit(): void },
): MenuItemConstructorOptions[] {
  const running = episodes.filter((episode) => runningVms(episode) > 0).sort((a, b) => a.name.localeCompare(b.name));
  const items: MenuItemConstructorOptions[] = running.length
    ? running.map((episode) => ({
        label: `${episode.name} (${runningVms(episode)} of ${episode.vms.length} VMs running)`,
        click: () => actions.open(episode.id),
      }))
    : [{ label: 'No episode is running', enabled: false }];
  return [
    { label: 'Running episodes', enabled: false },
    ...items,
    { type: 'separator' },
    { label: 'Show Smol Studio', click: () => actions.show() },
    { label: 'Quit', click: () => actions.quit() },
  ];
}

export function trayTooltip(episodes: Episode[]): string {
  const running = episodes.filter((episode) => runningVms(episode) > 0).length;
  return running === 0 ? 'Smol Studio: nothing running' : `Smol Studio: ${running} episode(s) running`;
}

/** A finished operation becomes a notification only when nobody is looking at the window. */
export function shouldNotify(window: { visible: boolean; focused: boolean; minimized: boolean } | null): boolean {
  return window === null || !window.visible || window.minimized || !window.focused;
}
