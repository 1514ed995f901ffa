// Tier 4 (TESTING.md): portable machines as a person uses them (docs/ui.md, "Portable machines"), in Debian's
// Chromium against a real engine: the count tiny guest is exported from its VM's Export… into a temp path (the
// dialog prefilled with the data dir's exports folder), opened again with Open machine… (its manifest shown first,
// nothing opened until Open), and the new episode's VM counts on from where the packed one was; a corrupt copy of
// the file is refused in the dialog, at Inspect, with the engine's own message. Screenshots machine-*.png in test-results/e2e/.
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClientError } from '../src/api/api-client.js';
import { newEpisode, startUiSession, storySteps, until, visible, type UiSession } from './ui-page.js';

let ui: UiSession;
const step = storySteps(() => ui, it);
// The engine runs on this machine (not in the lab), so a temp path here is a path on the engine's host.
const scratch = mkdtempSync(path.join(tmpdir(), 'smol-e2e-machine-'));
const file = path.join(scratch, 'counter.smolmachine');

beforeAll(async () => {
  ui = await startUiSession();
});
afterAll(async () => {
  await ui?.close();
  rmSync(scratch, { recursive: true, force: true });
});

const counts = (text: string) => [...text.matchAll(/count=(\d+)/g)].map((m) => Number(m[1]));
const consoleText = () => ui.page.locator('[data-testid=console] .xterm-rows').innerText();

describe('Export… and Open machine…', { timeout: 180_000 }, () => {
  let episodeName = '';
  let vmName = '';
  let countedBefore = 0;
  let openedName = '';

  step('exports a running VM into the path typed, with a toast of its path and size', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    const episode = await newEpisode(ui, ui.smolfile('counter', 'count', 'cmdline = "hz=10"'));
    [episodeName, vmName] = [episode.name, episode.vms[0]!.name];
    await until('count lines', consoleText, (text) => counts(text).length >= 3);
    await page
      .getByRole('group', { name: `Actions for ${vmName}` })
      .getByRole('button', { name: 'Export…' })
      .click();
    const dialog = page.getByRole('dialog', { name: `Export VM ${vmName}` });
    const field = dialog.getByLabel('Machine file path');
    const prefilled = await until(
      'the default path',
      () => field.inputValue(),
      (value) => value !== '',
    );
    const health = await ui.engine.api.call('health');
    expect(prefilled).toBe(`${health.home}/exports/${episodeName}-${vmName}.smolmachine`);
    await ui.shot('machine-01-export-dialog');
    await field.fill(file);
    countedBefore = Math.max(...counts(await consoleText()));
    await dialog.getByRole('button', { name: 'Export' }).click();
    const toast = page.getByRole('status').filter({ hasText: `Exported to ${file} (` });
    await visible(toast);
    expect(await dialog.isVisible()).toBe(false);
    const size = statSync(file).size;
    expect(size).toBeGreaterThan(0);
    expect(await toast.innerText()).toMatch(/\((\d+(\.\d)?) (KiB|MiB)\)/);
    await ui.shot('machine-02-exported');
  });

  step('opens the file as a new episode, selected, whose VM counts on', async () => {
    const { page } = ui;
    const before = new Set((await ui.episodes()).map((e) => e.id));
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    await page.getByRole('button', { name: 'Open machine…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Open machine' });
    await dialog.getByLabel('Machine file to open').fill(file);
    // The engine reads the file first and the dialog shows its manifest; nothing is opened until Open.
    await dialog.getByRole('button', { name: 'Inspect' }).click();
    const manifest = dialog.getByLabel('Machine manifest');
    await visible(manifest);
    const shown = await manifest.innerText();
    const health = await ui.engine.api.call('health');
    expect(shown).toMatch(new RegExp(`Made by\\s+smol ${health.version} on `));
    expect(shown).toMatch(/Memory\s+16 MiB, [\d.]+ (KiB|MiB) of it in the file/);
    expect(shown).toMatch(/vCPUs\s+1/);
    expect(shown).toMatch(/Disks\s+none/);
    expect(shown).toMatch(/Boots\s+kernel count\.elf/);
    expect(await dialog.getByLabel('Missing CPU features').count()).toBe(0);
    expect((await ui.episodes()).length).toBe(before.size);
    await ui.shot('machine-03-manifest-before-open');
    await dialog.getByRole('button', { name: 'Open' }).click();
    const episodes = await until(
      'the opened episode',
      () => ui.episodes(),
      (list) => list.some((e) => !before.has(e.id)),
    );
    const opened = episodes.find((e) => !before.has(e.id))!;
    openedName = opened.name;
    await visible(page.getByRole('region', { name: `Episode ${openedName}` }));
    expect(await dialog.isVisible()).toBe(false);
    // Its console shows the packed screen, then counts past where the packed VM was: it went on, not from 0.
    await until('counts past the packed one', consoleText, (text) => Math.max(...counts(text)) > countedBefore + 5);
    const vm = (await ui.episodes()).find((e) => e.id === opened.id)!.vms[0]!;
    expect(vm.state).toBe('running');
    await ui.shot('machine-04-opened-counting');
  });

  step('a corrupt file is refused in the dialog with the engine’s own message', async () => {
    const { page } = ui;
    const bytes = readFileSync(file);
    bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
    const corrupt = path.join(scratch, 'corrupt.smolmachine');
    writeFileSync(corrupt, bytes);
    const said = await ui.engine.api.call('inspectMachine', { body: { path: corrupt } }).then(
      () => null,
      (error: ApiClientError) => error.message,
    );
    expect(said).toBeTruthy();
    const before = (await ui.episodes()).length;
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    await page.getByRole('button', { name: 'Open machine…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Open machine' });
    await dialog.getByLabel('Machine file to open').fill(corrupt);
    await dialog.getByRole('button', { name: 'Inspect' }).click();
    const alert = dialog.getByRole('alert');
    await visible(alert);
    expect(await alert.innerText()).toBe(said);
    expect((await ui.episodes()).length).toBe(before);
    await ui.shot('machine-05-corrupt-refused');
    expect(ui.pageErrors).toEqual([]);
  });
});
