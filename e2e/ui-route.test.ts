// Tier 4 (TESTING.md): the view is in the address, in Debian's Chromium against a real engine with the echo guest
// forked once: a reload keeps the episode, the selected VM and the selected snapshot; Back and Forward move between
// the list and the episode; the link (with the page's token) opens the same view in another tab.
import path from 'node:path';
import { describe, expect } from 'vitest';
import type { Vm } from '../src/api/schema.js';
import { newEpisode, shots, type UiSession, uiStory, until, visible } from './ui-page.js';

let ui: UiSession;
const step = uiStory((s) => (ui = s));

describe('the address', () => {
  let episodeId = '';
  let episodeName = '';
  let child: Vm;
  let forkPoint = { id: '', name: '' };
  const actingOn = () => ui.page.getByTestId('acting-on').innerText();
  const hash = () => new URL(ui.page.url()).hash;

  step('names the open episode, the selected VM and the selected snapshot', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    expect(hash()).toBe('');
    const episode = await newEpisode(ui, ui.smolfile('routed', 'echo'));
    [episodeId, episodeName] = [episode.id, episode.name];
    await page.getByRole('button', { name: 'Fork…' }).click();
    await page.getByLabel('Number of forks').fill('1');
    await page.getByRole('button', { name: 'Fork ×1' }).click();
    const vms = await until(
      'two VMs',
      async () => (await ui.episodes()).find((e) => e.id === episodeId)?.vms ?? [],
      (list) => list.length === 2,
    );
    child = vms[1]!;
    const fork = (await ui.snapshots(episodeId)).find((s) => s.kind === 'fork')!;
    forkPoint = { id: fork.id, name: fork.name };
    await page.getByRole('tab', { name: `VM ${child.name}` }).click();
    await page.getByRole('treeitem', { name: new RegExp(`^Snapshot ${fork.name}`) }).click();
    await until(
      'the address',
      async () => hash(),
      (h) => h === `#/episodes/${episodeId}?vm=${child.id}&snapshot=${fork.id}`,
    );
  });

  step('a reload keeps the view', async () => {
    const { page } = ui;
    await page.reload();
    await visible(page.getByRole('heading', { level: 2, name: episodeName }));
    await until('the selected VM', actingOn, (name) => name === child.name);
    await until(
      'the snapshot’s details',
      () => page.getByLabel('Snapshot name').inputValue(),
      (name) => name === forkPoint.name,
    );
    await ui.shot('route-01-after-reload');
  });

  step('Back goes to the list, Forward to the episode again', async () => {
    const { page } = ui;
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    await visible(page.getByRole('button', { name: `Open episode ${episodeName}` }));
    expect(hash()).toBe('#/');
    await page.goBack();
    await visible(page.getByRole('heading', { level: 2, name: episodeName }));
    await until('the selected VM', actingOn, (name) => name === child.name);
    await page.goBack();
    await visible(page.getByRole('button', { name: `Open episode ${episodeName}` }));
    await page.goForward();
    await visible(page.getByRole('heading', { level: 2, name: episodeName }));
  });

  step('the link with the token opens the same view in another tab', async () => {
    const other = await ui.browser.newPage({ viewport: { width: 1440, height: 900 }, colorScheme: 'dark' });
    try {
      await other.goto(`${ui.engine.url}#/episodes/${episodeId}?vm=${child.id}&snapshot=${forkPoint.id}`);
      await visible(other.getByRole('heading', { level: 2, name: episodeName }));
      await until(
        'the selected VM',
        () => other.getByTestId('acting-on').innerText(),
        (n) => n === child.name,
      );
      expect(new URL(other.url()).searchParams.has('token')).toBe(false); // taken out of the address as ever
      expect(new URL(other.url()).hash).toBe(`#/episodes/${episodeId}?vm=${child.id}&snapshot=${forkPoint.id}`);
      await other.screenshot({ path: path.join(shots, 'route-02-shared-link.png') });
    } finally {
      await other.close();
    }
    expect(ui.pageErrors).toEqual([]);
  });
});
