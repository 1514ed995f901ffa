import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveAppRequest } from './app-protocol.js';
import { APP_CONTENT_SECURITY_POLICY } from './app-security.js';

let dir: string;
let root: string;

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'smol-protocol-'));
  root = path.join(dir, 'renderer');
  mkdirSync(path.join(root, 'assets'), { recursive: true });
  writeFileSync(path.join(root, 'index.html'), '<!doctype html>');
  writeFileSync(path.join(root, 'assets', 'index-abcdef12.js'), 'x');
  writeFileSync(path.join(dir, 'secret.txt'), 'secret');
  symlinkSync(path.join(dir, 'secret.txt'), path.join(root, 'leak.txt'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('smol-app:// serves the built UI', () => {
  it('serves the page and its assets with the app CSP', () => {
    const page = resolveAppRequest(root, 'GET', 'smol-app://app/');
    expect(page).toMatchObject({ ok: true, file: path.join(root, 'index.html') });
    expect(page.ok && page.headers['content-security-policy']).toBe(APP_CONTENT_SECURITY_POLICY);
    expect(page.ok && page.headers['x-content-type-options']).toBe('nosniff');
    const script = resolveAppRequest(root, 'GET', 'smol-app://app/assets/index-abcdef12.js');
    expect(script.ok && script.headers['content-type']).toMatch(/javascript/);
  });

  it('refuses every way out of the UI directory', () => {
    for (const url of [
      'smol-app://app/%2e%2e/secret.txt',
      'smol-app://app/assets/%2e%2e%2f%2e%2e%2fsecret.txt',
      'smol-app://app/..%5csecret.txt',
      'smol-app://app/leak.txt',
      'smol-app://app/%00index.html',
    ]) {
      const answer = resolveAppRequest(root, 'GET', url);
      expect(answer.ok, url).toBe(false);
      expect(!answer.ok && [400, 404].includes(answer.status), url).toBe(true);
    }
  });

  it('answers only GET and HEAD on its own host', () => {
    expect(resolveAppRequest(root, 'POST', 'smol-app://app/index.html')).toMatchObject({ ok: false, status: 405 });
    expect(resolveAppRequest(root, 'GET', 'smol-app://other/index.html')).toMatchObject({ ok: false, status: 404 });
    expect(resolveAppRequest(root, 'GET', 'file:///etc/passwd')).toMatchObject({ ok: false, status: 404 });
    expect(resolveAppRequest(root, 'HEAD', 'smol-app://app/index.html').ok).toBe(true);
  });
});
