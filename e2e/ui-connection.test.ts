// Tier 4 (TESTING.md): the engine going away under the page, in Debian's Chromium against a real engine with the echo
// guest: the page says so at once, keeps what it showed, and turns its actions off (buttons, shortcuts, the
// palette) instead of letting them fail one by one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newEpisode, sleep, startUiSession, storySteps, until, visible, type UiSession } from './ui-page.js';

let ui: UiSession;
const step = storySteps(() => ui, it);

beforeAll(async () => {
  ui = await startUiSession();
});
afterAll(async () => {
  await ui?.close();
});

describe('the connection', () => {
  step('with the engine stopped, the page says so and offers no action', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    const episode = await newEpisode(ui, ui.smolfile('cut', 'echo'));
    await until(
      'the echo banner',
      () => page.locator('[data-testid=console] .xterm-rows').innerText(),
      (text) => text.includes('echo: ready'),
    );
    expect(await page.getByRole('button', { name: 'Checkpoint…' }).isEnabled()).toBe(true);
    await ui.engine.api.request('POST', '/api/v1/engine/shutdown').catch(() => undefined);
    const banner = page.getByRole('alert').filter({ hasText: 'The engine is out of reach' });
    await visible(banner);
    // What it showed stays; every action waits for the engine.
    await visible(page.getByRole('heading', { level: 2, name: episode.name }));
    for (const name of ['Checkpoint…', 'Fork…', 'Reset', 'Remove VM', 'Delete episode'])
      expect(await page.getByRole('button', { name, exact: true }).isDisabled(), name).toBe(true);
    await page.getByRole('heading', { level: 2 }).click();
    await page.keyboard.press('c');
    await sleep(300);
    expect(await page.getByRole('dialog').count()).toBe(0);
    await page.keyboard.press('Control+k');
    await visible(page.getByRole('dialog', { name: 'Commands' }));
    expect(await page.getByRole('option').allInnerTexts()).toEqual([expect.stringMatching(/^Back to episodes/)]);
    await page.keyboard.press('Escape');
    await ui.shot('connection-01-engine-out-of-reach');
    expect(ui.pageErrors).toEqual([]);
  });
});
