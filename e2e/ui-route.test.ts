// Tier 4 (TESTING.md): the view is in the address, in Debian's Chromium against a real engine with the echo guest
// forked once: a reload keeps the episode, the selected VM and the selected snapshot; Back and Forward move between
// the list and the episode; the link (with the page's token) opens the same view in another tab. The views that are
// only an address (images, side by side) go back, by the browser's Back and by their own, to where they were opened:
// the episode or the list, after a reload too; opened from a link, their own Back goes to the list.
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
  });

  const imagesButton = () => ui.page.getByRole('button', { name: 'Images', exact: true });
  const imagesView = () => ui.page.getByRole('region', { name: 'Images' });
  const episodeHeading = () => ui.page.getByRole('heading', { level: 2, name: episodeName });
  const viewBack = (to: string) => ui.page.getByRole('button', { name: `Back to ${to}`, exact: true });

  step(
    'Images opened from an episode: its Back and the browser’s return to the episode, after a reload too',
    async () => {
      const { page } = ui;
      await page.goto(`${ui.engine.url}#/episodes/${episodeId}?vm=${child.id}`);
      await visible(episodeHeading());
      await imagesButton().click();
      await visible(imagesView());
      expect(hash()).toBe('#/images');
      await visible(viewBack(`episode ${episodeName}`));
      await ui.shot('route-03-images-from-episode');
      await viewBack(`episode ${episodeName}`).click();
      await visible(episodeHeading());
      expect(hash()).toBe(`#/episodes/${episodeId}?vm=${child.id}`);
      await until('the selected VM', actingOn, (name) => name === child.name);

      // The browser's Back does the same; Forward opens the images again.
      await imagesButton().click();
      await visible(imagesView());
      await page.goBack();
      await visible(episodeHeading());
      expect(hash()).toBe(`#/episodes/${episodeId}?vm=${child.id}`);
      await page.goForward();
      await visible(imagesView());

      // A reload of the images' address keeps where it was opened from.
      await page.reload();
      await visible(imagesView());
      await visible(viewBack(`episode ${episodeName}`));
      await ui.shot('route-04-images-reloaded');
      await viewBack(`episode ${episodeName}`).click();
      await visible(episodeHeading());
    },
  );

  step('Images opened from the list: both Backs return to the list', async () => {
    const { page } = ui;
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    const listed = page.getByRole('button', { name: `Open episode ${episodeName}` });
    await visible(listed);
    await imagesButton().click();
    await visible(imagesView());
    await viewBack('episodes').click();
    await visible(listed);
    expect(hash()).toBe('#/');
    await imagesButton().click();
    await visible(imagesView());
    await page.goBack();
    await visible(listed);
    expect(hash()).toBe('#/');
  });

  step('Images opened from a link: its Back goes to the list', async () => {
    const other = await ui.browser.newPage({ viewport: { width: 1440, height: 900 }, colorScheme: 'dark' });
    try {
      await other.goto(`${ui.engine.url}#/images`);
      await visible(other.getByRole('region', { name: 'Images' }));
      await other.screenshot({ path: path.join(shots, 'route-05-images-from-link.png') });
      await other.getByRole('button', { name: 'Back to episodes', exact: true }).click();
      await visible(other.getByRole('button', { name: `Open episode ${episodeName}` }));
      expect(new URL(other.url()).hash).toBe('#/');
    } finally {
      await other.close();
    }
  });

  step('Side by side opened from an episode: its own Back returns to the episode', async () => {
    const { page } = ui;
    await page.getByRole('button', { name: `Open episode ${episodeName}` }).click();
    await visible(episodeHeading());
    await page.getByRole('tab', { name: `VM ${child.name}` }).click();
    await until('the selected VM', actingOn, (name) => name === child.name);
    await page
      .getByRole('group', { name: `Actions for ${child.name}` })
      .getByRole('button', { name: 'Side by side…' })
      .click();
    await visible(page.getByRole('region', { name: 'Side by side' }));
    // Images from there: its Back names the side by side view and goes back to it.
    await imagesButton().click();
    await visible(imagesView());
    await viewBack('side by side').click();
    await visible(page.getByRole('region', { name: 'Side by side' }));
    expect(hash()).toBe(`#/compare?a=${child.id}`);
    await ui.shot('route-06-compare-from-episode');
    await viewBack(`episode ${episodeName}`).click();
    await visible(episodeHeading());
    expect(hash()).toBe(`#/episodes/${episodeId}?vm=${child.id}`);
    expect(ui.pageErrors).toEqual([]);
  });
});
