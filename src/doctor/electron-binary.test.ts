import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findElectronBinary } from './electron-binary.js';

let root: string;
afterEach(() => rmSync(root, { recursive: true, force: true }));

function project(files: Record<string, string>): string {
  root = mkdtempSync(path.join(os.tmpdir(), 'smol-electron-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    writeFileSync(path.join(root, name), text);
  }
  return root;
}

describe('npm start finds Electron without downloading it', () => {
  it('says the package is missing', () => {
    expect(findElectronBinary(project({}), {})).toEqual({ why: 'the electron package is not installed' });
  });

  it('says the binary was never downloaded', () => {
    const found = findElectronBinary(project({ 'node_modules/electron/package.json': '{}' }), {});
    expect(found).toMatchObject({ why: expect.stringMatching(/never downloaded/) });
  });

  it('finds a downloaded binary, and notices one that was deleted', () => {
    const dir = project({
      'node_modules/electron/package.json': '{}',
      'node_modules/electron/path.txt': 'electron',
      'node_modules/electron/dist/electron': '',
    });
    expect(findElectronBinary(dir, {})).toEqual({ binary: path.join(dir, 'node_modules/electron/dist/electron') });
    rmSync(path.join(dir, 'node_modules/electron/dist/electron'));
    expect(findElectronBinary(dir, {})).toMatchObject({ why: expect.stringMatching(/missing/) });
  });

  it('honours ELECTRON_OVERRIDE_DIST_PATH', () => {
    const dir = project({ 'node_modules/electron/package.json': '{}', 'elsewhere/electron': '' });
    expect(findElectronBinary(dir, { ELECTRON_OVERRIDE_DIST_PATH: path.join(dir, 'elsewhere') })).toEqual({
      binary: path.join(dir, 'elsewhere', 'electron'),
    });
  });
});
