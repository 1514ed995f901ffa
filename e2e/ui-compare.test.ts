// Tier 4 (TESTING.md): side by side (issue 24, item 3; docs/ui.md, "Side by side"), in Debian's Chromium against a
// real engine with count guests (they print count=N, N growing, for ever). Two episodes ticked in the list and
// compared show both VMs' live consoles growing; a VM against one of its checkpoints shows the checkpoint's screen
// as it was (a count the live one has passed); a label set on one side is kept by the engine; "Diff these" on two
// checkpoints shows the engine's diff, and says why not for a VM; swap and close change the address; a narrow
// window stacks the sides; two cards chosen on the tree open side by side; an address with bad or unknown ids says what is wrong.
import { describe, expect } from 'vitest';
import type { Snapshot, Vm } from '../src/api/schema.js';
import { newEpisode, sleep, type UiSession, uiStory, until, visible } from './ui-page.js';

let ui: UiSession;
const step = uiStory((s) => (ui = s));

/** The highest count=N in a text (-1: none). */
const lastCount = (text: string) => Math.max(-1, ...[...text.matchAll(/count=(\d+)/g)].map((m) => Number(m[1])));

describe('side by side', () => {
  let one: Vm;
  let two: Vm;
  let first: Snapshot;
  let second: Snapshot;
  const api = <T>(method: string, url: string, body?: unknown) => ui.engine.api.request<T>(method, url, body);
  const left = () => ui.page.getByRole('region', { name: 'Left side' });
  const right = () => ui.page.getByRole('region', { name: 'Right side' });
  const hash = () => new URL(ui.page.url()).hash;
  const consoleText = (side: ReturnType<typeof left>) => side.locator('[data-testid=console] .xterm-rows').innerText();

  step('two episodes ticked in the list and compared: both consoles live, side by side', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    one = (await newEpisode(ui, ui.smolfile('left-count', 'count'))).vms[0]!;
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    two = (await newEpisode(ui, ui.smolfile('right-count', 'count'))).vms[0]!;
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    const episodes = await ui.episodes();
    const nameOf = (vm: Vm) => episodes.find((e) => e.id === vm.episode)!.name;
    await page.getByRole('checkbox', { name: `Select ${nameOf(one)}` }).check();
    await page.getByRole('checkbox', { name: `Select ${nameOf(two)}` }).check();
    await page.getByRole('button', { name: 'Compare', exact: true }).click();
    await until(
      'the address names both VMs',
      async () => hash(),
      (h) => h.startsWith('#/compare?'),
    );
    const route = new URLSearchParams(hash().slice('#/compare?'.length));
    expect(new Set([route.get('a'), route.get('b')])).toEqual(new Set([one.id, two.id]));
    // Whichever order the list had them in, each side names its VM and its episode, and its console grows.
    for (const side of [left(), right()]) {
      await visible(side.getByRole('heading', { level: 3, name: /^VM / }));
      const before = await until(
        'output on this side',
        () => consoleText(side),
        (t) => lastCount(t) >= 0,
      );
      await until(
        'more output on this side',
        () => consoleText(side),
        (t) => lastCount(t) > lastCount(before),
      );
      await visible(side.getByText('running'));
      expect(await side.getByTestId('compare-metrics').count()).toBe(1);
    }
    const [a, b] = [await left().innerText(), await right().innerText()];
    expect([a.includes(nameOf(one)), b.includes(nameOf(two))].join()).toBe(
      route.get('a') === one.id ? 'true,true' : 'false,false',
    );
    // "Diff these" is off for two VMs, and says why.
    expect(await page.getByRole('button', { name: 'Diff these' }).isDisabled()).toBe(true);
    await visible(page.getByRole('note').getByText(/a VM is not a point of it yet/));
    await ui.shot('compare-01-two-live-vms');
  });

  step('a VM against one of its checkpoints: the checkpoint’s screen as it was when taken', async () => {
    const { page } = ui;
    first = await api<Snapshot>('POST', `/api/v1/vms/${one.id}/checkpoint`, { name: 'first' });
    await sleep(1500); // the guest counts on, past the checkpoint
    await page.goto(`${ui.engine.url}#/compare?a=${one.id}&b=${first.id}`);
    await visible(right().getByRole('heading', { level: 3, name: 'Snapshot first' }));
    const screen = right().getByLabel('Last screen');
    await visible(screen);
    const taken = lastCount(await screen.innerText());
    expect(taken).toBeGreaterThanOrEqual(0);
    // The live side has passed it; the snapshot's stays where it was.
    await until(
      'the live count past the checkpoint',
      () => consoleText(left()),
      (t) => lastCount(t) > taken,
    );
    await sleep(500);
    expect(lastCount(await screen.innerText())).toBe(taken);
    await visible(right().getByText(/None stored: a snapshot keeps no CPU or memory figures/));
    await ui.shot('compare-02-vm-and-its-checkpoint');
  });

  step('a label set on one side is kept by the engine and shown there', async () => {
    const side = right();
    await side.getByLabel('New label for snapshot first').fill('reward=0.75');
    await side.getByRole('button', { name: 'Set label' }).click();
    await until(
      'the label kept',
      async () => (await api<Snapshot>('GET', `/api/v1/snapshots/${first.id}`)).labels,
      (labels) => labels?.reward === 0.75,
    );
    await visible(side.getByText('reward=0.75'));
    // The other side is untouched.
    expect(await left().getByText('reward=0.75').count()).toBe(0);
  });

  step('swap and close change the sides and the address; the empty side offers a choice', async () => {
    const { page } = ui;
    await page.getByRole('button', { name: 'Swap sides' }).click();
    await until(
      'swapped',
      async () => hash(),
      (h) => h === `#/compare?a=${first.id}&b=${one.id}`,
    );
    await visible(left().getByRole('heading', { level: 3, name: 'Snapshot first' }));
    await page.getByRole('button', { name: 'Close the right side' }).click();
    await until(
      'closed',
      async () => hash(),
      (h) => h === `#/compare?a=${first.id}`,
    );
    const chooser = right().getByRole('combobox', { name: 'Choose the other side' });
    await visible(chooser);
    second = await api<Snapshot>('POST', `/api/v1/vms/${one.id}/checkpoint`, { name: 'second' });
    await until(
      'second offered',
      () => chooser.locator('option').allInnerTexts(),
      (o) => o.includes('snapshot second'),
    );
    await chooser.selectOption({ label: 'snapshot second' });
    await until(
      'chosen',
      async () => hash(),
      (h) => h === `#/compare?a=${first.id}&b=${second.id}`,
    );
    await visible(right().getByRole('heading', { level: 3, name: 'Snapshot second' }));
  });

  step('"Diff these" on two checkpoints opens the engine’s diff of them', async () => {
    const { page } = ui;
    const diffButton = page.getByRole('button', { name: 'Diff these' });
    await until(
      'Diff these on',
      () => diffButton.isEnabled(),
      (on) => on,
    );
    await diffButton.click();
    const diff = page.getByRole('region', { name: 'Diff' });
    await visible(diff.getByRole('heading', { name: 'Diff: first → second' }));
    const between = diff.getByLabel('Console between the two points');
    await visible(between);
    // The output between the two markers: counts after the first's screen, none after the second's.
    const counts = [...(await between.innerText()).matchAll(/count=(\d+)/g)].map((m) => Number(m[1]));
    expect(counts.length).toBeGreaterThan(0);
    const firstScreen = lastCount(await left().getByLabel('Last screen').innerText());
    const secondScreen = lastCount(await right().getByLabel('Last screen').innerText());
    expect(Math.min(...counts)).toBeGreaterThan(firstScreen - 1);
    expect(Math.max(...counts)).toBeLessThanOrEqual(secondScreen);
    await visible(diff.getByText('No writable disks to compare (this guest has none).'));
    await diff.scrollIntoViewIfNeeded();
    await ui.shot('compare-03-diff-of-two-checkpoints');
  });

  step('a narrow window stacks the sides', async () => {
    const { page } = ui;
    await page.setViewportSize({ width: 800, height: 900 });
    await sleep(200);
    const [l, r] = [await left().boundingBox(), await right().boundingBox()];
    expect(r!.y).toBeGreaterThanOrEqual(l!.y + l!.height);
    expect(Math.abs(r!.x - l!.x)).toBeLessThan(2);
    await page.evaluate(() => window.scrollTo(0, 0));
    await ui.shot('compare-04-narrow-window-stacked');
    await page.setViewportSize({ width: 1440, height: 900 });
  });

  step('on the tree: a card selected, a second shift-clicked, "Side by side" opens the pair', async () => {
    const { page } = ui;
    await page.goto(`${ui.engine.url}#/episodes/${one.episode}`);
    const card = (name: string) => page.getByRole('treeitem', { name: new RegExp(`^Snapshot ${name}(,|$)`) });
    await card('first').click();
    await visible(page.getByText('Shift-click a second card to compare it with first'));
    await card('second').click({ modifiers: ['Shift'] });
    await until(
      'second marked',
      async () => (await card('second').getAttribute('aria-label')) ?? '',
      (l) => l.includes('marked for side by side'),
    );
    // The selection stays where it was.
    expect(await page.getByLabel('Snapshot name').inputValue()).toBe('first');
    await ui.shot('compare-06-tree-pair-marked');
    await page.getByRole('button', { name: 'Side by side: first ↔ second' }).click();
    await until(
      'the pair in the address',
      async () => hash(),
      (h) => h === `#/compare?a=${first.id}&b=${second.id}`,
    );
    await visible(right().getByRole('heading', { level: 3, name: 'Snapshot second' }));
    expect(await page.getByRole('button', { name: 'Diff these' }).isEnabled()).toBe(true);
    // Back returns to the episode.
    await page.goBack();
    await visible(card('first'));
  });

  step('an address with bad or unknown ids says what is wrong, not a blank page', async () => {
    const { page } = ui;
    await page.goto(`${ui.engine.url}#/compare?a=nonsense&b=vm-aaaaaaaaaa`);
    await visible(left().getByRole('alert'));
    expect(await left().getByRole('alert').innerText()).toContain('“nonsense” is not a VM or snapshot id');
    await visible(right().getByRole('alert'));
    expect(await right().getByRole('alert').innerText()).toContain('No VM vm-aaaaaaaaaa on this engine');
    await ui.shot('compare-05-bad-address');
    await page.goto(`${ui.engine.url}#/compare?a=sn-bbbbbbbbbb`);
    await visible(left().getByRole('alert'));
    expect(await left().getByRole('alert').innerText()).toContain('No snapshot sn-bbbbbbbbbb on this engine');
    await page.goto(`${ui.engine.url}#/compare`);
    await visible(page.getByText(/The address names nothing to compare/));
    expect(ui.pageErrors).toEqual([]);
  });
});
