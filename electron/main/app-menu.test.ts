import type { MenuItemConstructorOptions } from 'electron';
import { describe, expect, it } from 'vitest';
import type { Episode, Vm } from '../../src/api/schema.js';
import { appMenuTemplate, shouldNotify, trayMenuTemplate, trayTooltip, type MenuCommand } from './app-menu.js';

function items(template: MenuItemConstructorOptions[]): MenuItemConstructorOptions[] {
  return template.flatMap((item) => [item, ...items((item.submenu as MenuItemConstructorOptions[]) ?? [])]);
}
const click = (item: MenuItemConstructorOptions | undefined) => (item?.click as (() => void) | undefined)?.call(null);

function menu(dev = false) {
  const sent: MenuCommand[] = [];
  const template = appMenuTemplate({ command: (c) => sent.push(c), openLog: () => {}, openDataDir: () => {} }, { dev });
  return { sent, all: items(template) };
}

const vm = (state: Vm['state']) => ({ state }) as Vm;
const episode = (id: string, name: string, states: Vm['state'][]) =>
  ({ id, name, vms: states.map(vm) }) as unknown as Episode;

describe('the application menu', () => {
  it('sends the renderer the command of each action', () => {
    const { sent, all } = menu();
    const labels = ['New Episode…', 'Open Machine…', 'Checkpoint…', 'Fork…', 'Restore to Selected Snapshot…'];
    for (const label of [...labels, 'Command Palette']) click(all.find((item) => item.label === label));
    expect(sent).toEqual(['new', 'open-machine', 'checkpoint', 'fork', 'restore', 'palette']);
  });

  it('leaves plain Ctrl keys to the guest console', () => {
    const accelerators = menu()
      .all.filter((item) => item.accelerator && item.registerAccelerator !== false)
      .map((item) => String(item.accelerator));
    expect(accelerators.length).toBeGreaterThan(2);
    for (const accelerator of accelerators) expect(accelerator).toMatch(/^CmdOrCtrl\+Shift\+/);
  });

  it('offers developer tools only in development', () => {
    expect(menu(false).all.some((item) => item.role === 'toggleDevTools')).toBe(false);
    expect(menu(true).all.some((item) => item.role === 'toggleDevTools')).toBe(true);
  });
});

describe('the tray', () => {
  it('lists the episodes with a running VM, and opens one when clicked', () => {
    const opened: string[] = [];
    const template = trayMenuTemplate(
      [
        episode('ep-b', 'beta', ['running', 'paused']),
        episode('ep-s', 'stopped', ['stopped']),
        episode('ep-a', 'alpha', ['running']),
      ],
      { show: () => {}, open: (id) => opened.push(id), quit: () => {} },
    );
    const labels = template.map((item) => item.label);
    expect(labels).toContain('alpha (1 of 1 VMs running)');
    expect(labels).toContain('beta (1 of 2 VMs running)');
    expect(labels.some((label) => label?.startsWith('stopped'))).toBe(false);
    expect(labels.indexOf('alpha (1 of 1 VMs running)')).toBeLessThan(labels.indexOf('beta (1 of 2 VMs running)'));
    click(template.find((item) => item.label?.startsWith('beta')));
    expect(opened).toEqual(['ep-b']);
    expect(trayTooltip([episode('ep-a', 'alpha', ['running'])])).toMatch(/1 episode/);
  });

  it('says so when nothing runs', () => {
    const template = trayMenuTemplate([], { show: () => {}, open: () => {}, quit: () => {} });
    expect(template.find((item) => item.label === 'No episode is running')?.enabled).toBe(false);
    expect(trayTooltip([])).toMatch(/nothing running/);
  });
});

describe('notifications', () => {
  it('appear only when the window is not in front of the user', () => {
    expect(shouldNotify({ visible: true, focused: true, minimized: false })).toBe(false);
    expect(shouldNotify({ visible: false, focused: false, minimized: false })).toBe(true);
    expect(shouldNotify({ visible: true, focused: true, minimized: true })).toBe(true);
    expect(shouldNotify({ visible: true, focused: false, minimized: false })).toBe(true);
    expect(shouldNotify(null)).toBe(true);
  });
});
