// Tier 4 (TESTING.md): an episode's activity log (issue 24, item 7; docs/ui.md "Activity"), in Debian's Chromium
// against a real engine with echo guests: what happened (created, forked, checkpointed, restored) as rows in time
// order, filtered by kind and by text, each row a click away from its node on the tree.
import { describe, expect } from 'vitest';
import type { ForkResponse, Snapshot } from '../src/api/schema.js';
import { newEpisode, type UiSession, uiStory, until, visible } from './ui-page.js';

let ui: UiSession;
const step = uiStory((s) => (ui = s));

describe('the activity log', () => {
  const rows = () => ui.page.getByRole('list', { name: 'Activity log' }).locator('.activity-text').allInnerTexts();

  step('lists what happened in the episode, in order', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    const episode = await newEpisode(ui, ui.smolfile('active', 'echo'));
    const vm = episode.vms[0]!;
    const api = <T>(method: string, url: string, body?: unknown) => ui.engine.api.request<T>(method, url, body);
    const first = await api<Snapshot>('POST', `/api/v1/vms/${vm.id}/checkpoint`, { name: 'first' });
    await api<Snapshot>('POST', `/api/v1/vms/${vm.id}/checkpoint`, { name: 'second' });
    await api<ForkResponse>('POST', `/api/v1/snapshots/${first.id}/fork`, { count: 1 });
    await api('POST', `/api/v1/vms/${vm.id}/restore`, { snapshot: first.id });
    await page.getByRole('button', { name: 'Activity', exact: true }).click();
    const log = page.getByRole('region', { name: 'Activity' });
    await visible(log);
    const name = episode.name;
    await until('every row', rows, (list) => list.some((t) => t.includes('restored')));
    const list = await rows();
    expect(list.slice(0, 4)).toEqual([
      `episode ${name} created`,
      `${name} started`,
      `${name} checkpointed first`,
      `${name} checkpointed second, after first`,
    ]);
    expect(list).toContain(`${name}-1 forked from ${name}`);
    expect(list.at(-1)).toMatch(new RegExp(`^${name} restored; where it was kept as `));
    await ui.shot('activity-01-log');
  });

  step('filters by kind and by text', async () => {
    const { page } = ui;
    const all = (await rows()).length;
    const name = (await ui.episodes())[0]!.name;
    await page.getByRole('button', { name: /^checkpointed 2$/ }).click();
    await until(
      'checkpoints hidden',
      rows,
      (list) => list.length === all - 2 && !list.some((t) => t.includes('checkpointed')),
    );
    await page.getByRole('button', { name: /^checkpointed 2$/ }).click();
    await page.getByLabel('Filter the activity').fill('second');
    await until('one row', rows, (list) => list.join() === `${name} checkpointed second, after first`);
    await ui.shot('activity-02-filtered');
  });

  step('a row selects its node on the tree', async () => {
    const { page } = ui;
    await page.getByRole('list', { name: 'Activity log' }).getByRole('button').first().click();
    await until(
      'the snapshot selected in the tree',
      () => page.getByRole('treeitem', { name: /^Snapshot second/ }).getAttribute('aria-selected'),
      (selected) => selected === 'true',
    );
    // Back to the details: the snapshot the row named.
    await page.getByRole('button', { name: 'Activity', exact: true }).click();
    await until(
      'its details',
      () => page.getByLabel('Snapshot name').inputValue(),
      (value) => value === 'second',
    );
    await ui.shot('activity-03-row-selected-its-node');
    expect(ui.pageErrors).toEqual([]);
  });
});
