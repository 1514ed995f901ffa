// What `smol bench ui` does in the page (Playwright): each function clicks what a person clicks and measures in the
// page itself (requestAnimationFrame timestamps), so Playwright's own round trips do not count. The code passed to
// page.evaluate runs in Chromium: it sees the page's globals through PageGlobals (this project's Node build has no
// DOM types) and must not use anything from this module's scope.
import type { Page } from 'playwright-core';

export type { Page };

/** The little of the page's globals these functions use. */
interface PageElement {
  textContent: string | null;
  click(): void;
  getAttribute(name: string): string | null;
}
interface PageGlobals {
  document: {
    querySelector(selector: string): PageElement | null;
    querySelectorAll(selector: string): ArrayLike<PageElement>;
    getElementsByClassName(name: string): { length: number };
  };
  performance: { now(): number; getEntriesByName(name: string): { startTime: number }[] };
  requestAnimationFrame(callback: (time: number) => void): number;
  setTimeout(callback: () => void, ms: number): number;
  /** console-sessions.ts: a VM's console session; `output` is where the engine's bytes go. */
  smolConsoleSession?: (vm: string) => { terminal: PageTerminal; output(data: Uint8Array): void } | undefined;
  /** State of the measurement in progress. */
  smolBench?: Record<string, unknown>;
  smolBenchChunks?: Uint8Array[];
  TextEncoder: new () => { encode(text: string): Uint8Array };
}
interface PageTerminal {
  write(data: string): void;
  onLineFeed(listener: () => void): { dispose(): void };
  buffer: {
    active: {
      baseY: number;
      cursorY: number;
      getLine(y: number): PageBufferLine | undefined;
      getNullCell(): PageBufferCell;
    };
  };
}
interface PageBufferLine {
  getCell(x: number, cell: PageBufferCell): PageBufferCell | undefined;
  translateToString(trimRight: boolean, startColumn?: number, endColumn?: number): string;
}
interface PageBufferCell {
  getCode(): number;
}

const LONG = 600_000;

/** Navigation → the whole list drawn (its count says all episodes), and first contentful paint. */
export async function listInPage(page: Page, url: string, episodes: number) {
  await page.addInitScript((want: string) => {
    const w = globalThis as unknown as PageGlobals;
    const check = () => {
      const rows = w.document.querySelectorAll('table.grid tbody tr[aria-rowindex]').length;
      const counted = Array.from(w.document.querySelectorAll('[aria-live=polite]')).some((e) => e.textContent === want);
      if (rows > 0 && counted) w.smolBench = { ...w.smolBench, listDrawn: w.performance.now(), rows };
      else w.requestAnimationFrame(check);
    };
    w.requestAnimationFrame(check);
  }, `${episodes} of ${episodes}`);
  await page.goto(url);
  await page.waitForFunction(() => (globalThis as unknown as PageGlobals).smolBench?.listDrawn !== undefined, null, {
    timeout: LONG,
  });
  return page.evaluate(() => {
    const w = globalThis as unknown as PageGlobals;
    const paint = w.performance.getEntriesByName('first-contentful-paint')[0];
    return {
      listMs: w.smolBench!.listDrawn as number,
      rows: w.smolBench!.rows as number,
      fcpMs: paint ? paint.startTime : NaN,
    };
  });
}

/** Opens the episode named `name` from the list: its row found with the search box, then its name clicked. */
async function openEpisode(page: Page, name: string) {
  await page.getByLabel('Search episodes').fill(name);
  await page.getByRole('button', { name: `Open episode ${name}`, exact: true }).waitFor({ timeout: LONG });
}

/** Opens the big tree (click → first nodes drawn), then pans it with mouse drags while counting frames. */
export async function treeInPage(page: Page, name: string) {
  const { openMs } = await openTreeInPage(page, name);
  return { openMs, ...(await panTreeInPage(page)) };
}

/** Opens the episode `name` from the list: click → the first nodes of its fork tree drawn. */
export async function openTreeInPage(page: Page, name: string) {
  await openEpisode(page, name);
  const openMs = await page.evaluate(
    (label: string) =>
      new Promise<number>((resolve) => {
        const w = globalThis as unknown as PageGlobals;
        const start = w.performance.now();
        w.document.querySelector(`button[aria-label="${label}"]`)!.click();
        const check = () => {
          if (w.document.getElementsByClassName('react-flow__node').length > 0) resolve(w.performance.now() - start);
          else w.requestAnimationFrame(check);
        };
        w.requestAnimationFrame(check);
      }),
    `Open episode ${name}`,
  );
  // Let the layout's fit settle before measuring the pan.
  await page.waitForTimeout(500);
  return { openMs };
}

