// A volume's image (docs/disks.md, "Volumes"): mke2fs -d of the folder, cached by the tree's hash.
import { execFileSync, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  ensureVolumeImage,
  partialName,
  removeLeftPartials,
  volumeImageSize,
  volumeTree,
  volumeTreeAsync,
} from './volume-image.js';

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

  it('removes the partial image a killed writer left, before a build, and keeps one whose writer lives', async () => {
    const images = path.join(work, 'partials');
    mkdirSync(images, { recursive: true });
    // A writer killed while it wrote its partial image (as a killed mke2fs's engine would leave it).
    const child = spawn(process.execPath, [
      '-e',
      `require('fs').writeFileSync(process.argv[1] + '.partial-' + process.pid + '-0123456789ab', 'half'); setInterval(() => {}, 1000)`,
      path.join(images, 'volume-00000000000000aa.ext4'),
    ]);
    const dead = `volume-00000000000000aa.ext4.partial-${child.pid}-0123456789ab`;
    while (!existsSync(path.join(images, dead))) await new Promise((resolve) => setTimeout(resolve, 20));
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    const live = path.basename(partialName(path.join(images, 'volume-00000000000000bb.ext4'))); // this process's
    writeFileSync(path.join(images, live), 'being written');
    // An older Smol's partial (no pid): left behind once an hour old, not before.
    const oldUnowned = 'oci-00000000000000cc.ext4.partial-0123456789ab';
    const newUnowned = 'oci-00000000000000dd.ext4.partial-0123456789ab';
    writeFileSync(path.join(images, oldUnowned), 'old');
    writeFileSync(path.join(images, newUnowned), 'new');
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    utimesSync(path.join(images, oldUnowned), twoHoursAgo, twoHoursAgo);

    const folder = path.join(work, 'partial-src');
    mkdirSync(folder, { recursive: true });
    writeFileSync(path.join(folder, 'x'), 'x');
    const built = await ensureVolumeImage(folder, images);
    expect(readdirSync(images).sort()).toEqual([path.basename(built), live, newUnowned].sort());
    expect(removeLeftPartials(images)).toEqual([]);
  });

  it('hashes as volumeTree does without holding the event loop, and refuses a folder over the cap', async () => {
    const folder = path.join(work, 'many');
    for (let d = 0; d < 20; d++) {
      mkdirSync(path.join(folder, `d${d}`), { recursive: true });
      for (let f = 0; f < 100; f++) writeFileSync(path.join(folder, `d${d}`, `f${f}`), `${d}/${f}`);
    }
    symlinkSync('d0/f0', path.join(folder, 'link'));
    let turns = 0;
    let counting = true;
    const tick = () => {
      turns++;
      if (counting) setImmediate(tick);
    };
    setImmediate(tick);
    const tree = await volumeTreeAsync(folder);
    counting = false;
    expect(tree).toEqual(volumeTree(folder));
    expect(tree.entries).toBe(2021);
    // Other work ran while it walked 2,021 entries (the sync walk lets none run).
    expect(turns).toBeGreaterThanOrEqual(5);

    const cap = { ...process.env, SMOL_VOLUME_MAX_MIB: '1' };
    const mib = (tree.bytes / 2 ** 20).toFixed(1);
    const said =
      `the volume folder ${folder} holds ${mib} MiB (2021 entries), more than the cap of 1 MiB for a volume: ` +
      'set SMOL_VOLUME_MAX_MIB to raise it (docs/disks.md, "Volumes")';
    await expect(volumeTreeAsync(folder, cap)).rejects.toThrow(said);
    expect(() => volumeTree(folder, cap)).toThrow(said);
    await expect(ensureVolumeImage(folder, path.join(work, 'capped'), cap)).rejects.toThrow(said);
    expect(existsSync(path.join(work, 'capped'))).toBe(false);
    expect(() => volumeTree(folder, { SMOL_VOLUME_MAX_MIB: 'lots' })).toThrow(
      'SMOL_VOLUME_MAX_MIB="lots" is not a whole number of MiB (1 or more)',
    );
  }, 120_000);
});
