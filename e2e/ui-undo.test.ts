// Tier 4 (TESTING.md): nothing unrecoverable by one click, in Debian's Chromium against a real engine with the echo
// guest. Reset keeps where the VM was as a checkpoint and its toast's Undo restores it there; deleting several
// episodes shows one toast with one Undo, and more than three at once asks first.
import { describe, expect } from 'vitest';
import type { Episode } from '../src/api/schema.js';
import { newEpisode, sleep, type UiSession, uiStory, until, visible } from './ui-page.js';

let ui: UiSession;
const step = uiStory((s) => (ui = s));

describe('undo', () => {
  let first: Episode;
  let smolfile = '';
  const consoleText = () => ui.page.locator('[data-testid=console] .xterm-rows').innerText();
  const vmOf = async (id: string) => (await ui.episodes()).flatMap((e) => e.vms).find((vm) => vm.id === id);

  step('Reset keeps where the VM was, and Undo puts it back there', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    smolfile = ui.smolfile('undo', 'echo');
    first = await newEpisode(ui, smolfile);
    const vmId = first.vms[0]!.id;
    await until('the echo banner', consoleText, (text) => text.includes('echo: ready'));
    await page.locator('[data-testid=console]').click();
    await page.keyboard.type('typed-before-reset');
    await until('the echo', consoleText, (text) => text.includes('typed-before-reset'));
    await page.getByRole('heading', { level: 2 }).click();
    await page.getByRole('button', { name: 'Reset', exact: true }).click();
    const toast = page.getByRole('status').filter({ hasText: /reset \(where it was is kept as / });
    await visible(toast);
    const kept = /kept as (\S+)\)/.exec(await toast.innerText())![1]!;
    const snapshot = (await ui.snapshots(first.id)).find((s) => s.name === kept)!;
    expect(snapshot).toBeDefined();
    // A clean machine: it booted again (a second banner after what was on the console).
    await until('a second boot', consoleText, (text) => text.split('echo: ready').length >= 3);
    await ui.shot('undo-01-reset-toast');
    await toast.getByRole('button', { name: 'Undo' }).click();
    await until(
      'the VM back where it was',
      () => vmOf(vmId),
      (vm) => vm?.snapshot === snapshot.id && vm.state === 'running',
    );
    await until('the typed text back', consoleText, (text) => text.includes('typed-before-reset'));
    await ui.shot('undo-02-reset-undone');
  });

  step('deleting four episodes asks first, then shows one toast whose Undo keeps them all', async () => {
    const { page } = ui;
    for (let i = 0; i < 3; i++) await ui.engine.api.request('POST', '/api/v1/episodes', { smolfile });
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    await until(
      'four rows',
      () => page.getByRole('button', { name: /^Open episode / }).count(),
      (n) => n === 4,
    );
    await page.getByLabel('Select all shown episodes').check();
    await page.getByRole('button', { name: 'Delete selected' }).click();
    const ask = page.getByRole('dialog', { name: 'Delete 4 episodes?' });
    await visible(ask);
    await ui.shot('undo-03-bulk-delete-asks');
    await ask.getByRole('button', { name: 'Delete 4 episodes' }).click();
    await visible(page.getByRole('heading', { name: 'No episodes yet' }));
    const toasts = page.getByRole('status').filter({ hasText: 'episodes deleted' });
    expect(await toasts.count()).toBe(1);
    expect(await toasts.first().innerText()).toMatch(/^4 episodes deleted \(their 4 running VMs are killed\)/);
    expect(await page.getByRole('button', { name: 'Undo' }).count()).toBe(1);
    await ui.shot('undo-04-bulk-delete-one-toast');
    await toasts.first().getByRole('button', { name: 'Undo' }).click();
    await until(
      'four rows again',
      () => page.getByRole('button', { name: /^Open episode / }).count(),
      (n) => n === 4,
    );
    await sleep(7000); // past the toast: nothing was sent
    expect(await ui.episodes()).toHaveLength(4);
  });

  step('deleting two goes at once, with one toast and one Undo', async () => {
    const { page } = ui;
    const names = (await ui.episodes()).slice(0, 2).map((e) => e.name);
    for (const name of names) await page.getByLabel(`Select ${name}`).check();
    await page.getByRole('button', { name: 'Delete selected' }).click();
    expect(await page.getByRole('dialog').count()).toBe(0);
    await until(
      'two rows',
      () => page.getByRole('button', { name: /^Open episode / }).count(),
      (n) => n === 2,
    );
    expect(await page.getByRole('status').filter({ hasText: '2 episodes deleted' }).count()).toBe(1);
    await until(
      'the engine to delete them',
      () => ui.episodes(),
      (list) => list.length === 2,
      30_000,
    );
    expect(ui.pageErrors).toEqual([]);
  });
});
