// A volume's image (docs/disks.md, "Volumes"): mke2fs -d of the folder, cached by the tree's hash.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureVolumeImage, volumeImageSize, volumeTree } from './volume-image.js';

const work = mkdtempSync(path.join(tmpdir(), 'smol-volume-image-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('volume images', () => {
  it('copies the folder into a sparse ext4 image, builds it once, and again when the folder changes', async () => {
    const folder = path.join(work, 'src');
    mkdirSync(path.join(folder, 'sub'), { recursive: true });
    writeFileSync(path.join(folder, 'sub', 'a.txt'), 'hello from the host\n');
    symlinkSync('sub/a.txt', path.join(folder, 'link'));
    const images = path.join(work, 'images');
    const file = await ensureVolumeImage(folder, images);
    expect(path.basename(file)).toMatch(/^volume-[0-9a-f]{16}\.ext4$/);
    const info = statSync(file);
    expect(info.size).toBe(volumeImageSize(volumeTree(folder)));
    expect(info.size).toBeGreaterThanOrEqual(64 * 2 ** 20);
    expect(info.blocks * 512).toBeLessThan(info.size / 2); // sparse
    expect(info.mode & 0o777).toBe(0o444);
    const cat = execFileSync('/sbin/debugfs', ['-R', 'cat /sub/a.txt', file], { encoding: 'utf8', stdio: 'pipe' });
    expect(cat).toBe('hello from the host\n');
    const link = execFileSync('/sbin/debugfs', ['-R', 'stat /link', file], { encoding: 'utf8', stdio: 'pipe' });
    expect(link).toContain('Fast link dest: "sub/a.txt"');
    // Unchanged: the same image, not rebuilt.
    expect(await ensureVolumeImage(folder, images)).toBe(file);
    expect(statSync(file).mtimeMs).toBe(info.mtimeMs);
    // Changed: another image.
    writeFileSync(path.join(folder, 'b.txt'), 'more\n');
    expect(await ensureVolumeImage(folder, images)).not.toBe(file);
  });

  it('names what failed', async () => {
    await expect(ensureVolumeImage(path.join(work, 'missing'), path.join(work, 'images'))).rejects.toThrow(/missing/);
  });
});
