import { closeSync, existsSync, ftruncateSync, mkdtempSync, openSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  checkRecipe,
  debianImageHash,
  ensureDebianImage,
  locateDebianImage,
  DEBIAN_MIRROR,
  type ImageFile,
} from './debian-image.js';
import type { PackageTools } from './host-packages.js';
import { writeImageRecord } from './image-list.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'smol-debian-image-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const recipe = {
  suite: 'bookworm',
  mirror: DEBIAN_MIRROR,
  init: ['apt-get install -y python3', 'echo built > /etc/smol-built'],
  env: { LANG: 'C.UTF-8', TOKEN: 'x' },
};
const files: ImageFile[] = [
  { name: 'init', data: Buffer.from('#!/bin/sh\n') },
  { name: 'inittab', data: Buffer.from('::respawn:/bin/sh\n') },
  { name: 'smol-agent', data: Buffer.from('\x7fELF') },
];

/** Tools that report every package missing and cannot install (not root). */
const notRoot: PackageTools = {
  installedVersions: () => new Map(),
  depends: () => '',
  canInstall: false,
  install: () => {
    throw new Error('must not install');
  },
};

describe('the cache key of a debian image', () => {
  it('is the same for the same recipe, whatever the order of env', () => {
    const hash = debianImageHash(recipe, files);
    expect(hash).toMatch(/^[0-9a-f]{16}$/);
    expect(debianImageHash({ ...recipe, env: { TOKEN: 'x', LANG: 'C.UTF-8' } }, files)).toBe(hash);
  });

  it('changes with the suite, the mirror, each init command and their order, env and every file', () => {
    const hash = debianImageHash(recipe, files);
    const variants = [
      { ...recipe, suite: 'trixie' },
      { ...recipe, mirror: 'http://mirror.example/debian' },
      { ...recipe, init: [...recipe.init].reverse() },
      { ...recipe, init: recipe.init.slice(0, 1) },
      { ...recipe, init: ['apt-get install -y python3echo built > /etc/smol-built'] }, // no joining ambiguity
      { ...recipe, env: { ...recipe.env, TOKEN: 'y' } },
      { ...recipe, env: { LANG: 'C.UTF-8' } },
    ];
    const hashes = variants.map((variant) => debianImageHash(variant, files));
    for (const [i, file] of files.entries()) {
      const changed = files.map((f, j) => (j === i ? { ...f, data: Buffer.concat([file.data, Buffer.from('!')]) } : f));
      hashes.push(debianImageHash(recipe, changed));
    }
    expect(new Set([hash, ...hashes]).size).toBe(1 + hashes.length);
  });
});

describe('a debian image recipe', () => {
  it('defaults to deb.debian.org', () => {
    expect(checkRecipe({ suite: 'bookworm', init: [], env: {} }).mirror).toBe('http://deb.debian.org/debian');
  });

  it('refuses what cannot be a suite, a mirror or an env entry, naming it', () => {
    expect(() => checkRecipe({ suite: 'Bookworm/../x', init: [], env: {} })).toThrow(
      'debian:Bookworm/../x: a suite is a lower-case name such as bookworm, trixie or stable',
    );
    expect(() => checkRecipe({ suite: 'bookworm', init: [], env: {}, mirror: 'deb.debian.org' })).toThrow(
      'deb.debian.org: not a mirror URL (http://…)',
    );
    expect(() => checkRecipe({ suite: 'bookworm', init: [], env: { '1X': '' } })).toThrow(
      'env: "1X" is not a variable name',
    );
  });

  it('is found at images/debian-<suite>-<hash>.ext4, built or not', () => {
    const located = locateDebianImage(recipe, dir);
    expect(located.file).toBe(path.join(dir, `debian-bookworm-${located.hash}.ext4`));
    expect(located.built).toBe(false);
  });
});

describe('ensureDebianImage', () => {
  it('finds a built image without building, with its init output from the record', async () => {
    const { file, hash, name } = locateDebianImage(recipe, dir);
    const fd = openSync(file, 'w');
    ftruncateSync(fd, 4 * 1024 ** 3);
    closeSync(fd);
    const initOutput = [{ command: recipe.init[0]!, output: 'Setting up python3\n' }];
    writeImageRecord(dir, name, {
      suite: 'bookworm',
      mirror: DEBIAN_MIRROR,
      hash,
      init: recipe.init,
      seconds: 70,
      initOutput,
    });
    const progress: string[] = [];
    const result = await ensureDebianImage({
      ...recipe,
      dir,
      tools: notRoot,
      onProgress: (p) => progress.push(p.detail),
    });
    expect(result).toMatchObject({ file, hash, cached: true, initOutput, size: 4 * 1024 ** 3, seconds: null });
    expect(result.allocated).toBeLessThan(1024 * 1024);
    expect(progress).toEqual([`cached ${name}.ext4`]);
  });

  it('without mmdebstrap and not as root, fails with the command that installs it, leaving nothing behind', async () => {
    await expect(ensureDebianImage({ ...recipe, dir, tools: notRoot })).rejects.toThrow(
      'missing packages: mmdebstrap e2fsprogs debian-archive-keyring; install them with: sudo apt-get update && ' +
        'sudo apt-get install -y mmdebstrap e2fsprogs debian-archive-keyring',
    );
    expect(readdirSync(dir)).toEqual([]);
    expect(existsSync(locateDebianImage(recipe, dir).file)).toBe(false);
  });
});
