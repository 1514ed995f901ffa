import { closeSync, ftruncateSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listImages, readImageRecord, writeImageRecord } from './image-list.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'smol-image-list-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function sparse(name: string, size: number, data = '') {
  const fd = openSync(path.join(dir, name), 'w');
  ftruncateSync(fd, size);
  closeSync(fd);
  if (data) writeFileSync(path.join(dir, name), data, { flag: 'r+' });
}

describe('the built images', () => {
  it('are listed by name with their size, what they take on disk and their record', () => {
    sparse('debian-bookworm-0123456789abcdef.ext4', 4 * 1024 ** 3, 'x'.repeat(64 * 1024));
    sparse('debian-bookworm-backports-fedcba9876543210.ext4', 1024 ** 3);
    sparse('debian-bookworm-notahash.ext4', 10); // not an image of ours
    writeFileSync(path.join(dir, 'build-debian-Abc123'), ''); // a build in progress
    writeImageRecord(
      dir,
      'debian-bookworm-0123456789abcdef',
      { suite: 'bookworm', mirror: 'http://m', hash: '0123456789abcdef', init: ['true'], seconds: 71, initOutput: [] },
      new Date('2026-12-01T13:51:00Z'),
    );

    const images = listImages(dir);
    expect(images.map((image) => [image.image, image.hash, image.size])).toEqual([
      ['debian:bookworm', '0123456789abcdef', 4 * 1024 ** 3],
      ['debian:bookworm-backports', 'fedcba9876543210', 1024 ** 3],
    ]);
    expect(images[0]).toMatchObject({ built: '2026-12-01T13:51:00.000Z', seconds: 71, init: ['true'] });
    expect(images[0]!.allocated).toBeGreaterThanOrEqual(64 * 1024);
    expect(images[0]!.allocated).toBeLessThan(1024 * 1024);
    expect(images[1]).toMatchObject({ seconds: null, init: null });
  });

  it('are none when nothing was ever built', () => {
    expect(listImages(path.join(dir, 'images'))).toEqual([]);
  });

  it('a damaged record reads as none', () => {
    writeFileSync(path.join(dir, 'debian-x-0123456789abcdef.json'), '{"format": 1, "init": "no"}');
    expect(readImageRecord(dir, 'debian-x-0123456789abcdef')).toBeNull();
  });
});
