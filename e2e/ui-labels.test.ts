// Tier 4 (TESTING.md): labels in the app (issue 24, item 2; docs/labels.md), in Debian's Chromium against a real
// engine with echo guests. A snapshot's labels show on its card and in its details, where a person sets and removes
// them (the engine keeps them: checked through the API); the tree is coloured by a numeric label with a legend, the
// snapshots without it marked; the best branch runs from the root to the highest value, or the lowest; a VM's labels
// are edited beside it, and the list of many VMs shows, sorts and filters by a label column.
import { describe, expect } from 'vitest';
import type { ForkResponse, Snapshot, Vm } from '../src/api/schema.js';
import { newEpisode, type UiSession, uiStory, until, visible } from './ui-page.js';

let ui: UiSession;
const step = uiStory((s) => (ui = s));

describe('labels in the app', () => {
  let episodeId = '';
  let vm: Vm;
  const snapshot = async (name: string) => (await ui.snapshots(episodeId)).find((s) => s.name === name)!;
  const card = (name: string) => ui.page.getByRole('treeitem', { name: new RegExp(`^Snapshot ${name}(,|$)`) });
  const classes = async (name: string) => (await card(name).getAttribute('class')) ?? '';
  const api = <T>(method: string, url: string, body?: unknown) => ui.engine.api.request<T>(method, url, body);

  step('a snapshot’s labels show on its card and in its details, where they are set and removed', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    const episode = await newEpisode(ui, ui.smolfile('labelled', 'echo'));
    episodeId = episode.id;
    vm = episode.vms[0]!;
    // The tree (a bare kernel's episode has no base snapshot): first → {deeper → plain, branch}; rewards on two of
    // them, set through the API as a harness would.
    const first = await api<Snapshot>('POST', `/api/v1/vms/${vm.id}/checkpoint`, { name: 'first' });
    await api<Snapshot>('POST', `/api/v1/vms/${vm.id}/checkpoint`, { name: 'deeper' });
    await api<Snapshot>('POST', `/api/v1/vms/${vm.id}/checkpoint`, { name: 'plain' });
    const fork = await api<ForkResponse>('POST', `/api/v1/snapshots/${first.id}/fork`, { count: 1 });
    await api<Snapshot>('POST', `/api/v1/vms/${fork.children[0]!.id}/checkpoint`, { name: 'branch' });
    await api('PATCH', `/api/v1/snapshots/${first.id}`, { labels: { reward: 0.3 } });
    await api('PATCH', `/api/v1/snapshots/${(await snapshot('deeper')).id}`, { labels: { reward: 0.9, task: 'fix' } });
    await visible(card('deeper'));
    expect(await card('deeper').getAttribute('aria-label')).toContain('labels reward=0.9 task=fix');
    expect(await card('deeper').getByTestId('node-labels').innerText()).toBe('reward=0.9 task=fix');

    await card('branch').click();
    const details = page.getByRole('region', { name: 'Snapshot details' });
    await visible(details.getByText('No labels.'));
    const field = page.getByLabel('New label for snapshot branch');
    await field.fill('reward=0.1');
    await details.getByRole('button', { name: 'Set label' }).click();
    await until(
      'the number 0.1 kept',
      async () => (await snapshot('branch')).labels,
      (l) => l?.reward === 0.1,
    );
    await visible(card('branch').getByText('reward=0.1'));
    await field.fill('note=retry');
    await field.press('Enter');
    await visible(details.getByText('note=retry'));
    expect((await snapshot('branch')).labels).toEqual({ reward: 0.1, note: 'retry' });
    await ui.shot('labels-01-snapshot-labels-in-details-and-card');
    await page.getByRole('button', { name: 'Remove label note of snapshot branch' }).click();
    await until(
      'note removed',
      async () => (await snapshot('branch')).labels,
      (l) => l?.note === undefined,
    );
    await details.getByText('note=retry').waitFor({ state: 'detached' });
    // A key the engine refuses: its message, naming the key and the rule, where the person typed it.
    await field.fill('9lives=1');
    await field.press('Enter');
    const alert = details.getByRole('alert');
    await visible(alert);
    expect(await alert.innerText()).toMatch(/9lives.*a label key takes letters/s);
    expect((await snapshot('branch')).labels).toEqual({ reward: 0.1 });
    await field.fill('no equals sign');
    await field.press('Enter');
    expect(await alert.innerText()).toContain('write key=value');
  });

  step('coloured by reward: a legend from the lowest to the highest, the cards without one marked', async () => {
    const { page } = ui;
    await page.getByLabel('Colour by label').selectOption('reward');
    const legend = page.getByRole('img', { name: /^Coloured by reward/ });
    await visible(legend);
    expect(await legend.getAttribute('aria-label')).toBe('Coloured by reward, from 0.1 to 0.9, 1 without one');
    expect(await page.getByTestId('legend-min').innerText()).toBe('0.1');
    expect(await page.getByTestId('legend-max').innerText()).toBe('0.9');
    expect(await classes('plain')).toContain('unvalued');
    const colour = (name: string) =>
      card(name).evaluate((e) => (e as HTMLElement).style.getPropertyValue('--node-colour'));
    // The lowest and the highest ends of the scale, and a colour between them.
    expect(await colour('branch')).toBe('rgb(59, 82, 139)');
    expect(await colour('deeper')).toBe('rgb(253, 231, 37)');
    expect(await colour('first')).not.toMatch(/^(rgb\(59, 82, 139\)|rgb\(253, 231, 37\)|)$/);
    await ui.shot('labels-02-tree-coloured-by-reward');
  });

  step('the best branch runs from the root to the highest reward, or the lowest', async () => {
    const { page } = ui;
    const onBest = async () => {
      const names: string[] = [];
      for (const name of ['first', 'deeper', 'plain', 'branch'])
        if ((await classes(name)).includes('on-best')) names.push(name);
      return names;
    };
    await page.getByRole('combobox', { name: 'Best branch', exact: true }).selectOption('high');
    await until('the branch to the highest', onBest, (names) => names.join() === 'first,deeper');
    expect(await page.locator('.react-flow__edge.best-edge').count()).toBe(1);
    await page.getByRole('button', { name: 'highest: deeper (reward=0.9)' }).click();
    await until(
      'deeper selected',
      () => page.getByLabel('Snapshot name').inputValue(),
      (name) => name === 'deeper',
    );
    await ui.shot('labels-03-best-branch-highest');
    await page.getByRole('combobox', { name: 'Best branch', exact: true }).selectOption('low');
    await until('the branch to the lowest', onBest, (names) => names.join() === 'first,branch');
    await visible(page.getByRole('button', { name: 'lowest: branch (reward=0.1)' }));
    await ui.shot('labels-04-best-branch-lowest');
    // Back to colours by kind: no legend, no branch, no card painted.
    await page.getByLabel('Colour by label').selectOption('');
    await page.getByRole('img', { name: /^Coloured by/ }).waitFor({ state: 'detached' });
    expect(await onBest()).toEqual([]);
    expect(await classes('first')).not.toContain('valued');
  });

  step('a VM’s labels are set beside it; the list of many VMs sorts and filters by a label column', async () => {
    const { page } = ui;
    const vms = page.getByRole('region', { name: 'VM labels' });
    await vms.getByRole('textbox').fill('reward=0.5');
    await vms.getByRole('button', { name: 'Set label' }).click();
    const selected = await page.getByTestId('acting-on').innerText();
    const labelsOf = async (name: string) =>
      (await api<{ vms: Vm[] }>('GET', '/api/v1/vms')).vms.find((v) => v.name === name)?.labels;
    await until(
      'the VM label kept',
      () => labelsOf(selected),
      (l) => l?.reward === 0.5,
    );
    await visible(vms.getByText('reward=0.5'));
    // Enough VMs for the list instead of tabs (VM_PICKER_FROM, 20), rewards on some of them.
    const first = await snapshot('first');
    const fork = await api<ForkResponse>('POST', `/api/v1/snapshots/${first.id}/fork`, { count: 18 });
    const rewards = [0.7, 0.2, 0.95, 0.6, 0.05];
    for (const [i, reward] of rewards.entries()) {
      await api('PATCH', `/api/v1/vms/${fork.children[i]!.id}`, { labels: { reward } });
    }
    const search = page.getByRole('combobox', { name: 'Find a VM' });
    await visible(search);
    await search.click();
    await page.getByRole('button', { name: /^reward/ }).click();
    const column = () => page.locator('[role=option] [data-testid=vm-label]').allInnerTexts();
    const ascending = ['0.05', '0.2', '0.5', '0.6', '0.7', '0.95', '—'];
    await until('sorted by reward, the VMs without one last', column, (v) => v.slice(0, 7).join() === ascending.join());
    await ui.shot('labels-05-vm-list-sorted-by-reward');
    await search.fill('reward>0.5');
    await until('the VMs above 0.5', column, (values) => values.join() === ['0.6', '0.7', '0.95'].join());
    await ui.shot('labels-06-vm-list-filtered-by-reward');
    expect(ui.pageErrors).toEqual([]);
  });
});