/** Colours the open fork tree by its snapshots' `reward` label with the best branch shown, as a person chooses it. */
export async function colourTreeInPage(page: Page) {
  await page.getByLabel('Colour by label').selectOption('reward');
  await page.getByRole('combobox', { name: 'Best branch', exact: true }).selectOption('high');
  // The legend names the range; the branch's cards may all be out of view (only the cards in view are drawn).
  await page.getByRole('img', { name: /^Coloured by reward, from/ }).waitFor({ timeout: 60_000 });
  await page.getByRole('button', { name: /^highest: / }).waitFor({ timeout: 60_000 });
  await page.waitForTimeout(500);
}

/** Pans the open fork tree with mouse drags while counting frames (requestAnimationFrame callbacks). */
export async function panTreeInPage(page: Page) {
  const shown = await page.locator('.react-flow__minimap-node').count();
  const transform = () => page.locator('.react-flow__viewport').getAttribute('style');
  const before = await transform();
  await page.evaluate(() => {
    const w = globalThis as unknown as PageGlobals;
    const state = { frames: [] as number[], maxNodes: 0, stop: false };
    w.smolBench = state;
    const loop = (time: number) => {
      state.frames.push(time);
      state.maxNodes = Math.max(state.maxNodes, w.document.getElementsByClassName('react-flow__node').length);
      if (!state.stop) w.requestAnimationFrame(loop);
    };
    w.requestAnimationFrame(loop);
  });
  const pane = await page.locator('.react-flow__pane').boundingBox();
  if (!pane) throw new Error('the fork tree has no pane to drag');
  const y = pane.y + pane.height / 2;
  // Six strokes right to left, 700 px each in 35 moves: across the tree, as a person drags to follow a branch.
  for (let stroke = 0; stroke < 6; stroke++) {
    const x0 = pane.x + pane.width / 2 + 350;
    await page.mouse.move(x0, y + (stroke % 2 ? 60 : -60));
    await page.mouse.down();
    for (let step = 1; step <= 35; step++) {
      await page.mouse.move(x0 - step * 20, y + (stroke % 2 ? 60 : -60) - step * (stroke % 2 ? 3 : -3));
    }
    await page.mouse.up();
  }
  const pan = await page.evaluate(() => {
    const w = globalThis as unknown as PageGlobals;
    const state = w.smolBench as { frames: number[]; maxNodes: number; stop: boolean };
    state.stop = true;
    const { frames } = state;
    let longest = 0;
    for (let i = 1; i < frames.length; i++) longest = Math.max(longest, frames[i]! - frames[i - 1]!);
    const seconds = (frames.at(-1)! - frames[0]!) / 1000;
    return { fps: (frames.length - 1) / seconds, longestFrameMs: longest, maxNodes: state.maxNodes, seconds };
  });
  if ((await transform()) === before) throw new Error('dragging did not pan the fork tree');
  return { shown, ...pan };
}

/**
 * Installs, in the page, a checker of the flood pattern on a VM's terminal: every line it parses must be the next
 * numbered line (native/guests/flood.c): "NNNNNNNNNN " then letters 'a' + (n + column) % 26, and nothing after them.
 * Records the time of the first and the last line, missing and garbled lines, and the longest frame meanwhile.
 *
 * It runs inside xterm's parser, once per line feed, so it must cost little next to parsing the line (building each
 * line's text with translateToString and comparing it with the expected string cost as much as xterm's own parsing,
 * and halved what the page seemed to take): each cell of the line is read as a code point into one reused cell and
 * compared with the expected one, and what follows the line is checked empty with a translateToString that starts
 * after it (empty, so no string is built).
 */
