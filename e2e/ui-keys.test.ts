// Tier 4 (TESTING.md): the keyboard goes where a person expects, in Debian's Chromium against a real engine with
// the echo guest (which echoes every key it gets, so a key that reached it shows). Opening an episode leaves the
// keyboard with the page: a `c` opens the checkpoint dialog and never reaches the guest. A click in the console
// gives it the keys and says so. Dialogs keep the focus in them and close on Escape.
import { describe, expect } from 'vitest';
import { newEpisode, sleep, type UiSession, uiStory, until, visible } from './ui-page.js';

let ui: UiSession;
const step = uiStory((s) => (ui = s));

describe('keys', () => {
  let vmId = '';
  const consoleText = () => ui.page.locator('[data-testid=console] .xterm-rows').innerText();
  const keysState = () => ui.page.getByTestId('console-keys').innerText();
  /** What the guest was sent, from the engine's recording of the console ("i" events). */
  const typedToGuest = async () => {
    const text = await ui.engine.api.request<string>('GET', `/api/v1/vms/${vmId}/recording`);
    return String(text)
      .split('\n')
      .slice(1)
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as [number, string, string])
      .filter(([, type]) => type === 'i')
      .map(([, , data]) => data)
      .join('');
  };
  const inDialog = () => ui.page.evaluate(() => document.activeElement?.closest('[role=dialog]') !== null);

  step(
    'opening an episode leaves the keys with the page: a typed c opens the dialog, the guest gets nothing',
    async () => {
      const { page } = ui;
      await page.goto(ui.engine.url);
      await visible(page.getByText('connected', { exact: true }));
      const episode = await newEpisode(ui, ui.smolfile('keys', 'echo'));
      vmId = episode.vms[0]!.id;
      await until('the echo banner', consoleText, (text) => text.includes('echo: ready'));
      // Opened from the list, as a person comes back to it.
      await page.getByRole('button', { name: 'Back to episodes' }).click();
      await page.getByRole('button', { name: `Open episode ${episode.name}` }).click();
      await until('the echo banner again', consoleText, (text) => text.includes('echo: ready'));
      expect(await keysState()).toBe('click the console to type');
      expect(await page.evaluate(() => document.activeElement?.closest('.xterm') ?? null)).toBeNull();
      await ui.shot('keys-01-episode-open-keys-with-the-page');
      await page.keyboard.press('c');
      await visible(page.getByRole('dialog', { name: /^Checkpoint / }));
      await sleep(500); // time for a key to have reached the guest and been recorded, had it gone there
      expect(await typedToGuest()).toBe('');
    },
  );

  step('a dialog keeps the focus in it, and Escape closes it', async () => {
    const { page } = ui;
    for (let i = 0; i < 8; i++) {
      await page.keyboard.press('Tab');
      expect(await inDialog(), `after ${i + 1} Tab(s)`).toBe(true);
    }
    for (let i = 0; i < 3; i++) {
      await page.keyboard.press('Shift+Tab');
      expect(await inDialog()).toBe(true);
    }
    await ui.shot('keys-02-dialog-holds-the-focus');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    // Escape closed the dialog only: the episode is still open.
    await visible(page.getByRole('heading', { level: 2, name: /^keys-\d+$/ }));
  });

  step('a click in the console gives it the keys and says so; c then goes to the guest', async () => {
    const { page } = ui;
    await page.locator('[data-testid=console]').click();
    await until('the typing state', keysState, (text) => text.startsWith('⌨ typing goes to the guest'));
    await page.keyboard.type('cfc');
    await until('the echo of cfc', typedToGuest, (typed) => typed === 'cfc');
    await until('cfc on the console', consoleText, (text) => text.includes('cfc'));
    expect(await page.getByRole('dialog').count()).toBe(0);
    await ui.shot('keys-03-typing-goes-to-the-guest');
    // A click elsewhere takes the keys back to the page.
    await page.getByRole('heading', { level: 2 }).click();
    await until('the page state', keysState, (text) => text === 'click the console to type');
    expect(ui.pageErrors).toEqual([]);
  });
});
