// Tier 4 (TESTING.md): the app with several engines (docs/remote.md, "The app with several engines"), in Debian's
// Chromium against two real engines: A serves the page (as `smol serve` does), B serves over TLS with a named token
// in its own data dir. B is added through the Engines dialog (its fingerprint shown and confirmed; a wrong token, a
// name taken and an address that does not answer each refused with the reason), its episode shows in A's list with
// its engine, sorted in one list with A's, and opens at #/engines/b/episodes/ID with its console, all through A; the
// keyboard shortcuts and the command palette act on B there. B killed: the list marks it unreachable with its state
// unknown (last seen running), the palette lists B's actions disabled with the reason, and A's own episodes go on; B
// served again at the same address: the page finds it by itself. B killed while its episode is open: the episode's
// header, its VM's tab and the tree's "here" badge say state unknown (last seen running), the action bar's actions
// that need the engine are off with the reason; B served again: the live state and the actions come back.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import type { CreatedToken, Episode } from '../src/api/schema.js';
import { EngineHome } from '../tests/engine/engine-home.js';
import { startServe, type Serving } from '../tests/engine/smol-serve.js';
import { newEpisode, type UiSession, uiStory, until, visible } from './ui-page.js';

// The engines file A keeps B in (with B's token), a throwaway one: never this machine's own.
const scratch = mkdtempSync(path.join(tmpdir(), 'smol-e2e-engines-'));
const remote = new EngineHome();
const serving: ChildProcess[] = [];
afterAll(async () => {
  for (const child of serving) if (child.exitCode === null) child.kill('SIGKILL');
  await remote.destroy();
  rmSync(scratch, { recursive: true, force: true });
}, 120_000);

let ui: UiSession;
const step = uiStory((s) => (ui = s), { SMOL_CLIENT_CONFIG: path.join(scratch, 'engines.json') });

const consoleText = () => ui.page.locator('[data-testid=console] .xterm-rows').innerText();

