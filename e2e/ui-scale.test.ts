// Tier 4 (TESTING.md): issue 23's item 10, as a person meets it, in Debian's Chromium against a real engine. The
// echo guest forked into 23 VMs: no strip of 23 tabs but a search that lists them (the keys move through it, Enter
// picks, a click picks) with the selected VM's tab always beside it; the VM list and the episode list sort by a
// column's header, the other way on a second click, and keep it across a reload; the count guest checkpointed six
// times: its replay timeline zooms around the pointer and the position keeps its place on the screen, and a click
// in the marker list jumps to that marker; a window moved away stays put when a marker arrives.
import { describe, expect } from 'vitest';
import type { Snapshot, Vm } from '../src/api/schema.js';
import { newEpisode, sleep, type UiSession, uiStory, until, visible } from './ui-page.js';

let ui: UiSession;
const step = uiStory((s) => (ui = s));

describe('many VMs, sorting and a zoomable replay', () => {
  let crowd = '';
  let crowdName = '';
  let vms: Vm[] = [];
  const actingOn = () => ui.page.getByTestId('acting-on').innerText();
  const options = () => ui.page.getByRole('option').allInnerTexts();
  const optionNames = async () =>
    (await ui.page.locator('[role=option] .vm-tab-name').allInnerTexts()).map((t) => t.trim());

  step('an episode with 23 VMs shows a search instead of 23 tabs, with the selected VM beside it', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    const episode = await newEpisode(ui, ui.smolfile('crowd', 'echo'));
    crowd = episode.id;
    crowdName = episode.name;
    await until(
      'the echo banner',
      () => page.locator('[data-testid=console] .xterm-rows').innerText(),
      (t) => t.includes('echo: ready'),
    );
    await page.getByRole('button', { name: 'Fork…' }).click();
    await page
      .getByRole('dialog', { name: /^Fork / })
      .getByLabel('Number of forks')
      .fill('22');
    await page.getByRole('button', { name: 'Fork ×22' }).click();
    vms = await until(
      '23 running VMs',
      async () => (await ui.episodes()).find((e) => e.id === crowd)?.vms ?? [],
      (list) => list.length === 23 && list.every((vm) => vm.state === 'running'),
      120_000,
    );
    await visible(page.getByRole('combobox', { name: 'Find a VM' }));
    // One tab, the selected VM's: not 23 running off the side.
    expect(await page.getByRole('tab', { name: /^VM / }).count()).toBe(1);
    expect(await page.getByRole('tab', { name: /^VM / }).innerText()).toContain(await actingOn());
  });

  step('the keys find and pick a VM: "/" focuses the search, typing filters, arrows move, Enter picks', async () => {
    const { page } = ui;
    const target = vms[17]!;
    await page.getByRole('heading', { level: 2 }).click(); // the focus on the page, not in a text field
    await page.keyboard.press('/');
    const search = page.getByRole('combobox', { name: 'Find a VM' });
    await until(
      'the search focused',
      () => search.evaluate((e) => e === document.activeElement),
      (f) => f,
    );
    await visible(page.getByRole('listbox', { name: 'VMs' }));
    expect(await page.getByRole('option').count()).toBe(23);
    await ui.shot('scale-01-vm-search-open');
    await page.keyboard.type(target.name);
    await until('the list filtered to the VM typed', options, (list) => list.length === 1);
    await ui.shot('scale-02-vm-search-filtered');
    await page.keyboard.press('Enter');
    await until('the typed VM acted on', actingOn, (name) => name === target.name);
    await page.getByRole('listbox').waitFor({ state: 'detached' });
    expect(await page.getByRole('tab', { name: `VM ${target.name}` }).getAttribute('aria-selected')).toBe('true');
    // Arrows from there: ArrowDown opens the list on the selected VM, the next ArrowDown moves to the one after it
    // (creation order), Enter picks it.
    await page.keyboard.press('ArrowDown');
    await visible(page.getByRole('listbox', { name: 'VMs' }));
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    await until('the next VM acted on', actingOn, (name) => name === vms[18]!.name);
    // And a click picks.
    await search.click();
    await page.getByRole('option', { name: new RegExp(`^${vms[3]!.name}\\b`) }).click();
    await until('the clicked VM acted on', actingOn, (name) => name === vms[3]!.name);
    await visible(page.getByRole('tab', { name: `VM ${vms[3]!.name}` }));
  });

  step('the VM list sorts by name, the other way on a second click, and keeps it across a reload', async () => {
    const { page } = ui;
    const byName = [...vms.map((vm) => vm.name)].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
    const search = page.getByRole('combobox', { name: 'Find a VM' });
    await search.click();
    await page.getByRole('button', { name: /^Name/ }).click();
    expect(await optionNames()).toEqual(byName);
    expect(await page.getByRole('button', { name: /^Name/ }).innerText()).toContain('▲');
    await page.getByRole('button', { name: /^Name/ }).click();
    expect(await optionNames()).toEqual([...byName].reverse());
    expect(await page.getByRole('button', { name: /^Name/ }).innerText()).toContain('▼');
    await ui.shot('scale-03-vm-list-sorted-by-name-descending');
    await page.reload();
    await page.getByRole('combobox', { name: 'Find a VM' }).click();
    expect(await optionNames()).toEqual([...byName].reverse());
    await page.keyboard.press('Escape');
    await page.getByRole('listbox').waitFor({ state: 'detached' });
  });

  let counter = '';
  let counterName = '';
  let marks: Snapshot[] = [];
  step('the episode list sorts by a column, reverses on a second click, and keeps it across a reload', async () => {
    const { page } = ui;
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    const episode = await newEpisode(ui, ui.smolfile('a-counter', 'count', 'cmdline = "hz=4"'));
    counter = episode.id;
    counterName = episode.name;
    // Six checkpoints, half a second apart: markers on its replay timeline (and more snapshots than the crowd's).
    for (let i = 1; i <= 6; i++) {
      await sleep(500);
      await ui.engine.api.request('POST', `/api/v1/vms/${episode.vms[0]!.id}/checkpoint`, { name: `mark-${i}` });
    }
    marks = (await ui.snapshots(counter)).filter((s) => s.name.startsWith('mark-'));
    await page.getByRole('button', { name: 'Back to episodes' }).click();
    const names = () => page.locator('tbody tr button.link').allInnerTexts();
    // Newest first until a header is clicked.
    expect(await names()).toEqual([counterName, crowdName]);
    const header = page.getByRole('columnheader', { name: /^VMs/ });
    await header.getByRole('button').click();
    expect(await names()).toEqual([counterName, crowdName]); // 1 VM, then 23
    expect(await header.getAttribute('aria-sort')).toBe('ascending');
    await header.getByRole('button').click();
    expect(await names()).toEqual([crowdName, counterName]);
    expect(await header.getAttribute('aria-sort')).toBe('descending');
    expect(await header.innerText()).toContain('▼');
    await ui.shot('scale-04-episodes-sorted-by-vms-descending');
    await page.reload();
    await visible(page.getByRole('columnheader', { name: /^VMs/ }));
    expect(await names()).toEqual([crowdName, counterName]);
    expect(await page.getByRole('columnheader', { name: /^VMs/ }).getAttribute('aria-sort')).toBe('descending');
    // Another column: by name, A to Z.
    await page
      .getByRole('columnheader', { name: /^Episode/ })
      .getByRole('button')
      .click();
    expect(await names()).toEqual([counterName, crowdName]);
  });

  const position = async () => Number(await ui.page.getByLabel('Replay position').inputValue());
  const bounds = async () => {
    const range = ui.page.getByLabel('Replay position');
    return { min: Number(await range.getAttribute('min')), max: Number(await range.getAttribute('max')) };
  };
  /** Where the range's thumb is drawn: the range's box and its value's fraction of it (the thumb is 16 px wide). */
  const thumbX = async () => {
    const box = (await ui.page.getByLabel('Replay position').boundingBox())!;
    const { min, max } = await bounds();
    return box.x + 8 + ((box.width - 16) * ((await position()) - min)) / (max - min);
  };

  step('the replay timeline zooms around the pointer: the position stays where it is on the screen', async () => {
    const { page } = ui;
    await page.getByRole('button', { name: `Open episode ${counterName}` }).click();
    await page.getByRole('tab', { name: 'Replay' }).click();
    await until(
      'six markers in the list',
      () => page.getByRole('button', { name: /^Jump to checkpoint mark-/ }).count(),
      (n) => n === 6,
    );
    const whole = await bounds();
    expect(whole.min).toBe(0);
    await page.getByLabel('Replay position').fill(String(whole.max * 0.4));
    const at = await position();
    const x = await thumbX();
    const box = (await page.getByLabel('Replay position').boundingBox())!;
    await page.mouse.move(x, box.y + box.height / 2);
    for (let i = 0; i < 3; i++) await page.mouse.wheel(0, -400);
    const zoomed = await until('the timeline zoomed in', bounds, (b) => b.max - b.min < (whole.max - whole.min) / 4);
    expect(zoomed.min).toBeLessThan(at);
    expect(zoomed.max).toBeGreaterThan(at);
    // The position did not move, in time nor on the screen (the range rounds to its 0.01 s step).
    expect(Math.abs((await position()) - at)).toBeLessThan(0.02);
    expect(Math.abs((await thumbX()) - x)).toBeLessThan(3);
    await visible(page.getByRole('slider', { name: 'Part of the recording shown' }));
    await ui.shot('scale-05-replay-timeline-zoomed');
    // A sideways wheel pans; "Whole recording" shows all of it again.
    await page.mouse.wheel(200, 0);
    await until('the window panned later', bounds, (b) => b.min > zoomed.min);
    await page.getByRole('button', { name: 'Whole recording' }).click();
    expect((await bounds()).min).toBe(0);
  });

  step('a click in the marker list jumps to that marker, and a zoomed window follows it', async () => {
    const { page } = ui;
    const range = await bounds();
    // Zoomed in on the start, then a jump to the last marker: out of that window, which moves to show it.
    await page.getByLabel('Replay position').fill('0');
    for (let i = 0; i < 4; i++) await page.getByRole('button', { name: 'Zoom the timeline in' }).click();
    expect((await bounds()).max).toBeLessThan(range.max / 4);
    const last = page.getByRole('button', { name: /^Jump to checkpoint mark-6 at / });
    await last.click();
    const markerTime = await until('the position at the marker', position, (p) => p > range.max / 4);
    const label = (await last.getAttribute('aria-label'))!;
    expect(label).toMatch(/mark-6/);
    expect(await last.getAttribute('aria-current')).toBe('true');
    const shown = await bounds();
    expect(markerTime).toBeGreaterThanOrEqual(shown.min);
    expect(markerTime).toBeLessThanOrEqual(shown.max);
    // Restore here names the snapshot of that marker.
    await visible(page.getByRole('button', { name: 'Restore here (mark-6)' }));
    await ui.shot('scale-06-marker-list-jump');
    expect(marks.map((s) => s.name)).toContain('mark-6');
  });

  step('a window moved away from the position stays where it is when a new marker arrives', async () => {
    const { page } = ui;
    const range = page.getByLabel('Replay position');
    // The position itself (the slider shows it clamped to the window once the window has moved off it).
    const at = await position();
    const said = await range.getAttribute('aria-valuetext');
    await page.getByRole('slider', { name: 'Part of the recording shown' }).focus();
    for (let i = 0; i < 6; i++) await page.keyboard.press('ArrowLeft'); // a quarter of the window each
    const away = await bounds();
    expect(away.max).toBeLessThan(at);
    const vm = (await ui.episodes()).find((e) => e.id === counter)!.vms[0]!;
    await ui.engine.api.request('POST', `/api/v1/vms/${vm.id}/checkpoint`, { name: 'mark-7' });
    await visible(page.getByRole('button', { name: /^Jump to checkpoint mark-7 at / }));
    expect(await bounds()).toEqual(away);
    expect(await range.getAttribute('aria-valuetext')).toBe(said);
    await ui.shot('scale-07-window-kept-when-a-marker-arrives');
    expect(ui.pageErrors).toEqual([]);
  });
});
