// A page of another origin cannot drive the engine, even in the browser that holds the engine page's token cookie
// (the CSRF case): Chromium opens the engine's page (which sets the cookie), then a page served from another port of
// 127.0.0.1 (same site for cookies, another origin) tries every way a page has to reach the engine: fetch with and
// without CORS, a form POST, a WebSocket, an image and a script. None of them may change anything or read anything.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_ARGS } from '../src/bench/ui.js';
import { root, startUiEngine, type UiEngine } from './ui-engine.js';

const CHROMIUM = process.env.SMOL_CHROMIUM ?? '/usr/bin/chromium';

let engine: UiEngine;
let browser: Browser;
let attacker: http.Server;
let attackerOrigin: string;

/** The attacker's page: it reports what each attempt saw into window.results. */
function attackPage(engineOrigin: string): string {
  const smolfile = JSON.stringify(path.join(root, 'smolfiles', 'echo.smolfile'));
  return `<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="shutdown" method="POST" action="${engineOrigin}/api/v1/engine/shutdown" target="sink"></form>
<script>
const engine = ${JSON.stringify(engineOrigin)};
window.results = {};
async function attempt(name, work) {
  try { window.results[name] = await work(); } catch (error) { window.results[name] = 'threw: ' + error.message; }
}
window.attack = async () => {
  await attempt('corsRead', async () => (await fetch(engine + '/api/v1/episodes', { credentials: 'include' })).text());
  await attempt('noCorsCreate', async () => {
    const body = JSON.stringify({ smolfile: ${smolfile}, name: 'csrf' });
    const response = await fetch(engine + '/api/v1/episodes', {
      method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body,
    });
    return response.type;
  });
  await attempt('webSocket', () => new Promise((resolve) => {
    const ws = new WebSocket(engine.replace('http', 'ws') + '/api/v1/events');
    ws.onopen = () => resolve('open');
    ws.onerror = () => resolve('error');
    ws.onclose = () => resolve('closed');
  }));
  await attempt('image', () => new Promise((resolve) => {
    const img = new Image();
    img.onload = () => resolve('loaded');
    img.onerror = () => resolve('error');
    img.src = engine + '/api/v1/episodes';
  }));
  await attempt('script', () => new Promise((resolve) => {
    const script = document.createElement('script');
    script.onload = () => resolve('ran');
    script.onerror = () => resolve('error');
    script.src = engine + '/api/v1/episodes';
    document.body.append(script);
  }));
  document.getElementById('shutdown').submit();
  await new Promise((resolve) => setTimeout(resolve, 1000));
  return window.results;
};
</script></body></html>`;
}

beforeAll(async () => {
  engine = await startUiEngine();
  const engineOrigin = new URL(engine.url).origin;
  attacker = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(attackPage(engineOrigin));
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  attackerOrigin = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}, 600_000);

afterAll(async () => {
  await browser?.close();
  attacker?.close();
  await engine?.close();
});

describe('a page of another origin', () => {
  it('cannot change or read anything through the engine, though the browser holds the token cookie', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(engine.url);
    const cookies = await context.cookies(new URL(engine.url).origin);
    expect(cookies.map((c) => c.name)).toContain(`smol_token_${new URL(engine.url).port}`);

    // Every request the engine answers, seen from the attacker's side of the browser.
    const answered: Array<{ url: string; status: number }> = [];
    const evil = await context.newPage();
    evil.on('response', (response) => {
      if (response.url().startsWith(new URL(engine.url).origin)) {
        answered.push({ url: response.url(), status: response.status() });
      }
    });
    await evil.goto(attackerOrigin);
    const results = (await evil.evaluate('window.attack()')) as Record<string, string>;

    expect(results.corsRead).toMatch(/^threw: /); // no CORS headers: the page cannot read the answer
    expect(results.webSocket).not.toBe('open');
    expect(results.image).toBe('error');
    expect(results.script).toBe('error');
    // The engine refused what reached it: a foreign Origin (fetch, form, WebSocket) or a cross-origin load.
    for (const { url, status } of answered) expect(status, url).toBeGreaterThanOrEqual(400);

    // Nothing happened: no episode, and the engine still runs.
    expect((await engine.api.call('listEpisodes')).episodes).toEqual([]);
    expect((await engine.api.call('health')).pid).toBeGreaterThan(0);
    await context.close();
  });
});
