// What the UI end-to-end tests share beyond the engine (ui-engine.ts): Debian's Chromium on the engine's page,
// screenshots into test-results/e2e/, waiting for what a person would wait for, and Smolfiles of the tiny guests
// written for one test (an auto-checkpoint interval of seconds, say). Nothing here imitates the engine.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CHROMIUM_ARGS } from '../src/bench/ui.js';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, it } from 'vitest';
import type { Episode, Snapshot } from '../src/api/schema.js';
import { root, startUiEngine, type UiEngine } from './ui-engine.js';

export const shots = path.join(root, 'test-results', 'e2e');
const CHROMIUM = process.env.SMOL_CHROMIUM ?? '/usr/bin/chromium';
/** Inside the lab the engine runs under emulation: what takes milliseconds on hardware takes seconds there. */
export const SLOW = process.env.SMOL_E2E_LAB === '1' ? 120_000 : 30_000;

export interface UiSession {
  engine: UiEngine;
  browser: Browser;
  page: Page;
  /** Uncaught errors of the page. */
  pageErrors: string[];
  shot(name: string): Promise<void>;
  episodes(): Promise<Episode[]>;
  snapshots(episode: string): Promise<Snapshot[]>;
  /** Writes a Smolfile for a tiny guest (`native/out/guests/<guest>.elf`) with `extra` lines; returns its path. */
  smolfile(name: string, guest: string, extra?: string): string;
  close(): Promise<void>;
}

export async function startUiSession(env: NodeJS.ProcessEnv = {}): Promise<UiSession> {
  mkdirSync(shots, { recursive: true });
  const engine = await startUiEngine(env);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    // The bench's flags: without the networking ones Chromium's background connections are refused and it waits.
    args: CHROMIUM_ARGS,
  });
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 }, colorScheme: 'dark' });
  const pageErrors: string[] = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));
  page.on('dialog', (dialog) => void dialog.dismiss());
  const dir = mkdtempSync(path.join(tmpdir(), 'smol-e2e-smolfiles-'));
  return {
    engine,
    browser,
    page,
    pageErrors,
    shot: async (name) => void (await page.screenshot({ path: path.join(shots, `${name}.png`) })),
    episodes: async () => (await engine.api.request<{ episodes: Episode[] }>('GET', '/api/v1/episodes')).episodes,
    snapshots: async (episode) =>
      (await engine.api.request<{ snapshots: Snapshot[] }>('GET', `/api/v1/episodes/${episode}/snapshots`)).snapshots,
    smolfile: (name, guest, extra = '') => {
      const file = path.join(dir, `${name}.smolfile`);
      const kernel = path.join(root, 'native', 'out', 'guests', `${guest}.elf`);
      writeFileSync(file, `kernel = ${JSON.stringify(kernel)}\ncpus = 1\nmemory = 16\n${extra}\n`);
      return file;
    },
    close: async () => {
      await browser.close();
      await engine.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Waits until `read` returns something `accept` takes; fails with the last value seen. */
export async function until<T>(what: string, read: () => Promise<T>, accept: (value: T) => boolean, timeoutMs = SLOW) {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await read().catch(() => undefined as T);
    if (last !== undefined && accept(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`timed out waiting for ${what}; last seen: ${JSON.stringify(last)?.slice(0, 2000)}`);
}

export const visible = (locator: Locator, timeout = SLOW) => locator.waitFor({ state: 'visible', timeout });
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts an episode from a Smolfile path as a person does (New episode, its path, Start); returns it. */
export async function newEpisode(ui: UiSession, smolfile: string): Promise<Episode> {
  const { page } = ui;
  const before = new Set((await ui.episodes()).map((e) => e.id));
  await page.getByRole('button', { name: 'New episode' }).first().click();
  await page.getByLabel('Smolfile path').fill(smolfile);
  await page.getByRole('button', { name: 'Start episode' }).click();
  // The episode's view (the dialog closes), or the engine's refusal in the dialog.
  const dialog = page.getByRole('dialog', { name: 'New episode' });
  const refused = dialog.getByRole('alert');
  await until(
    'the episode to open or be refused',
    async () => (await refused.isVisible()) || !(await dialog.isVisible()),
    (done) => done,
  );
  if (await refused.isVisible()) throw new Error(`the engine refused the episode: ${await refused.innerText()}`);
  const list = await until(
    'the new episode',
    () => ui.episodes(),
    (episodes) => episodes.some((e) => !before.has(e.id)),
  );
  return list.find((e) => !before.has(e.id))!;
}

/**
 * A step of a story: once one failed, the later ones say so instead of failing for their own reasons, and the
 * failing view is kept as `failed-<step>.png`.
 */
export function storySteps(ui: () => UiSession, it: (name: string, body: () => Promise<void>) => void) {
  let failed: string | null = null;
  return (name: string, body: () => Promise<void>) =>
    it(name, async () => {
      if (failed) throw new Error(`not run: the step "${failed}" failed`);
      try {
        await body();
      } catch (error) {
        failed = name;
        await ui()
          .shot(`failed-${name.slice(0, 40).replace(/\W+/g, '-')}`)
          .catch(() => undefined);
        throw new Error(`${(error as Error).message}\nthe engine side said:\n${ui().engine.log()}`, { cause: error });
      }
    });
}

/**
 * The file's one UI session, started before its tests and closed after them, handed to `use` once it runs; returns
 * its story steps (storySteps). `let ui: UiSession; const step = uiStory((s) => (ui = s));`
 */
export function uiStory(use: (ui: UiSession) => void, env: NodeJS.ProcessEnv = {}) {
  let session: UiSession | undefined;
  beforeAll(async () => {
    session = await startUiSession(env);
    use(session);
  });
  afterAll(async () => {
    await session?.close();
  });
  return storySteps(() => session!, it);
}
