// Tier 4 (TESTING.md): one selected VM, as a person sees and uses it, in Debian's Chromium against a real engine
// with the echo guest forked into three VMs: the toolbar names the VM it acts on, its node in the tree is
// highlighted, a "▶ vm" badge selects its VM, and when the selected VM is removed the selection moves to its
// neighbour, which the C and F shortcuts and the palette then act on; "Restore…" names its VM and offers the others.
import { describe, expect } from 'vitest';
import type { Vm } from '../src/api/schema.js';
import { newEpisode, type UiSession, uiStory, until, visible } from './ui-page.js';

let ui: UiSession;
const step = uiStory((s) => (ui = s));

describe('one selected VM', () => {
  let episodeId = '';
  let vms: Vm[] = [];
  const actingOn = () => ui.page.getByTestId('acting-on').innerText();
  const currentNode = () => ui.page.locator('.tree-node.current');
  /** Somewhere on the page that takes no typing: shortcuts go to the page, not to a console. */
  const focusPage = () => ui.page.getByRole('heading', { level: 2 }).click();

  step('forks the echo guest into three VMs; the toolbar names the first', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    const episode = await newEpisode(ui, ui.smolfile('picky', 'echo'));
    episodeId = episode.id;
    await until(
      'the echo banner',
      () => page.locator('[data-testid=console] .xterm-rows').innerText(),
      (t) => t.includes('echo: ready'),
    );
    expect(await actingOn()).toBe(episode.vms[0]!.name);
    await page.getByRole('button', { name: 'Fork…' }).click();
    await page
      .getByRole('dialog', { name: /^Fork / })
      .getByLabel('Number of forks')
      .fill('2');
    await page.getByRole('button', { name: 'Fork ×2' }).click();
    vms = await until(
      'three VMs',
      async () => (await ui.episodes()).find((e) => e.id === episodeId)?.vms ?? [],
      (list) => list.length === 3 && list.every((vm) => vm.state === 'running'),
    );
    await until(
      'three VM tabs',
      () => page.getByRole('tab', { name: /^VM / }).count(),
      (n) => n === 3,
    );
  });

  step('selecting a VM names it in the toolbar and highlights its node', async () => {
    const { page } = ui;
    const last = vms[2]!;
    await page.getByRole('tab', { name: `VM ${last.name}` }).click();
    expect(await actingOn()).toBe(last.name);
    await visible(currentNode());
    expect(
      await currentNode()
        .getByRole('button', { name: `Select VM ${last.name}` })
        .getAttribute('aria-pressed'),
    ).toBe('true');
    await ui.shot('selection-01-selected-vm-named-and-highlighted');
  });

  step('clicking a "▶ vm" badge selects that VM', async () => {
    const { page } = ui;
    const middle = vms[1]!;
    await page.getByRole('button', { name: `Select VM ${middle.name}` }).click();
    expect(await actingOn()).toBe(middle.name);
    expect(await page.getByRole('tab', { name: `VM ${middle.name}` }).getAttribute('aria-selected')).toBe('true');
    expect(
      await currentNode()
        .getByRole('button', { name: `Select VM ${middle.name}` })
        .getAttribute('aria-pressed'),
    ).toBe('true');
  });

  step('removing the selected VM moves the selection to its neighbour, which C and F then act on', async () => {
    const { page } = ui;
    const [, removed, successor] = vms;
    await page.getByRole('button', { name: 'Remove VM' }).click();
    await page.getByRole('tab', { name: `VM ${removed!.name}` }).waitFor({ state: 'detached' });
    expect(await actingOn()).toBe(successor!.name);
    expect(await page.getByRole('tab', { name: `VM ${successor!.name}` }).getAttribute('aria-selected')).toBe('true');
    await ui.shot('selection-02-successor-after-remove');
    await focusPage();
    await page.keyboard.press('c');
    await visible(page.getByRole('dialog', { name: `Checkpoint ${successor!.name}` }));
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    await page.keyboard.press('f');
    await visible(page.getByRole('dialog', { name: `Fork VM ${successor!.name}` }));
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    // The palette lists the successor's actions.
    await page.keyboard.press('Control+k');
    await visible(page.getByRole('option', { name: `Checkpoint ${successor!.name}…` }));
    await page.keyboard.press('Escape');
  });

  step('"Restore…" on a snapshot names the VM it moves, and lets the user choose another', async () => {
    const { page } = ui;
    const [first, , successor] = vms;
    const forkPoint = (await ui.snapshots(episodeId)).find((s) => s.kind === 'fork')!;
    await page.getByRole('treeitem', { name: new RegExp(`^Snapshot ${forkPoint.name}`) }).click();
    await page.getByRole('button', { name: `Restore ${successor!.name} here…` }).click();
    const dialog = page.getByRole('dialog', { name: `Restore ${successor!.name} to ${forkPoint.name}` });
    await visible(dialog);
    await dialog.getByLabel('VM to restore').selectOption({ label: `${first!.name} (running)` });
    await visible(page.getByRole('dialog', { name: `Restore ${first!.name} to ${forkPoint.name}` }));
    await ui.shot('selection-03-restore-names-and-chooses-the-vm');
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect(ui.pageErrors).toEqual([]);
  });
});
