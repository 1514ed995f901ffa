// Tier 4 (TESTING.md): the UI in Debian's Chromium against a real engine with real VMs, clicking what a person
// clicks and checking what a person sees: create an episode from smolfiles/echo.smolfile, see its console, type
// and see the echo, checkpoint with a note, fork 3 and see three children in the tree, restore, replay, delete and
// undo. Screenshots of each view go to test-results/e2e/. Run: see e2e/README.md.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { CHROMIUM_ARGS } from '../src/bench/ui.js';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Episode, Snapshot } from '../src/api/schema.js';
import { root, startUiEngine, type UiEngine } from './ui-engine.js';

const shots = path.join(root, 'test-results', 'e2e');
const CHROMIUM = process.env.SMOL_CHROMIUM ?? '/usr/bin/chromium';
/** Inside the lab the engine runs under emulation: what takes milliseconds on hardware takes seconds there. */
const SLOW = process.env.SMOL_E2E_LAB === '1' ? 120_000 : 30_000;

let engine: UiEngine;
let browser: Browser;
let page: Page;
const pageErrors: string[] = [];

async function shot(name: string) {
  await page.screenshot({ path: path.join(shots, `${name}.png`) });
}

/** Waits until `read` returns something `accept` takes; fails with the last value seen. */
async function until<T>(what: string, read: () => Promise<T>, accept: (value: T) => boolean, timeoutMs = SLOW) {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await read().catch(() => undefined as T);
    if (last !== undefined && accept(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`timed out waiting for ${what}; last seen: ${JSON.stringify(last)?.slice(0, 2000)}`);
}

const visible = (locator: Locator, timeout = SLOW) => locator.waitFor({ state: 'visible', timeout });

/** The fork tree re-fits (a short animation) when it gains nodes: a click waits until it stands still. */
async function treeSettled() {
  const transform = () => page.locator('.react-flow__viewport').getAttribute('style');
  let last = await transform();
  for (let i = 0; i < 50; i++) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    const now = await transform();
    if (now === last) return;
    last = now;
  }
}
const consoleText = () => page.locator('[data-testid=console] .xterm-rows').innerText();
const vmTabs = () => page.getByRole('tab', { name: /^VM / });

async function episodes(): Promise<Episode[]> {
  return (await engine.api.call('listEpisodes')).episodes;
}
async function snapshots(episode: string): Promise<Snapshot[]> {
  return (await engine.api.call('listSnapshots', { params: { episode } })).snapshots;
}

beforeAll(async () => {
  mkdirSync(shots, { recursive: true });
  engine = await startUiEngine();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    // The bench's flags: without the networking ones Chromium's background connections are refused and it waits.
    args: CHROMIUM_ARGS,
  });
  page = await browser.newPage({ viewport: { width: 1440, height: 900 }, colorScheme: 'dark' });
  page.on('pageerror', (error) => pageErrors.push(error.message));
  page.on('dialog', (dialog) => void dialog.dismiss()); // no link is opened by these tests
});

afterAll(async () => {
  await browser?.close();
  await engine?.close();
});

/** The flow is one story: once a step failed, the later ones say so instead of failing for their own reasons. */
let failedStep: string | null = null;
function step(name: string, body: () => Promise<void>) {
  it(name, async () => {
    if (failedStep) throw new Error(`not run: the step "${failedStep}" failed`);
    try {
      await body();
    } catch (error) {
      failedStep = name;
      await shot(`failed-${name.slice(0, 40).replace(/\W+/g, '-')}`).catch(() => undefined);
      throw new Error(`${(error as Error).message}\nthe engine side said:\n${engine.log()}`, { cause: error });
    }
  });
}

