// Pulling onto a small file system (a loop-mounted ext4 image this test makes, as tests/engine/full-disk.test.ts
// does) from a real registry on loopback: a pull whose layers would take the disk below the reserve is refused before
// any layer is downloaded, naming the sizes; a pull that fills the disk mid-way (a layer of zeros, tiny to download,
// large once unpacked) fails saying so and leaves nothing half-written; a tree that fits but whose disk image would
// not is refused before mke2fs; with room made, the same pull works. Needs root (mount, conversion) and Debian's
// docker-registry and skopeo; elsewhere it is skipped, saying so.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statfsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureOciImage } from '../../src/guest-build/oci-image.js';
import { busyboxLayers, tarOf, writeLayout } from './oci-fixtures.js';
import { push, REGISTRY_BINARY, SKOPEO, startRegistry, type Registry } from './registry.js';

const ready = process.getuid?.() === 0 && existsSync(REGISTRY_BINARY) && existsSync(SKOPEO);
const MiB = 2 ** 20;
let scratch: string;
let mount: string;
let registry: Registry;
const saved = process.env.SMOL_DISK_RESERVE;

beforeAll(async () => {
  if (!ready) return;
  scratch = mkdtempSync(path.join(os.tmpdir(), 'smol-pull-full-'));
  mount = path.join(scratch, 'mnt');
  mkdirSync(mount);
  execFileSync('truncate', ['-s', '256M', path.join(scratch, 'fs.ext4')]);
  execFileSync('mkfs.ext4', ['-q', '-F', '-m', '0', path.join(scratch, 'fs.ext4')]);
  execFileSync('mount', ['-o', 'loop', path.join(scratch, 'fs.ext4'), mount]);
  registry = await startRegistry(path.join(scratch, 'registry'));
  const base = await busyboxLayers();
  // 24 MiB that do not compress, and 48 MiB of zeros that gzip to a few KiB.
  const noise = await tarOf([{ header: { name: 'noise' }, data: randomBytes(24 * MiB) }]);
  const zeros = await tarOf([{ header: { name: 'zeros' }, data: Buffer.alloc(48 * MiB) }]);
  push(`oci:${writeLayout(path.join(scratch, 'noise'), [...base, noise]).dir}:v1`, registry.host, 'smol/noise:v1');
  push(`oci:${writeLayout(path.join(scratch, 'zeros'), [...base, zeros]).dir}:v1`, registry.host, 'smol/zeros:v1');
  process.env.SMOL_DISK_RESERVE = '8MiB';
}, 120_000);
afterAll(async () => {
  if (saved === undefined) delete process.env.SMOL_DISK_RESERVE;
  else process.env.SMOL_DISK_RESERVE = saved;
  if (!scratch) return;
  await registry?.stop();
  execFileSync('umount', ['-l', mount]);
  rmSync(scratch, { recursive: true, force: true });
});

/** Fills the small file system but for `mib` MiB (a filler file; 0 removes it). */
function leaveFree(mib: number): void {
  const filler = path.join(mount, 'filler');
  rmSync(filler, { force: true });
  if (mib === 0) return;
  const { bavail, bsize } = statfsSync(mount);
  execFileSync('fallocate', ['-l', String(bavail * bsize - mib * MiB), filler]);
}

/** Every file in the cache: blobs, records, build directories, partial downloads, images. */
const cacheFiles = (cache: string) => (existsSync(cache) ? readdirSync(cache, { recursive: true }).map(String) : []);
const halfWritten = (cache: string) => cacheFiles(cache).filter((n) => /partial|build-oci|\.ext4$/.test(n));

describe.skipIf(!ready)('an image pull on a nearly full disk', { timeout: 120_000 }, () => {
  it('is refused before downloading when its layers would take the disk below the reserve, naming the sizes', async () => {
    const cache = path.join(mount, 'cache-noise');
    leaveFree(20);
    const pull = ensureOciImage({ reference: `${registry.host}/smol/noise:v1`, dir: cache });
    await expect(pull).rejects.toThrow(
      new RegExp(
        `^no space left on device for the pull of ${registry.host}/smol/noise:v1 \\(3 of its 3 layers to download\\): ` +
          `it needs 2\\d MiB, (19\\.\\d|20) MiB free in ${cache}, and the engine keeps 8\\.0 MiB in reserve ` +
          '\\(SMOL_DISK_RESERVE\\); remove snapshots .*, or smol image prune$',
      ),
    );
    // Nothing of the layers was fetched (the small config blob is, whole, before the layers' sizes are known).
    expect(cacheFiles(path.join(cache, 'blobs', 'sha256')).length).toBe(1);
    expect(halfWritten(cache)).toEqual([]);
  });

  it('that fills the disk while unpacking fails saying so and leaves nothing half-written', async () => {
    const cache = path.join(mount, 'cache-zeros');
    leaveFree(30);
    const pull = ensureOciImage({ reference: `${registry.host}/smol/zeros:v1`, dir: cache });
    await expect(pull).rejects.toThrow(
      new RegExp(
        `^no space left on device for the pull of ${registry.host}/smol/zeros:v1: ${cache} filled up while its ` +
          'layers were written \\(.*ENOSPC.*\\); nothing of it was kept; remove snapshots .*, or smol image prune$',
      ),
    );
    expect(halfWritten(cache)).toEqual([]);
    expect(cacheFiles(cache).filter((n) => n.endsWith('.json') && n !== 'refs.json')).toEqual([]);
  });

  it('whose files fit but whose disk image would not is refused before the image is made', async () => {
    const cache = path.join(mount, 'cache-zeros');
    leaveFree(80);
    await expect(ensureOciImage({ reference: `${registry.host}/smol/zeros:v1`, dir: cache })).rejects.toThrow(
      new RegExp(
        `^no space left on device for the pull of ${registry.host}/smol/zeros:v1 \\(its root disk, of the files ` +
          `unpacked\\): it needs (49|50) MiB, 2\\d MiB free in ${cache}, and the engine keeps 8\\.0 MiB in reserve`,
      ),
    );
    expect(halfWritten(cache)).toEqual([]);
    // With room made, the same pull works, on the layers the failed one kept whole.
    leaveFree(0);
    const pulled = await ensureOciImage({ reference: `${registry.host}/smol/zeros:v1`, dir: cache });
    expect(pulled.cached).toBe(false);
    expect(existsSync(pulled.file)).toBe(true);
    expect(halfWritten(cache)).toEqual([path.basename(pulled.file)]);
  });
});
