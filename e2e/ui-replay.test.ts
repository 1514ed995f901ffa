// Tier 4 (TESTING.md): replaying a VM's console as a person does, in Debian's Chromium against a real engine. The
// count guest prints four lines a second and the episode checkpoints itself every 2 s, so markers keep arriving
// while the replay plays: it advances at 1x and at 16x, and keeps its place and its playing state when they do.
import { describe, expect } from 'vitest';
import { newEpisode, sleep, type UiSession, uiStory, until, visible } from './ui-page.js';

let ui: UiSession;
const step = uiStory((s) => (ui = s));

/** Lines that do not start at the left (a bare LF taken without its CR steps each line further right). */
const stairs = (text: string) => text.split('\n').filter((line) => /^\s+\S/.test(line));

describe('replay', () => {
  const position = async () => Number(await ui.page.getByLabel('Replay position').inputValue());
  const markers = () => ui.page.getByRole('button', { name: /^Marker: / }).count();
  const replayed = () => ui.page.locator('[data-testid=replay] .xterm-rows').innerText();

  step('an episode that checkpoints itself every 2 s records its console', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    const file = ui.smolfile('ticking', 'count', 'cmdline = "hz=4"\n[snapshots]\nauto_checkpoint = "2s"\nkeep = 100');
    const episode = await newEpisode(ui, file);
    await until(
      'three automatic checkpoints',
      async () => (await ui.snapshots(episode.id)).filter((s) => s.kind === 'auto').length,
      (n) => n >= 3,
    );
    // A bare guest prints bare LFs: each line still starts at the left, in the console the page attached to (the
    // engine's screen, then live output) ...
    await page.reload(); // attach afresh (the address keeps the episode open): the first screen comes from the engine
    await visible(page.getByRole('heading', { level: 2, name: episode.name }));
    const live = () => page.locator('[data-testid=console] .xterm-rows').innerText();
    await until('count lines in the console', live, (text) => (text.match(/count=\d+/g) ?? []).length >= 3);
    expect(stairs(await live())).toEqual([]);
    await ui.shot('replay-00-console-lines-at-the-left');
    await page.getByRole('tab', { name: 'Replay' }).click();
    await until('markers on the scrubber', markers, (n) => n >= 3);
    // ... and in the replay of the same bytes.
    expect(stairs(await replayed())).toEqual([]);
  });

  step('plays at 1x from the start: the position moves and the screen follows it', async () => {
    const { page } = ui;
    await page.getByLabel('Replay position').fill('0');
    await until('an empty replay screen', replayed, (text) => !text.includes('count='));
    await page.getByRole('button', { name: 'Play replay' }).click();
    await visible(page.getByRole('button', { name: 'Pause replay' }));
    await sleep(2500);
    const at = await position();
    // 2.5 s of wall time at 1x: well past 1 s of the recording and nowhere near its end.
    expect(at).toBeGreaterThan(1);
    expect(at).toBeLessThan(6);
    await until('count lines replayed', replayed, (text) => /count=\d+/.test(text));
    expect(stairs(await replayed())).toEqual([]);
    await ui.shot('replay-01-playing-1x');
  });

  step('keeps playing from where it was when automatic checkpoints add markers', async () => {
    const { page } = ui;
    const before = await markers();
    const then = await position();
    await until('a new marker', markers, (n) => n > before);
    const now = await position();
    const duration = Number(await page.getByLabel('Replay position').getAttribute('max'));
    // It went on from its place (not back to the start, not to the live end) and it is still playing.
    expect(now).toBeGreaterThan(then);
    expect(duration - now).toBeGreaterThan(2);
    await visible(page.getByRole('button', { name: 'Pause replay' }));
  });

  step('paused, it stays exactly where it is while markers arrive', async () => {
    const { page } = ui;
    await page.getByRole('button', { name: 'Pause replay' }).click();
    const at = await position();
    await sleep(500); // the last frame's output drawn
    const screen = await replayed();
    const before = await markers();
    await until('two new markers', markers, (n) => n >= before + 2, 15_000);
    expect(await position()).toBe(at);
    expect(await replayed()).toBe(screen);
    await visible(page.getByRole('button', { name: 'Play replay' }));
    await ui.shot('replay-02-paused-while-markers-arrive');
  });

  step('plays at 16x, sixteen times as far in the same time, and stops at the end', async () => {
    const { page } = ui;
    await page.getByLabel('Replay position').fill('0');
    const end = Number(await page.getByLabel('Replay position').getAttribute('max'));
    await page.getByLabel('Replay speed').selectOption('16');
    await page.getByRole('button', { name: 'Play replay' }).click();
    await sleep(500);
    const at = await position();
    // Half a second at 16x is 8 s of recording (give or take frames): more than 1x could reach in that time.
    expect(at).toBeGreaterThan(3);
    await ui.shot('replay-03-playing-16x');
    await visible(page.getByRole('button', { name: 'Play replay' }), 60_000); // the end: it stops
    // It played to the end it knew (the recording may have grown since, with the next marker).
    expect(await position()).toBeGreaterThanOrEqual(end - 0.01);
    expect(ui.pageErrors).toEqual([]);
  });
});
