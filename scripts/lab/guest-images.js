// The guest images, staged into the lab's own tmpfs. An engine adopts a base image into its SMOL_HOME by a hard
// link, else by a sparse copy (src/engine/disk-layers.ts); in the lab a test's SMOL_HOME is on /tmp (tmpfs) and the
// cache is a 9p share, so every home copied every image it booted, and 9p has no SEEK_HOLE: `cp --sparse` read the
// whole 4 GiB of an image of 7 MiB (45-48 s each in the lab on 2026-12-03, docs/lab.md). Instead the host packs the
// images' data with their holes (GNU tar --sparse, which asks the host file system where the data is) into the
// run directory; the lab's /init unpacks them into /tmp/.smol-lab/cache, whose other entries are symlinks to the
// real cache, and the command runs with SMOL_CACHE pointing there: adopting an image is a hard link again.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { EXIT, LabError } from './errors.js';

/** The cache's guest images: root disks (guest/*.ext4) and built or converted images (guest/images/*). */
export function guestImageFiles(cache) {
  const guest = path.join(cache, 'guest');
  const pick = (dir, test) => {
    let names = [];
    try {
      names = fs.readdirSync(path.join(guest, dir), { withFileTypes: true });
    } catch {
      return [];
    }
    return names
      .filter((entry) => entry.isFile() && !entry.name.includes('.partial') && test(entry.name))
      .map((entry) => path.join(dir, entry.name))
      .sort();
  };
  return [...pick('.', (name) => name.endsWith('.ext4')), ...pick('images', (name) => /\.(ext4|json)$/.test(name))];
}

/**
 * Packs the cache's guest images into `runDir/guest-images.tar` and names the cache in `runDir/guest-cache` for
 * init.sh. Returns the number of files and the bytes of data packed, or null when there is nothing to stage.
 */
export function stageGuestImages(cache, runDir) {
  const files = guestImageFiles(cache);
  if (files.length === 0) return null;
  const archive = path.join(runDir, 'guest-images.tar');
  const tar = spawnSync('tar', ['--sparse', '-cf', archive, '-C', path.join(cache, 'guest'), '--', ...files], {
    encoding: 'utf8',
  });
  if (tar.status !== 0) {
    throw new LabError(
      EXIT.setupFailed,
      `cannot pack the guest images of ${cache} for the lab: ${tar.stderr.trim() || tar.error?.message}`,
    );
  }
  fs.writeFileSync(path.join(runDir, 'guest-cache'), `${path.resolve(cache)}\n`);
  return { files: files.length, bytes: fs.statSync(archive).size };
}
