// The guest images packed for the lab's /tmp (docs/lab.md, "Guest images in the lab"): which files, and that the
// archive holds their data and not their holes, unpacking to the same bytes and sizes.
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module without types
import { guestImageFiles, stageGuestImages } from './guest-images.js';

let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(path.join(os.tmpdir(), 'smol-lab-images-'));
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

function head(file: string, bytes: number): string {
  const fd = openSync(file, 'r');
  try {
    const buffer = Buffer.alloc(bytes);
    return buffer.subarray(0, readSync(fd, buffer, 0, bytes, 0)).toString();
  } finally {
    closeSync(fd);
  }
}

function sparseImage(file: string, text: string, size: number) {
  writeFileSync(file, text);
  truncateSync(file, size);
}

describe('the guest images staged for the lab', () => {
  it('are the root disks and the images with their metadata, not partial copies nor other cache entries', () => {
    const cache = path.join(scratch, 'cache');
    mkdirSync(path.join(cache, 'guest', 'images'), { recursive: true });
    mkdirSync(path.join(cache, 'guest', 'kernel-0123'));
    writeFileSync(path.join(cache, 'guest', 'current.json'), '{}');
    writeFileSync(path.join(cache, 'guest', 'rootfs-aa.ext4'), 'root');
    writeFileSync(path.join(cache, 'guest', 'images', 'oci-bb.ext4'), 'oci');
    writeFileSync(path.join(cache, 'guest', 'images', 'oci-bb.json'), '{}');
    writeFileSync(path.join(cache, 'guest', 'images', 'oci-cc.ext4.partial-12-ab'), 'half');
    expect(guestImageFiles(cache)).toEqual(['rootfs-aa.ext4', 'images/oci-bb.ext4', 'images/oci-bb.json']);
    expect(guestImageFiles(path.join(scratch, 'no-cache'))).toEqual([]);
    expect(stageGuestImages(path.join(scratch, 'no-cache'), scratch)).toBeNull();
  });

  it('are packed with their holes left out, and unpack to the same sizes and bytes', () => {
    const cache = path.join(scratch, 'cache');
    const run = path.join(scratch, 'run');
    mkdirSync(path.join(cache, 'guest', 'images'), { recursive: true });
    mkdirSync(run);
    const size = 1 << 30; // a GiB apparent, a few bytes of data
    sparseImage(path.join(cache, 'guest', 'rootfs-aa.ext4'), 'root superblock', size);
    sparseImage(path.join(cache, 'guest', 'images', 'debian-bb.ext4'), 'debian superblock', size);
    writeFileSync(path.join(cache, 'guest', 'images', 'debian-bb.json'), '{"format":1}');

    const staged = stageGuestImages(cache, run);
    expect(staged.files).toBe(3);
    expect(staged.bytes).toBeLessThan(1 << 20);
    expect(readFileSync(path.join(run, 'guest-cache'), 'utf8')).toBe(`${cache}\n`);

    const out = path.join(scratch, 'out');
    mkdirSync(out);
    const tar = spawnSync('tar', ['-xf', path.join(run, 'guest-images.tar'), '-C', out], { encoding: 'utf8' });
    expect(tar.status, tar.stderr).toBe(0);
    const image = path.join(out, 'images', 'debian-bb.ext4');
    expect(statSync(image).size).toBe(size);
    expect(statSync(image).blocks * 512).toBeLessThan(1 << 20);
    expect(head(image, 17)).toBe('debian superblock');
    expect(statSync(path.join(out, 'rootfs-aa.ext4')).size).toBe(size);
    expect(readFileSync(path.join(out, 'images', 'debian-bb.json'), 'utf8')).toBe('{"format":1}');
  });
});
