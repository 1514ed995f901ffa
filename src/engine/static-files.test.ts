// Web mode's UI files at / of a real API server on TCP: the token, content types, the CSP, and no way out of the
// UI's directory. The API behind it answers only health here; the engine is tested end to end in tests/engine/.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineApi } from '../api/engine-api.js';
import { startApiServer, type ApiServer } from './api-server.js';
import { CONTENT_SECURITY_POLICY } from './static-files.js';

type Answer = { status: number; headers: http.IncomingHttpHeaders; text: string };

describe('the UI in web mode', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'smol-static-'));
  const root = path.join(dir, 'renderer');
  const token = 'page-token-42';
  let server: ApiServer;
  let port: number;

  const get = (url: string, headers: Record<string, string> = {}, method = 'GET') =>
    new Promise<Answer>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method, path: url, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString() }),
        );
      });
      req.on('error', reject);
      req.end();
    });
  const auth = { authorization: `Bearer ${token}` };

  beforeAll(async () => {
    mkdirSync(path.join(root, 'assets'), { recursive: true });
    writeFileSync(path.join(root, 'index.html'), '<!doctype html><title>Smol Studio</title>');
    writeFileSync(path.join(root, 'assets', 'index-AbCd1234.js'), 'console.log(1)');
    writeFileSync(path.join(root, 'assets', 'index-AbCd1234.css'), 'body{}');
    writeFileSync(path.join(dir, 'secret.txt'), 'the engine owner’s secret');
    symlinkSync(path.join(dir, 'secret.txt'), path.join(root, 'assets', 'escape.txt'));
    const api = {
      health: () => ({ version: '0.1.0', pid: process.pid, home: dir, started: new Date().toISOString() }),
    } as Partial<EngineApi> as EngineApi;
    server = await startApiServer({
      api,
      socketPath: path.join(dir, 'engine.sock'),
      tcp: { host: '127.0.0.1', port: 0, token },
      staticRoot: root,
    });
    port = Number(new URL(server.url!).port);
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the page at the printed URL with a strict CSP, and sets the token cookie its files need', async () => {
    const page = await get(new URL(server.url!).pathname + new URL(server.url!).search);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<title>Smol Studio</title>');
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toBe(CONTENT_SECURITY_POLICY);
    expect(CONTENT_SECURITY_POLICY).toContain("script-src 'self'");
    expect(CONTENT_SECURITY_POLICY).not.toMatch(/script-src[^;]*unsafe/);
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['cache-control']).toBe('no-cache');
    expect(page.headers['set-cookie']).toEqual([`smol_token_${port}=${token}; Path=/; HttpOnly; SameSite=Strict`]);
    // Another listener's page on this host left its own cookie: this port's is the one that counts.
    const script = await get('/assets/index-AbCd1234.js', {
      cookie: `smol_token_1=other; smol_token_${port}=${token}`,
    });
    expect(script).toMatchObject({ status: 200, text: 'console.log(1)' });
    expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(script.headers['cache-control']).toContain('immutable');
    expect(script.headers['set-cookie']).toBeUndefined();
    const style = await get('/assets/index-AbCd1234.css', auth);
    expect(style.headers['content-type']).toBe('text/css; charset=utf-8');
    const head = await get('/', auth, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe(String('<!doctype html><title>Smol Studio</title>'.length));
  });

  it('asks for the token before any file, and refuses a foreign Origin', async () => {
    const none = await get('/');
    expect(none.status).toBe(401);
    expect(none.text).not.toContain('Smol Studio');
    expect((await get('/assets/index-AbCd1234.js', { cookie: 'smol_token=wrong' })).status).toBe(401);
    expect((await get('/', { ...auth, origin: 'http://evil.example' })).status).toBe(403);
    // A page reached through another address of this listener (a forwarded port, --host 0.0.0.0) is its own page.
    const forwarded = { ...auth, host: `localhost:${port}`, origin: `http://localhost:${port}` };
    expect((await get('/api/v1/health', forwarded)).status).toBe(200);
    const mismatch = { ...auth, host: `127.0.0.1:${port}`, origin: `http://localhost:${port}` };
    expect((await get('/api/v1/health', mismatch)).status).toBe(403);
    const otherPort = { ...auth, host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port + 1}` };
    expect((await get('/api/v1/health', otherPort)).status).toBe(403);
  });

  it('never serves a file outside its directory, however the path is spelled', async () => {
    for (const attempt of [
      '/../secret.txt',
      '/%2e%2e/secret.txt',
      '/assets/..%2f..%2fsecret.txt',
      '/assets/%2e%2e/%2e%2e/secret.txt',
      '/..%5csecret.txt',
      '/assets/escape.txt',
      '/index.html%00.js',
      '/%zz',
    ]) {
      const answer = await get(attempt, auth);
      expect([400, 404], attempt).toContain(answer.status);
      expect(answer.text, attempt).not.toContain('the engine owner');
      expect(JSON.parse(answer.text).error.code).toBe(answer.status);
    }
    expect((await get('/assets', auth)).status).toBe(404); // a directory is not a file
    expect((await get('/nothing.js', auth)).text).toContain('no such file: /nothing.js');
  });

  it('keeps the API under /api/v1 and allows only GET and HEAD on files', async () => {
    const health = await get('/api/v1/health', auth);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.text).pid).toBe(process.pid);
    expect((await get('/api/v1/nope', auth)).status).toBe(404);
    const post = await get('/', auth, 'POST');
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET, HEAD');
  });

  it('says the UI is not built when its directory is missing', async () => {
    const bare = await startApiServer({
      api: {} as EngineApi,
      socketPath: path.join(dir, 'bare.sock'),
      tcp: { host: '127.0.0.1', port: 0, token },
      staticRoot: path.join(dir, 'no-such-dir'),
    });
    const answer = await new Promise<Answer>((resolve, reject) => {
      const req = http.get(
        { host: '127.0.0.1', port: Number(new URL(bare.url!).port), path: '/', headers: auth },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString() }),
          );
        },
      );
      req.on('error', reject);
    });
    await bare.close();
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.text).error.message).toMatch(/the UI is not built .*npm run build:renderer/);
  });
});