describe('the UI against a real engine', () => {
  let episodeId = '';
  let mainVm = '';

  step('opens at the printed URL, takes the token out of the address bar, and shows the empty list', async () => {
    await page.goto(engine.url);
    await visible(page.getByText('connected', { exact: true }));
    expect(new URL(page.url()).searchParams.has('token')).toBe(false);
    await visible(page.getByRole('heading', { name: 'No episodes yet' }));
    await shot('01-empty');
    await page.reload(); // the token stays with the tab
    await visible(page.getByText('connected', { exact: true }));
  });

  step('creates an episode from smolfiles/echo.smolfile and shows its console', async () => {
    await page.getByRole('button', { name: 'New episode' }).first().click();
    await page.getByRole('radio', { name: /echo\.smolfile/ }).check();
    await shot('02-new-episode');
    await page.getByRole('button', { name: 'Start episode' }).click();
    // The episode's view, or the engine's refusal in the dialog (said at once rather than after a timeout).
    const opened = page.getByRole('heading', { level: 2, name: /^echo-\d+$/ });
    const refused = page.getByRole('dialog').getByRole('alert');
    await visible(opened.or(refused));
    if (await refused.isVisible()) throw new Error(`the engine refused the episode: ${await refused.innerText()}`);
    const [episode] = await until('the episode to exist', episodes, (list) => list.length === 1);
    episodeId = episode!.id;
    mainVm = episode!.vms[0]!.id;
    await visible(page.getByRole('tab', { name: `VM ${episode!.vms[0]!.name}` }));
    await until('the echo guest’s banner on the console', consoleText, (text) => text.includes('echo: ready'));
    await shot('03-episode-console');
  });

  step('types into the console and sees the echo', async () => {
    await page.locator('[data-testid=console]').click();
    await page.keyboard.type('typed-from-the-ui');
    // The guest echoes every character back: the text appears twice only if it echoed (xterm shows nothing typed).
    await until('the echo', consoleText, (text) => text.includes('typed-from-the-ui'));
    await shot('04-typed');
  });

  step('checkpoints with a name and a note, and shows it in the tree and its details', async () => {
    await page.getByRole('button', { name: 'Checkpoint…' }).click();
    const dialog = page.getByRole('dialog', { name: /^Checkpoint / });
    await dialog.getByLabel('Checkpoint name').fill('before-fork');
    await dialog.getByLabel('Checkpoint note').fill('clean echo guest, typed once');
    await dialog.getByRole('button', { name: 'Save checkpoint' }).click();
    const node = page.getByRole('treeitem', { name: /^Snapshot before-fork/ });
    await visible(node);
    await treeSettled();
    await node.click();
    await until(
      'the note in the details',
      () => page.getByLabel('Snapshot note').inputValue(),
      (v) => v.includes('clean echo guest'),
    );
    const saved = (await snapshots(episodeId)).find((s) => s.name === 'before-fork');
    expect(saved).toMatchObject({ note: 'clean echo guest, typed once', kind: 'manual', vm: mainVm });
    await shot('05-checkpoint-details');
  });

  step(
    'forks 3: three new VMs, and a checkpoint of each makes three children of the fork point in the tree',
    async () => {
      await page
        .getByRole('tab', { name: /^VM echo-\d+$/ })
        .first()
        .click();
      await page.getByRole('button', { name: 'Fork…' }).click();
      const dialog = page.getByRole('dialog', { name: /^Fork / });
      await dialog.getByLabel('Number of forks').fill('3');
      await dialog.getByRole('button', { name: 'Fork ×3' }).click();
      await until(
        'four VM tabs',
        () => vmTabs().count(),
        (n) => n === 4,
      );
      const forkPoint = await until(
        'the fork point',
        async () => (await snapshots(episodeId)).find((s) => s.kind === 'fork'),
        (s) => s !== undefined,
      );
      // Each child runs from the fork point: a checkpoint of each is a child of it in the tree.
      for (let i = 1; i <= 3; i++) {
        await vmTabs().nth(i).click();
        await page.getByRole('button', { name: 'Checkpoint…' }).click();
        await page
          .getByRole('dialog', { name: /^Checkpoint / })
          .getByRole('button', { name: 'Save checkpoint' })
          .click();
        await page.getByRole('dialog').waitFor({ state: 'detached', timeout: SLOW });
      }
      const children = await until(
        'three children of the fork point',
        async () => (await snapshots(episodeId)).filter((s) => s.parent === forkPoint!.id),
        (list) => list.length === 3,
      );
      for (const child of children)
        await visible(page.getByRole('treeitem', { name: new RegExp(`^Snapshot ${child.name}`) }));
      await treeSettled();
      await page.getByRole('treeitem', { name: new RegExp(`^Snapshot ${children[0]!.name}`) }).click();
      await visible(page.getByRole('button', { name: forkPoint!.name, exact: true })); // its parent, in the details
      await treeSettled();
      await shot('06-fork-tree');
    },
  );

  step('lists the episode with its four VMs and five snapshots, and opens it again', async () => {
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    const row = page.getByRole('row').filter({ has: page.getByRole('button', { name: /^Open episode echo-\d+$/ }) });
    await visible(row);
    // Columns: select, episode, state, VMs, uptime, CPU · memory, snapshots, disk, created.
    const cells = row.getByRole('cell');
    await until(
      'the counts in the row',
      async () => [await cells.nth(3).innerText(), await cells.nth(6).innerText()],
      ([vms, snapshots]) => vms === '4' && snapshots === '5',
    );
    await shot('06b-episode-list');
    await row.getByRole('button', { name: /^Open episode / }).click();
    await visible(page.getByRole('heading', { level: 2, name: /^echo-\d+$/ }));
  });

  step('restores the first VM to the checkpoint, offering a named checkpoint first', async () => {
    await vmTabs().first().click();
    await treeSettled();
    await page.getByRole('treeitem', { name: /^Snapshot before-fork/ }).click();
    await page.getByRole('button', { name: /^Restore echo-\d+ here…$/ }).click();
    const dialog = page.getByRole('dialog', { name: /^Restore .* to before-fork$/ });
    await visible(dialog.getByText('keeps where it is now as a restore-point snapshot', { exact: false }));
    await dialog.getByLabel('Checkpoint name').fill('pre-restore');
    await dialog.getByRole('button', { name: 'Restore', exact: true }).click();
    await visible(vmTabs().first().getByText('at before-fork'));
    const names = (await snapshots(episodeId)).map((s) => s.name);
    expect(names).toContain('pre-restore');
    await until(
      'the console again',
      () => page.getByRole('status').filter({ hasText: 'live' }).count(),
      (n) => n > 0,
    );
    await treeSettled();
    await shot('07-restored');
  });

  step('replays the recording with its markers, and offers restore and fork from a point in it', async () => {
    await page.getByRole('tab', { name: 'Replay' }).click();
    const marker = page.getByRole('button', { name: /^Marker: checkpoint before-fork/ });
    await visible(marker);
    await marker.click();
    await visible(page.getByRole('button', { name: 'Restore here (before-fork)' }));
    // At the checkpoint's marker the replayed screen is the one the checkpoint saved: the typed text is on it.
    const replayed = () => page.locator('[data-testid=replay] .xterm-rows').innerText();
    await until('the typed text in the replay', replayed, (text) => text.includes('typed-from-the-ui'));
    await page.getByLabel('Replay position').fill('0'); // the start: nothing printed yet
    await until('an empty replay screen', replayed, (text) => !text.includes('typed-from-the-ui'));
    await page.getByRole('button', { name: 'Play replay' }).click();
    await page.getByLabel('Replay speed').selectOption('16');
    await shot('08-replay');
    await page.getByRole('tab', { name: 'Console' }).click();
  });

  step('deletes a snapshot only after its Undo toast, and Undo keeps it', async () => {
    const victim = (await snapshots(episodeId)).find((s) => s.name === 'pre-restore')!;
    await treeSettled();
    await page.getByRole('treeitem', { name: /^Snapshot pre-restore/ }).click();
    await page.getByRole('button', { name: 'Delete snapshot' }).click();
    await page.getByRole('treeitem', { name: /^Snapshot pre-restore/ }).waitFor({ state: 'detached' });
    await shot('09-delete-undo-toast');
    await page.getByRole('button', { name: 'Undo' }).click();
    await visible(page.getByRole('treeitem', { name: /^Snapshot pre-restore/ }));
    await new Promise((resolve) => setTimeout(resolve, 7000)); // past the toast: nothing was sent
    expect((await snapshots(episodeId)).map((s) => s.id)).toContain(victim.id);
  });

  step('deletes the episode once the toast expires', async () => {
    await page.getByRole('button', { name: 'Delete episode' }).click();
    await visible(page.getByRole('heading', { name: 'No episodes yet' }));
    expect(await episodes()).toHaveLength(1); // not yet: the toast is still up
    await until('the engine to delete it', episodes, (list) => list.length === 0, 30_000);
    await shot('10-deleted');
    expect(pageErrors).toEqual([]);
  });
});
