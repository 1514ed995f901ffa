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

  /** A server whose UI directory is `uiRoot`, asked for `paths` with the token; closed after. */
  const askBroken = async (uiRoot: string, paths: string[]) => {
    const bare = await startApiServer({
      api: {} as EngineApi,
      socketPath: path.join(dir, `bare-${path.basename(uiRoot)}.sock`),
      tcp: { host: '127.0.0.1', port: 0, token },
      staticRoot: uiRoot,
    });
    const answers: Answer[] = [];
    for (const wanted of paths) {
      answers.push(
        await new Promise<Answer>((resolve, reject) => {
          const req = http.get(
            { host: '127.0.0.1', port: Number(new URL(bare.url!).port), path: wanted, headers: auth },
            (res) => {
              const chunks: Buffer[] = [];
              res.on('data', (chunk: Buffer) => chunks.push(chunk));
              res.on('end', () =>
                resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString() }),
              );
            },
          );
          req.on('error', reject);
        }),
      );
    }
    await bare.close();
    return answers;
  };
  /** A built UI in its own directory, with `files` (name to content) instead of the good ones. */
  const brokenUi = (name: string, files: Record<string, string>) => {
    const ui = path.join(dir, name);
    mkdirSync(path.join(ui, 'assets'), { recursive: true });
    const page =
      '<!doctype html><title>Smol Studio</title><link rel="icon" href="./favicon.svg">' +
      '<script type="module" crossorigin src="./assets/index-AbCd1234.js"></script>' +
      '<link rel="stylesheet" crossorigin href="/assets/index-AbCd1234.css">';
    const all = {
      'index.html': page,
      'assets/index-AbCd1234.js': 'go()',
      'assets/index-AbCd1234.css': 'b{}',
      ...files,
    };
    for (const [file, text] of Object.entries(all)) if (text !== null) writeFileSync(path.join(ui, file), text);
    return ui;
  };
  /** What a browser shows for the page: the status, and the page's text without its tags. */
  const shown = (answer: Answer) => answer.text.replace(/<style>[^<]*<\/style>/, '').replace(/<[^>]+>/g, ' ');

  it('answers the page with what is missing and the command that builds it when the UI is not built', async () => {
    const missing = path.join(dir, 'no-such-dir');
    const [page, asset] = await askBroken(missing, ['/?token=x', '/assets/index-AbCd1234.js']);
    expect(page!.status).toBe(503);
    expect(page!.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page!.headers['content-security-policy']).toBe(CONTENT_SECURITY_POLICY);
    expect(page!.headers['cache-control']).toBe('no-store');
    expect(shown(page!)).toContain('The UI is not built');
    expect(shown(page!)).toContain(`${missing} does not exist`);
    expect(shown(page!)).toContain('npm run build:renderer');
    // A script or style asked for (not the page): the API's JSON error, saying the same.
    expect(asset!.status).toBe(503);
    expect(JSON.parse(asset!.text).error.message).toMatch(
      /the UI is not built .*does not exist.*npm run build:renderer/,
    );
  });

  it('refuses a blank page: an empty index.html, or a script or style it loads missing or empty', async () => {
    const cases: [string, Record<string, string>, RegExp][] = [
      ['empty-page', { 'index.html': '' }, /index\.html is empty \(0 bytes\)/],
      [
        'empty-script',
        { 'assets/index-AbCd1234.js': '' },
        /assets\/index-AbCd1234\.js, which the page loads, is empty/,
      ],
      ['no-style', {}, /assets\/index-AbCd1234\.css, which the page loads, does not exist/],
    ];
    for (const [name, files, said] of cases) {
      const ui = brokenUi(name, files);
      if (name === 'no-style') rmSync(path.join(ui, 'assets', 'index-AbCd1234.css'));
      const [root, index, script] = await askBroken(ui, ['/', '/index.html', '/assets/index-AbCd1234.js']);
      for (const page of [root!, index!]) {
        expect(page.status, name).toBe(503);
        expect(shown(page), name).toMatch(said);
        expect(shown(page), name).toContain('npm run build:renderer');
      }
      // The empty script itself is refused too (a cached page asking for it would run nothing).
      if (name === 'empty-script') expect(script!.status).toBe(503);
      else expect(script!.status).toBe(200);
    }
    // The same files whole serve the page (the icon it names is not needed for it to work).
    const [good] = await askBroken(brokenUi('whole', {}), ['/']);
    expect(good).toMatchObject({ status: 200 });
    expect(good!.text).toContain('<title>Smol Studio</title>');
  });
});