describe('the app with several engines', () => {
  let b: Serving;
  let bBase = '';
  let bToken = '';
  let local: Episode;
  let far: { id: string; name: string };
  const dialog = () => ui.page.getByRole('dialog', { name: 'Engines' });
  const alertText = () => dialog().getByRole('alert').innerText();

  /** Name, URL and token into the dialog's form, then the certificate check, and then (if `confirm`) the adding. */
  async function addThroughDialog(name: string, url: string, token: string) {
    const box = dialog();
    await box.getByLabel('Engine name').fill(name);
    await box.getByLabel('Engine URL').fill(url);
    await box.getByLabel('Engine token').fill(token);
    await box.getByRole('button', { name: 'Check the certificate' }).click();
  }

  step('B is added through the Engines dialog, its fingerprint confirmed, each refusal named', async () => {
    const { page } = ui;
    b = await startServe(remote, ['--tls'], (child) => serving.push(child));
    bBase = `${b.url.protocol}//${b.url.host}`;
    bToken = (await remote.json<CreatedToken>(['token', 'create', 'studio'])).token;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    local = await newEpisode(ui, ui.smolfile('near', 'echo'));
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    // One engine: no Engine column, as before.
    await visible(page.getByRole('button', { name: `Open episode ${local.name}` }));
    expect(await page.getByRole('columnheader', { name: 'Engine' }).count()).toBe(0);

    await page.getByRole('button', { name: 'Engines' }).click();
    await visible(dialog().getByRole('row', { name: 'Engine local' }));
    expect(await dialog().getByRole('row', { name: 'Engine local' }).innerText()).toContain('reachable');

    // An address where nothing answers: said at the check, before any token is sent.
    await addThroughDialog('b', 'https://127.0.0.1:1', bToken);
    await until('the refusal', alertText, (text) => text.includes('https://127.0.0.1:1 is unreachable'));

    // B's address: its fingerprint, the one `smol serve` printed there, is shown to compare.
    await addThroughDialog('b', bBase, 'smol_not-a-token-of-b');
    const note = dialog().getByRole('note', { name: 'Certificate fingerprint' });
    await visible(note);
    expect(await note.innerText()).toContain(b.fingerprint!);
    await ui.shot('engines-probe');
    await dialog().getByRole('button', { name: 'Confirm and add' }).click();
    await until('the wrong token refused', alertText, (text) => text.includes('refuses the token (wrong token)'));

    // The right token: added, listed reachable.
    await dialog().getByLabel('Engine token').fill(bToken);
    await dialog().getByRole('button', { name: 'Confirm and add' }).click();
    const row = dialog().getByRole('row', { name: 'Engine b' });
    await visible(row);
    await until(
      'B reachable',
      () => row.innerText(),
      (text) => /\breachable\b/.test(text) && !/unreachable/.test(text),
    );
    expect(await row.innerText()).toContain(bBase);
    await ui.shot('engines-dialog');

    // The same name again: refused, naming it.
    await addThroughDialog('b', bBase, bToken);
    await dialog().getByRole('button', { name: 'Confirm and add' }).click();
    await until('the name taken', alertText, (text) => text.includes('an engine named b exists'));
    await dialog().getByRole('button', { name: 'Done' }).click();
  });

  step('B’s episode is in the list with its engine, and the filter picks an engine', async () => {
    const { page } = ui;
    // Started on B through A's forwarded API (as an agent there would start it); the page learns it from B's events.
    const smolfile = remote.smolfile('far', 'kernel = "@guests@/echo.elf"\nmemory = 16\n');
    const up = await ui.engine.api.request<{ episode: Episode }>('POST', '/api/v1/engines/b/episodes', {
      smolfile,
      name: 'far',
    });
    far = { id: up.episode.id, name: up.episode.name };
    const farRow = page.getByRole('row').filter({ has: page.getByRole('button', { name: 'Open episode far' }) });
    await visible(farRow);
    await visible(page.getByRole('columnheader', { name: 'Engine' }));
    expect(await farRow.locator('.engine-cell').innerText()).toBe('b');
    const nearRow = page
      .getByRole('row')
      .filter({ has: page.getByRole('button', { name: `Open episode ${local.name}` }) });
    expect(await nearRow.locator('.engine-cell').innerText()).toBe('local');
    await until(
      'far running',
      () => farRow.innerText(),
      (text) => text.includes('running'),
    );
    await ui.shot('engines-list');

    // One list, sorted across engines: a local episode made after far comes before it (newest first), near after.
    const late = await ui.engine.api.request<{ episode: Episode }>('POST', '/api/v1/episodes', {
      smolfile: ui.smolfile('late', 'echo'),
      name: 'late',
    });
    const names = () => page.getByRole('button', { name: /^Open episode / }).allInnerTexts();
    await until('newest first across engines', names, (shown) => shown.join() === ['late', 'far', local.name].join());
    await page
      .getByRole('columnheader', { name: /^Episode/ })
      .getByRole('button')
      .click();
    const byName = ['late', 'far', local.name].sort((x, y) => x.localeCompare(y));
    await until('by name across engines', names, (shown) => shown.join() === byName.join());
    await ui.shot('engines-sorted');
    // Back to newest first (the order is kept across reloads), and late gone again.
    await page
      .getByRole('columnheader', { name: /^Created/ })
      .getByRole('button')
      .click();
    await page
      .getByRole('columnheader', { name: /^Created/ })
      .getByRole('button')
      .click();
    await ui.engine.api.request('DELETE', `/api/v1/episodes/${late.episode.id}?force=true`);
    await until('late gone', names, (shown) => shown.join() === ['far', local.name].join());

    const filter = page.getByLabel('Filter by engine');
    await filter.selectOption('b');
    await until(
      'only B’s',
      () => page.getByRole('button', { name: /^Open episode / }).allInnerTexts(),
      (names) => names.join() === 'far',
    );
    await filter.selectOption('local');
    await until(
      'only A’s',
      () => page.getByRole('button', { name: /^Open episode / }).allInnerTexts(),
      (names) => names.join() === local.name,
    );
    await filter.selectOption('');
    await visible(farRow);
  });

  step('B’s episode opens at its own address, with its tree and its console, through A', async () => {
    const { page } = ui;
    await page.getByRole('button', { name: 'Open episode far' }).click();
    await visible(page.getByRole('heading', { level: 2, name: 'far' }));
    await until(
      'the address',
      async () => new URL(page.url()).hash,
      (h) => h.startsWith(`#/engines/b/episodes/${far.id}`),
    );
    await until('the echo banner', consoleText, (text) => text.includes('echo: ready'));
    await page.locator('[data-testid=console]').click();
    await page.keyboard.type('typed-through-a');
    await until('the echo from B', consoleText, (text) => text.includes('typed-through-a'));
    // A checkpoint through B's own dialog: made on B, and in the tree from B's events.
    await page.getByRole('button', { name: 'Checkpoint…' }).click();
    await page.getByLabel('Checkpoint name').fill('on-b');
    await page.getByRole('button', { name: 'Save checkpoint' }).click();
    await visible(page.getByRole('treeitem', { name: /^Snapshot on-b/ }));
    const snapshotsOnB = async () =>
      (
        await ui.engine.api.request<{ snapshots: { name: string }[] }>(
          'GET',
          `/api/v1/engines/b/episodes/${far.id}/snapshots`,
        )
      ).snapshots.map((s) => s.name);
    expect(await snapshotsOnB()).toContain('on-b');
    expect((await ui.snapshots(local.id)).map((s) => s.name)).not.toContain('on-b');

    // The keyboard shortcut C (the focus out of the console): B's checkpoint dialog, the snapshot made on B.
    await page.getByRole('heading', { level: 2, name: 'far' }).click();
    await page.keyboard.press('c');
    await page.getByLabel('Checkpoint name').fill('by-key');
    await page.getByRole('button', { name: 'Save checkpoint' }).click();
    await visible(page.getByRole('treeitem', { name: /^Snapshot by-key/ }));
    expect(await snapshotsOnB()).toContain('by-key');
    expect((await ui.snapshots(local.id)).map((s) => s.name)).not.toContain('by-key');

    // The palette: B's commands, titled with B; Pause and Resume act on B's VM.
    const farVm = async () =>
      (await ui.engine.api.request<Episode>('GET', `/api/v1/engines/b/episodes/${far.id}`)).vms[0]!;
    const palette = page.getByRole('dialog', { name: 'Commands' });
    await page.keyboard.press('Control+k');
    await visible(palette);
    await visible(palette.getByRole('option', { name: /^Checkpoint .* on b…/ }));
    await palette.getByRole('combobox', { name: 'Command' }).fill('pause');
    await ui.shot('engines-palette');
    expect(await palette.getByRole('option').allInnerTexts()).toEqual([`Pause ${(await farVm()).name} on b`]);
    await page.keyboard.press('Enter');
    await until('B’s VM paused', farVm, (vm) => vm.state === 'paused');
    expect((await ui.episodes()).find((e) => e.id === local.id)!.state).toBe('running');
    await visible(page.locator('.state-paused').first()); // the page has B's event too
    await page.keyboard.press('Control+k');
    await palette.getByRole('combobox', { name: 'Command' }).fill('resume');
    await visible(palette.getByRole('option', { name: /^Resume .* on b$/ }));
    await page.keyboard.press('Enter');
    await until('B’s VM running again', farVm, (vm) => vm.state === 'running');
    // A reload opens the same episode of the same engine.
    await page.reload();
    await visible(page.getByRole('heading', { level: 2, name: 'far' }));
    await until('the console again', consoleText, (text) => text.includes('echo: ready'));
    await ui.shot('engines-remote-episode');
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    await visible(page.getByRole('button', { name: `Open episode ${local.name}` }));
    expect(new URL(page.url()).hash).toBe('#/');
    // Back opens it again; the brand goes to the list from it too.
    await page.goBack();
    await visible(page.getByRole('heading', { level: 2, name: 'far' }));
    await page.getByRole('button', { name: 'Smol Studio' }).click();
    await visible(page.getByRole('button', { name: `Open episode ${local.name}` }));
    expect(new URL(page.url()).hash).toBe('#/');
  });

  step('B killed: marked unreachable in the list and the dialog, A’s episodes go on', async () => {
    const { page } = ui;
    b.child.kill('SIGKILL');
    process.kill(remote.enginePid()!, 'SIGKILL');
    const farRow = page.getByRole('row').filter({ has: page.getByRole('button', { name: 'Open episode far' }) });
    await until(
      'far marked',
      () => farRow.locator('.engine-cell').innerText(),
      (text) => text.includes('unreachable'),
    );
    // Its state is unknown now; the last one seen stays as dimmed text, not as a running dot.
    await until(
      'far’s state unknown',
      () => farRow.innerText(),
      (text) => text.includes('unknown') && text.includes('last seen running'),
    );
    expect(await farRow.locator('.state-running').count()).toBe(0);
    await ui.shot('engines-unknown-state');
    // Not the local engine's out-of-reach wall: A is there.
    expect(await page.getByRole('alert').filter({ hasText: 'The engine is out of reach' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Engines' }).click();
    const row = dialog().getByRole('row', { name: 'Engine b' });
    await until(
      'B unreachable in the dialog',
      () => row.innerText(),
      (text) => text.includes(`the engine b (${bBase}) is unreachable`),
    );
    await ui.shot('engines-unreachable');
    await dialog().getByRole('button', { name: 'Done' }).click();
    // B's episode still opens as it was; the palette lists its actions disabled, saying why.
    await page.getByRole('button', { name: 'Open episode far' }).click();
    await visible(page.getByRole('heading', { level: 2, name: 'far' }));
    await page.getByRole('heading', { level: 2, name: 'far' }).click();
    await page.keyboard.press('Control+k');
    const checkpoint = page.getByRole('dialog', { name: 'Commands' }).getByRole('option', { name: /^Checkpoint / });
    await visible(checkpoint);
    expect(await checkpoint.getAttribute('aria-disabled')).toBe('true');
    expect(await checkpoint.innerText()).toContain('b is unreachable: actions come back with it');
    await ui.shot('engines-palette-unreachable');
    await page.keyboard.press('Enter'); // a disabled command does nothing
    await page.keyboard.press('Escape');
    await page.keyboard.press('c'); // nor does its shortcut
    expect(await page.getByLabel('Checkpoint name').count()).toBe(0);
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    // A's episode opens and its console answers.
    await page.getByRole('button', { name: `Open episode ${local.name}` }).click();
    await visible(page.getByRole('heading', { level: 2, name: local.name }));
    await page.locator('[data-testid=console]').click();
    await page.keyboard.type('a-still-here');
    await until('A’s echo', consoleText, (text) => text.includes('a-still-here'));
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    // A page opened while B is away: one row says so, A's rows are there.
    await page.reload();
    await visible(page.getByRole('button', { name: `Open episode ${local.name}` }));
    const note = page.getByRole('row', { name: 'Engine b' });
    await until(
      'B’s row',
      () => note.innerText(),
      (text) => text.includes(`b: unreachable (the engine b (${bBase})`),
    );
    expect(await note.innerText()).toContain('retrying');
  });

  step('B served again at its address: the page finds it again by itself', async () => {
    const { page } = ui;
    b = await startServe(remote, ['--tls', '--listen', b.url.host], (child) => serving.push(child));
    expect(`${b.url.protocol}//${b.url.host}`).toBe(bBase);
    const farRow = page.getByRole('row').filter({ has: page.getByRole('button', { name: 'Open episode far' }) });
    await until(
      'far reachable again',
      () => farRow.locator('.engine-cell').innerText(),
      (text) => text === 'b',
    );
    expect(ui.pageErrors).toEqual([]);
  });

  step('B away with its episode open: unknown, last seen, actions off saying why; live again', async () => {
    const { page } = ui;
    // far crashed with B's SIGKILL above: a new episode on B, running, through A's forwarded API.
    const smolfile = remote.smolfile('watched', 'kernel = "@guests@/echo.elf"\nmemory = 16\n');
    const up = await ui.engine.api.request<{ episode: Episode }>('POST', '/api/v1/engines/b/episodes', {
      smolfile,
      name: 'watched',
    });
    const onB = () => ui.engine.api.request<Episode>('GET', `/api/v1/engines/b/episodes/${up.episode.id}`);
    const open = page.getByRole('button', { name: 'Open episode watched' });
    await visible(open);
    const seen = await until(
      'watched running on B',
      onB,
      (episode) => episode.state === 'running' && episode.vms[0]?.state === 'running',
    );
    const vm = seen.vms[0]!;
    await open.click();
    await visible(page.getByRole('heading', { level: 2, name: 'watched' }));
    // Images from B's episode: its Back returns to it (issue 24's mend of Back, on a remote engine's episode).
    await page.getByRole('button', { name: 'Images', exact: true }).click();
    await visible(page.getByRole('region', { name: 'Images' }));
    await page.getByRole('button', { name: 'Back to episode watched', exact: true }).click();
    await visible(page.getByRole('heading', { level: 2, name: 'watched' }));
    expect(new URL(page.url()).hash).toBe(`#/engines/b/episodes/${up.episode.id}?vm=${up.episode.vms[0]!.id}`);
    const head = page.locator('.episode-head');
    const tab = page.getByRole('tab', { name: `VM ${vm.name}` });
    const actions = page.getByRole('group', { name: `Actions for ${vm.name}` });
    const checkpoint = actions.getByRole('button', { name: 'Checkpoint…' });
    const remove = page.getByRole('button', { name: 'Delete episode' });
    const reason = 'b is unreachable: actions come back with it';
    await until(
      'the live state in the header',
      () => head.innerText(),
      (text) => text.includes('running') && !text.includes('unknown'),
    );
    // A checkpoint through the page, so the VM is at a card of the tree ("here").
    await checkpoint.click();
    await page.getByLabel('Checkpoint name').fill('before-away');
    await page.getByRole('button', { name: 'Save checkpoint' }).click();
    await visible(page.getByRole('treeitem', { name: /^Snapshot before-away/ }));
    await until(
      'the tree’s here badge',
      () => page.locator('.here-vm.state-running').count(),
      (n) => n > 0,
    );
    expect(await checkpoint.isEnabled()).toBe(true);

    b.child.kill('SIGKILL');
    process.kill(remote.enginePid()!, 'SIGKILL');
    await until(
      'the header: state unknown, last seen running',
      () => head.innerText(),
      (text) => text.includes('unknown') && text.includes('last seen running'),
    );
    await ui.shot('engines-episode-unknown');
    expect(await head.locator('.state-running').count()).toBe(0);
    expect(await tab.innerText()).toMatch(/unknown[\s\S]*last seen running/);
    expect(await tab.locator('.state-running').count()).toBe(0);
    // No uptime as if live; the tree's "here" badge is hollow too.
    expect(await tab.innerText()).not.toMatch(/\bup \d/);
    expect(await page.locator('.here-vm.state-running').count()).toBe(0);
    expect(await page.locator('.here-vm.state-unknown').count()).toBeGreaterThan(0);
    // The actions that need the engine are off, and say why.
    expect(await actions.getByRole('note').innerText()).toBe(reason);
    for (const name of ['Checkpoint…', 'Fork…', 'Pause', 'Stop', 'Reset', 'Export…', 'Remove VM']) {
      const button = actions.getByRole('button', { name, exact: true });
      expect(await button.isDisabled(), name).toBe(true);
      expect(await button.getAttribute('title'), name).toBe(reason);
    }
    expect(await remove.isDisabled()).toBe(true);
    expect(await remove.getAttribute('title')).toBe(reason);
    // The banner says so as before.
    expect(await page.locator('.engine-banner').innerText()).toContain('unreachable');

    b = await startServe(remote, ['--tls', '--listen', b.url.host], (child) => serving.push(child));
    // Live again: the header shows what B says now (its VM died with B's SIGKILL, so most likely crashed).
    await until(
      'the header live again, as B has it',
      async () => [await head.innerText(), (await onB().catch(() => null))?.state] as const,
      ([text, state]) => !!state && text.includes(state) && !text.includes('unknown') && !text.includes('last seen'),
    );
    await until(
      'the actions back',
      () => actions.getByRole('note').count(),
      (n) => n === 0,
    );
    expect(await tab.innerText()).not.toContain('unknown');
    expect(await remove.isEnabled()).toBe(true);
    expect(await remove.getAttribute('title')).toBeNull();
    expect(await page.locator('.here-vm.state-unknown').count()).toBe(0);
    await ui.shot('engines-episode-live-again');
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    await visible(open);
  });

  step('B removed through the dialog: its rows and the Engine column go', async () => {
    const { page } = ui;
    await page.getByRole('button', { name: 'Engines' }).click();
    await dialog().getByRole('button', { name: 'Remove b' }).click();
    await until(
      'B gone',
      () => dialog().getByRole('row', { name: 'Engine b' }).count(),
      (n) => n === 0,
    );
    await dialog().getByRole('button', { name: 'Done' }).click();
    await until(
      'far gone',
      () => page.getByRole('button', { name: 'Open episode far' }).count(),
      (n) => n === 0,
    );
    expect(await page.getByRole('columnheader', { name: 'Engine' }).count()).toBe(0);
  });
});
