import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { APP_ENTRY } from './app-security.js';
import { CHANNELS, checkIpc, PUSH_CHANNELS } from './ipc-contract.js';

const app = { url: APP_ENTRY, isMainFrame: true };

describe('IPC from the renderer', () => {
  it('accepts an API call from the app page', () => {
    const checked = checkIpc(CHANNELS.request, app, { method: 'POST', path: '/vms/vm-abcdefgh23/pause' });
    expect(checked).toEqual({ ok: true, payload: { method: 'POST', path: '/vms/vm-abcdefgh23/pause' } });
  });

  it('refuses senders that are not the app top frame', () => {
    const payload = { method: 'GET', path: '/episodes' };
    expect(checkIpc(CHANNELS.request, { ...app, isMainFrame: false }, payload)).toMatchObject({
      ok: false,
      why: expect.stringContaining('subframe'),
    });
    for (const url of ['file:///etc/passwd', 'https://evil.example/', 'smol-app://other/index.html', 'nonsense']) {
      expect(checkIpc(CHANNELS.request, { url, isMainFrame: true }, payload).ok, url).toBe(false);
    }
    expect(checkIpc(CHANNELS.request, null, payload).ok).toBe(false);
  });

  it('refuses paths that leave the API or reach the engine controls', () => {
    for (const p of ['/../etc', '/vms/..', '//evil', '/vms\\x', 'episodes', '/engine/shutdown', '/engine/listeners']) {
      const checked = checkIpc(CHANNELS.request, app, { method: 'POST', path: p });
      expect(checked.ok, p).toBe(false);
    }
  });

  it('refuses malformed payloads and names the field', () => {
    const bad = checkIpc(CHANNELS.request, app, { method: 'PUT', path: '/episodes' });
    expect(bad).toMatchObject({ ok: false, why: expect.stringContaining('method') });
    expect(checkIpc(CHANNELS.request, app, { method: 'GET', path: '/episodes', extra: 1 }).ok).toBe(false);
    expect(checkIpc(CHANNELS.consoleWrite, app, { stream: 0, data: 'x' }).ok).toBe(false);
    expect(checkIpc(CHANNELS.consoleWrite, app, { stream: 1, data: new Uint8Array(2 << 20) }).ok).toBe(false);
    expect(checkIpc(CHANNELS.consoleWrite, app, { stream: 1, data: new Uint8Array([104, 105]) }).ok).toBe(true);
    expect(checkIpc(CHANNELS.chooseSavePath, app, { defaultPath: '/h/exports/a-b.smolmachine' }).ok).toBe(true);
    expect(checkIpc(CHANNELS.chooseSavePath, app, { defaultPath: '' }).ok).toBe(false);
    expect(checkIpc(CHANNELS.chooseSavePath, app, { defaultPath: 'x'.repeat(5000) }).ok).toBe(false);
    expect(checkIpc('smol:eval' as never, app, {}).ok).toBe(false);
  });

  it('the preload uses exactly the channels main handles', () => {
    const preload = readFileSync(path.join(import.meta.dirname, '..', 'preload', 'preload.cts'), 'utf8');
    const used = new Set([...preload.matchAll(/'(smol:[a-z-]+)'/g)].map((m) => m[1]));
    expect(used).toEqual(new Set([...Object.values(CHANNELS), ...Object.values(PUSH_CHANNELS)]));
  });
});
