// An image half-written by a writer that was killed (a mke2fs, a pull, the engine's own copy of a base image) is
// removed when the next engine starts (docs/disks.md, "Volumes"): from SMOL_HOME/images and the guest cache's images
// directory, where its writer's pid is gone. One whose writer lives is left alone.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EngineHome } from './engine-home.js';

const home = new EngineHome();
const cache = mkdtempSync(path.join(tmpdir(), 'smol-partial-cache-'));
afterAll(async () => {
  await home.destroy();
  rmSync(cache, { recursive: true, force: true });
});

/** A process that writes `file.partial-<its pid>-<hex>` and is killed while it is at it: what it leaves. */
async function killedWriter(file: string): Promise<string> {
  const child = spawn(process.execPath, [
    '-e',
    `require('fs').writeFileSync(process.argv[1] + '.partial-' + process.pid + '-0123456789ab', 'half'); setInterval(() => {}, 1000)`,
    file,
  ]);
  const partial = `${file}.partial-${child.pid}-0123456789ab`;
  while (!existsSync(partial)) await new Promise((resolve) => setTimeout(resolve, 20));
  child.kill('SIGKILL');
  await new Promise((resolve) => child.once('exit', resolve));
  return partial;
}

describe('partial images at engine start', () => {
  it('removes the ones a killed writer left and keeps a live writer’s', async () => {
    const engineImages = path.join(home.dir, 'images');
    const cacheImages = path.join(cache, 'guest', 'images');
    mkdirSync(engineImages, { recursive: true });
    mkdirSync(cacheImages, { recursive: true });
    const copy = await killedWriter(path.join(engineImages, 'oci-00000000000000aa.ext4'));
    const volume = await killedWriter(path.join(cacheImages, 'volume-00000000000000bb.ext4'));
    const live = path.join(cacheImages, `volume-00000000000000cc.ext4.partial-${process.pid}-0123456789ab`);
    writeFileSync(live, 'being written');

    process.env.SMOL_CACHE = cache; // the engine the client starts inherits it
    try {
      await home.client();
    } finally {
      delete process.env.SMOL_CACHE;
    }
    expect(existsSync(copy)).toBe(false);
    expect(existsSync(volume)).toBe(false);
    expect(existsSync(live)).toBe(true);
    expect(home.logTail()).toContain(`engine: removed ${path.basename(copy)} from ${engineImages}: its writer died`);
  }, 120_000);
});