async function installChecker(page: Page, vm: string, lines: number, lineBytes: number) {
  await page.evaluate(
    ({ vm, lines, lineBytes }) => {
      const w = globalThis as unknown as PageGlobals;
      const terminal = w.smolConsoleSession?.(vm)?.terminal;
      if (!terminal) throw new Error(`the page has no console for ${vm}`);
      const state = { next: 1, missing: 0, garbled: 0, first: 0, last: 0, done: false, longest: 0, frame: 0 };
      w.smolBench = state;
      const digits = 10;
      const width = lineBytes - 2;
      const cell = terminal.buffer.active.getNullCell();
      const code = (line: PageBufferLine, x: number) => line.getCell(x, cell)?.getCode() ?? -1;
      const subscription = terminal.onLineFeed(() => {
        const buffer = terminal.buffer.active;
        const line = buffer.getLine(buffer.baseY + buffer.cursorY - 1);
        if (!line || code(line, digits) !== 32) return; // the banner, the prompt
        let n = 0;
        for (let x = 0; x < digits; x++) {
          const digit = code(line, x) - 48;
          if (!(digit >= 0 && digit <= 9)) return;
          n = n * 10 + digit;
        }
        if (state.first === 0) state.first = w.performance.now();
        if (n !== state.next) state.missing += Math.max(0, n - state.next);
        let intact = line.translateToString(true, width) === '';
        for (let x = digits + 1; intact && x < width; x++) intact = code(line, x) === 97 + ((n + x) % 26);
        if (!intact) state.garbled++;
        state.next = n + 1;
        if (n >= lines) {
          state.last = w.performance.now();
          state.done = true;
          subscription.dispose();
        }
      });
      const loop = (time: number) => {
        if (state.frame) state.longest = Math.max(state.longest, time - state.frame);
        state.frame = time;
        if (!state.done) w.requestAnimationFrame(loop);
      };
      w.requestAnimationFrame(loop);
    },
    { vm, lines, lineBytes },
  );
}

async function checkerResult(page: Page, lines: number, lineBytes: number) {
  await page.waitForFunction(() => (globalThis as unknown as PageGlobals).smolBench?.done === true, null, {
    timeout: LONG,
    polling: 250,
  });
  const state = await page.evaluate(() => (globalThis as unknown as PageGlobals).smolBench as Record<string, number>);
  const seconds = (state.last! - state.first!) / 1000;
  return {
    // From the first line parsed to the last: lines - 1 lines' worth.
    bytesPerSecond: ((lines - 1) * lineBytes) / seconds,
    missing: state.missing! + state.garbled!,
    longestFrameMs: state.longest!,
  };
}

/** A flood VM's console in the page: opened, the guest started by a typed key, every line checked as parsed. */
export async function consoleInPage(page: Page, episode: string, vm: string, lines: number, lineBytes: number) {
  await page.getByRole('button', { name: 'Back to episodes' }).click();
  await openEpisode(page, episode);
  await page.getByRole('button', { name: `Open episode ${episode}`, exact: true }).click();
  await page.waitForFunction(
    (selector: string) =>
      ((globalThis as unknown as PageGlobals).document.querySelector(selector)?.textContent ?? '').includes(
        'type a key',
      ),
    '[data-testid=console] .xterm-rows',
    { timeout: LONG },
  );
  await installChecker(page, vm, lines, lineBytes);
  await page.locator('[data-testid=console]').click();
  await page.keyboard.type('x');
  return checkerResult(page, lines, lineBytes);
}

/**
 * The page alone: `total` bytes of the same pattern fed to the console session where the engine's output goes
 * (ConsoleSession.output), as 64 KiB messages of bytes as the console's WebSocket delivers them (a Uint8Array each,
 * never a string: xterm decodes the two differently, strings a fifth slower), 16 of them every 100 ms (10 MiB/s
 * offered), every line checked as xterm parses it. No VM or engine in this stage: it says what the page can take.
 */
export async function browserStage(page: Page, vm: string, total: number, lineBytes: number) {
  const lines = Math.floor(total / lineBytes);
  // Made before the clock starts: building 10 MiB of text takes the page a while.
  await page.evaluate(
    ({ lines, lineBytes }) => {
      const w = globalThis as unknown as PageGlobals;
      const perMessage = Math.floor((64 << 10) / lineBytes);
      const encoder = new w.TextEncoder();
      const messages: Uint8Array[] = [];
      for (let n = 1; n <= lines; n += perMessage) {
        const parts: string[] = [];
        for (let k = n; k < Math.min(lines + 1, n + perMessage); k++) {
          let text = `${String(k).padStart(10, '0')} `;
          for (let i = 11; i < lineBytes - 2; i++) text += String.fromCharCode(97 + ((k + i) % 26));
          parts.push(`${text}\r\n`);
        }
        messages.push(encoder.encode(parts.join('')));
      }
      w.smolBenchChunks = messages;
    },
    { lines, lineBytes },
  );
  await installChecker(page, vm, lines, lineBytes);
  await page.evaluate((vm: string) => {
    const w = globalThis as unknown as PageGlobals;
    const session = w.smolConsoleSession!(vm)!;
    const messages = w.smolBenchChunks!;
    for (let i = 0; i < messages.length; i += 16) {
      const burst = messages.slice(i, i + 16);
      w.setTimeout(() => burst.forEach((message) => session.output(message)), (i / 16) * 100);
    }
  }, vm);
  return checkerResult(page, lines, lineBytes);
}
