// Tier 4 (TESTING.md): what a person sees in Debian's Chromium when the UI's build is missing or was interrupted
// (every file 0 bytes): a page that says what is missing and the command that builds it, never a blank one. The
// engine's own HTTP server serves a copy of dist/renderer made broken for the test; no VM is needed for this.
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineApi } from '../src/api/engine-api.js';
import { startApiServer } from '../src/engine/api-server.js';
import { root } from './ui-engine.js';
import { shots } from './ui-page.js';

const CHROMIUM = process.env.SMOL_CHROMIUM ?? '/usr/bin/chromium';
const dir = mkdtempSync(path.join(tmpdir(), 'smol-e2e-not-built-'));
let browser: Browser;

beforeAll(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
});
afterAll(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Opens the page of an engine server whose UI directory is `uiRoot`; returns the text shown. */
async function open(uiRoot: string, shot: string): Promise<string> {
  const server = await startApiServer({
    api: {} as EngineApi,
    socketPath: path.join(dir, `${shot}.sock`),
    tcp: { host: '127.0.0.1', port: 0, token: 't0ken' },
    staticRoot: uiRoot,
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 700 } });
    await page.goto(server.url!);
    const text = await page.locator('body').innerText();
    await page.screenshot({ path: path.join(shots, `${shot}.png`) });
    await page.close();
    return text;
  } finally {
    await server.close();
  }
}

describe('a UI that is not built', () => {
  it('says dist/renderer is missing and how to build it', async () => {
    const text = await open(path.join(dir, 'renderer'), 'not-built-01-missing');
    expect(text).toContain('The UI is not built');
    expect(text).toContain(`${path.join(dir, 'renderer')} does not exist`);
    expect(text).toContain('npm run build:renderer');
  });

  it('says which files an interrupted build left empty instead of showing a blank page', async () => {
    const built = path.join(root, 'dist', 'renderer');
    const copy = path.join(dir, 'interrupted');
    cpSync(built, copy, { recursive: true });
    for (const name of readdirSync(path.join(copy, 'assets'))) truncateSync(path.join(copy, 'assets', name), 0);
    const text = await open(copy, 'not-built-02-empty-files');
    expect(text).toMatch(/assets\/index-[\w-]+\.js, which the page loads, is empty \(0 bytes\)/);
    expect(text).toContain('npm run build:renderer');
    // The whole build serves the app.
    const whole = await open(built, 'not-built-03-whole');
    expect(whole).not.toContain('The UI is not built');
  });
});
