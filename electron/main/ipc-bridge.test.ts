// The bridge main puts between the renderer and the engine, driven the way main.ts drives it, against a real
// engine (Engine.open on a throwaway data dir, serving its Unix socket): no Electron, no VMs needed.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient } from '../../src/api/api-client.js';
import { startApiServer, type ApiServer } from '../../src/engine/api-server.js';
import { Engine } from '../../src/engine/engine.js';
import { APP_ENTRY } from './app-security.js';
import { IpcBridge, type PushMessage } from './ipc-bridge.js';
import { CHANNELS } from './ipc-contract.js';

const app = { url: APP_ENTRY, isMainFrame: true };
let home: string;
let engine: Engine;
let server: ApiServer;
let client: ApiClient;

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'smol-bridge-'));
  engine = await Engine.open({ home, version: 'test', log: () => {} });
  server = await startApiServer({ api: engine, socketPath: path.join(home, 'engine.sock') });
  client = new ApiClient({ socketPath: path.join(home, 'engine.sock') });
});
afterAll(async () => {
  client.close();
  await server.close();
  await engine.suspendAll();
  rmSync(home, { recursive: true, force: true });
});

function bridge() {
  const pushed: PushMessage[] = [];
  const refused: string[] = [];
  const opened: string[] = [];
  const done: [string, boolean][] = [];
  const asked: string[] = [];
  const b = new IpcBridge(client, {
    push: (message) => pushed.push(message),
    openExternal: (url) => opened.push(url),
    operationDone: (title, ok) => done.push([title, ok]),
    refused: (why) => refused.push(why),
    chooseSavePath: (defaultPath) => (asked.push(defaultPath), Promise.resolve(`${defaultPath}.chosen`)),
  });
  return { b, pushed, refused, opened, done, asked };
}

describe('the renderer reaches the engine only through the checked bridge', () => {
  it('asks the host for a save path with the default the page proposes, and answers with the chosen one', async () => {
    const { b, asked } = bridge();
    const payload = { defaultPath: '/h/exports/a-b.smolmachine' };
    expect(await b.handle(CHANNELS.chooseSavePath, app, payload)).toBe('/h/exports/a-b.smolmachine.chosen');
    expect(asked).toEqual(['/h/exports/a-b.smolmachine']);
  });

  it('answers API calls with the engine data, and engine errors as data', async () => {
    const { b } = bridge();
    expect(await b.handle(CHANNELS.request, app, { method: 'GET', path: '/episodes' })).toEqual({
      ok: true,
      value: { episodes: [] },
    });
    const health = (await b.handle(CHANNELS.request, app, { method: 'GET', path: '/health' })) as {
      ok: true;
      value: { home: string };
    };
    expect(health.value.home).toBe(home);
    expect(await b.handle(CHANNELS.request, app, { method: 'GET', path: '/vms/vm-abcdefgh23' })).toMatchObject({
      ok: false,
      status: 404,
    });
  });

  it('refuses a foreign sender or an engine control without calling the engine', async () => {
    const { b, refused } = bridge();
    const foreign = { url: 'https://evil.example/', isMainFrame: true };
    expect(await b.handle(CHANNELS.request, foreign, { method: 'GET', path: '/episodes' })).toEqual({
      ok: false,
      status: 400,
      message: 'refused by the app',
    });
    expect(await b.handle(CHANNELS.request, app, { method: 'POST', path: '/engine/shutdown' })).toMatchObject({
      ok: false,
      status: 400,
    });
    expect(refused).toHaveLength(2);
    expect((await client.request<{ pid: number }>('GET', '/api/v1/health')).pid).toBe(process.pid); // still up
  });

  it('streams the engine events once subscribed, and stops on dispose', async () => {
    const { b, pushed } = bridge();
    await b.handle(CHANNELS.eventsStart, app, undefined);
    await expect.poll(() => pushed.map((p) => p.payload)).toContainEqual({ kind: 'state', state: 'open' });
    b.dispose();
    expect(pushed[0]!.payload).toEqual({ kind: 'state', state: 'connecting' });
  });

  it('hands only validated http(s) links to the system browser', async () => {
    const { b, opened, refused } = bridge();
    await b.handle(CHANNELS.openExternal, app, { url: 'https://example.com/docs' });
    await b.handle(CHANNELS.openExternal, app, { url: 'file:///etc/passwd' });
    expect(opened).toEqual(['https://example.com/docs']);
    expect(refused[0]).toMatch(/not an http\(s\) link/);
  });

  it('reports finished operations for notifications', async () => {
    const { b, done } = bridge();
    await b.handle(CHANNELS.operationDone, app, { title: 'Checkpoint c1 saved', ok: true });
    await b.handle(CHANNELS.operationDone, app, { title: '', ok: true });
    expect(done).toEqual([['Checkpoint c1 saved', true]]);
  });

  it('closes a console the engine refuses, with its reason', async () => {
    const { b, pushed } = bridge();
    const stream = await b.handle(CHANNELS.consoleOpen, app, { vm: 'vm-abcdefgh23' });
    expect(stream).toBe(1);
    await expect
      .poll(() => pushed.find((p) => p.payload && 'kind' in p.payload && p.payload.kind === 'close')?.payload)
      .toMatchObject({ stream: 1, kind: 'close', why: expect.stringMatching(/404|no/i) });
  });
});
