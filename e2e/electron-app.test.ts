// Tier 4, the desktop app itself (TESTING.md): Playwright's _electron.launch against the built app with a throwaway
// data dir. It needs Electron's binary, which comes from GitHub; where it is missing the tests are skipped and the
// reason is printed. Run: npm run build && npx vitest run --project e2e e2e/electron-app.test.ts
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { _electron, type ElectronApplication, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findElectronBinary } from '../src/doctor/electron-binary.js';
import { root } from './ui-engine.js';

const found = findElectronBinary(root);
const missing =
  'why' in found ? `Electron's binary is missing (${found.why}): the desktop app tests are skipped` : null;
if (missing) console.warn(`SKIPPED: ${missing}`);

let home: string;
let app: ElectronApplication;
let page: Page;

describe.skipIf(missing !== null)(missing ? `the desktop app (skipped: ${missing})` : 'the desktop app', () => {
  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), 'smol-electron-e2e-'));
    app = await _electron.launch({
      executablePath: 'binary' in found ? found.binary : '',
      args: [root],
      env: { ...process.env, SMOL_HOME: home, XDG_CONFIG_HOME: path.join(home, 'config') },
    });
    page = await app.firstWindow();
  });
  afterAll(async () => {
    await app?.close();
    rmSync(home, { recursive: true, force: true });
  });

  it('shows the episodes list from its own engine, served from smol-app://', async () => {
    expect(page.url()).toMatch(/^smol-app:\/\/app\//);
    await page
      .getByRole('button', { name: /new episode/i })
      .first()
      .waitFor({ timeout: 60_000 });
    const health = await page.evaluate(() =>
      (window as unknown as { smolBridge: { request(m: string, p: string): Promise<unknown> } }).smolBridge.request(
        'GET',
        '/health',
      ),
    );
    expect(health).toMatchObject({ ok: true, value: { home } });
  });

  it('gives the page no Node and no way to the engine controls', async () => {
    expect(await page.evaluate(() => typeof (globalThis as { require?: unknown }).require)).toBe('undefined');
    expect(await page.evaluate(() => typeof (globalThis as { process?: unknown }).process)).toBe('undefined');
    const refused = await page.evaluate(() =>
      (window as unknown as { smolBridge: { request(m: string, p: string): Promise<unknown> } }).smolBridge.request(
        'POST',
        '/engine/shutdown',
      ),
    );
    expect(refused).toMatchObject({ ok: false, status: 400 });
  });

  it('does not navigate away or open windows', async () => {
    await page.evaluate(() => {
      window.open('https://example.com/');
      window.location.href = 'https://example.com/';
    });
    await page.waitForTimeout(500);
    expect(app.windows()).toHaveLength(1);
    expect(page.url()).toMatch(/^smol-app:\/\/app\//);
  });

  it('keeps the page in an isolated world: the bridge is all it sees of the preload', async () => {
    const seen = await page.evaluate(() => ({
      bridge: Object.keys((window as unknown as { smolBridge: object }).smolBridge).sort(),
      ipc: typeof (window as { ipcRenderer?: unknown }).ipcRenderer,
    }));
    expect(seen.ipc).toBe('undefined');
    expect(seen.bridge).toContain('request');
    expect(seen.bridge).not.toContain('invoke');
  });
});
