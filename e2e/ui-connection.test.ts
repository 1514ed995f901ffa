// Tier 4 (TESTING.md): the engine going away under the page, in Debian's Chromium against a real engine with the echo
// guest: the page says so at once, keeps what it showed, and turns its actions off (buttons, shortcuts, the
// palette) instead of letting them fail one by one; when the next engine of the data dir starts, `smol serve` serves
// it at the same address with the same token and the page goes on by itself. A guest that fails at once shows its
// error at once, and on a host whose KVM cannot run Linux guests (this one: PVM) the examples that need it are marked.
import { describe, expect } from 'vitest';
import type { HostReport } from '../src/api/schema.js';
import { newEpisode, sleep, type UiSession, uiStory, until, visible } from './ui-page.js';

const consoleText = () => ui.page.locator('[data-testid=console] .xterm-rows').innerText();

let ui: UiSession;
const step = uiStory((s) => (ui = s));

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

  step('after smol engine stop and a new engine, the same page reconnects and acts again', async () => {
    const { page } = ui;
    const episode = (await ui.episodes().catch(() => [])).at(0);
    // The test's engine was asked to stop above; `smol engine stop` finds none left (or stops what remains).
    await ui.engine.smol(['engine', 'stop']);
    await visible(page.getByRole('alert').filter({ hasText: 'The engine is out of reach' }));
    const consoleState = page.locator('.console-status');
    await until(
      'the console to close with the engine',
      () => consoleState.innerText(),
      (t) => t.startsWith('closed'),
    );
    // The next engine, started as any command starts it; nothing is done to the page.
    const started = await ui.engine.smol(['ls']);
    expect(started.status, started.output).toBe(0);
    await visible(page.getByText('connected', { exact: true }));
    expect(await page.getByRole('alert').filter({ hasText: 'The engine is out of reach' }).count()).toBe(0);
    // The VM was suspended by the old engine and resumed by the new one: its console attaches again by itself and
    // answers typing.
    await until(
      'the console to attach to the new engine',
      () => consoleState.innerText(),
      (t) => t === 'live',
    );
    await page.locator('[data-testid=console]').click();
    await page.keyboard.type('back again');
    await until('the echo after the restart', consoleText, (text) => text.includes('back again'));
    // An action goes through: the engine's next request from this page succeeds.
    await page.getByRole('heading', { level: 2 }).click();
    const checkpoint = page.getByRole('button', { name: 'Checkpoint…' });
    expect(await checkpoint.isEnabled()).toBe(true);
    await checkpoint.click();
    await page.getByLabel('Checkpoint name').fill('after-restart');
    await page.getByRole('button', { name: 'Save checkpoint' }).click();
    const list = await until(
      'the checkpoint made after the restart',
      () => ui.episodes().then((episodes) => (episodes[0] ? ui.snapshots(episodes[0].id) : [])),
      (snapshots) => snapshots.some((snapshot) => snapshot.name === 'after-restart'),
    );
    expect(list.length).toBeGreaterThan(0);
    expect(episode === undefined || (await ui.episodes()).some((e) => e.id === episode.id)).toBe(true);
    await ui.shot('connection-02-reconnected-after-restart');
    expect(ui.pageErrors).toEqual([]);
  });

  step('a guest that fails at once shows its own error at once', async () => {
    const { page } = ui;
    // The bake path of an image guest, with a kernel that prints and resets the machine at once (the hello guest):
    // what a guest whose KVM fails on its first instructions goes through. Before, the page waited 120 s for
    // "smol-guest: ready" and then showed an empty "its console ended with:".
    const smolfile = ui.smolfile('fails-at-once', 'hello', 'image = "builtin"');
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    await page.getByRole('button', { name: 'New episode' }).first().click();
    await page.getByLabel('Smolfile path').fill(smolfile);
    await page.getByRole('button', { name: 'Start episode' }).click();
    const dialog = page.getByRole('dialog', { name: 'New episode' });
    const refused = dialog.getByRole('alert').filter({ hasText: 'the guest ended before it printed' });
    await visible(refused);
    const text = await refused.innerText();
    expect(text).toMatch(/exit reset: the guest reset the machine/);
    expect(text).toMatch(/hello from a tiny guest/);
    await ui.shot('connection-03-guest-fails-at-once');
    await page.keyboard.press('Escape');
  });

  step('on a host whose KVM cannot run Linux guests, the app says so and marks those examples', async () => {
    const { page } = ui;
    const host = await ui.engine.api.request<HostReport>('GET', '/api/v1/host');
    await page.getByRole('button', { name: 'New episode' }).first().click();
    const dialog = page.getByRole('dialog', { name: 'New episode' });
    await visible(dialog.getByText('shell.smolfile'));
    const note = dialog.getByRole('note', { name: 'Linux guests on this host' });
    const marked = async (example: string) =>
      (await dialog.locator('label.choice', { hasText: example }).getByText('needs hardware KVM').count()) === 1;
    if (host.linuxGuests.ok) {
      // Hardware KVM: nothing to warn about.
      expect(await note.count()).toBe(0);
      expect(await marked('shell.smolfile')).toBe(false);
    } else {
      await visible(note);
      expect(await note.innerText()).toContain(host.linuxGuests.message);
      for (const linux of ['shell.smolfile', 'debian.smolfile']) expect(await marked(linux), linux).toBe(true);
      for (const bare of ['echo.smolfile', 'count.smolfile', 'hello.smolfile']) {
        expect(await marked(bare), bare).toBe(false);
      }
      await dialog.locator('label.choice', { hasText: 'shell.smolfile' }).click();
      await visible(dialog.getByText('shell.smolfile boots a Linux guest, which this host’s KVM cannot run'));
    }
    await ui.shot('connection-04-linux-examples-marked');
    await page.keyboard.press('Escape');
    expect(ui.pageErrors).toEqual([]);
  });
});
