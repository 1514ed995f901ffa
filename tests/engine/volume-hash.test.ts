// An engine hashing a big volume folder still answers (docs/disks.md, "Volumes"): the tree is walked in chunks with
// the event loop turning between them. The folder (50,000 files, on tmpfs so that making it is quick) is hashed for
// an episode whose boot then fails for want of the guest (a throwaway SMOL_CACHE): /health is asked again and again
// from when the episode is asked for until the volume's image is being written, and answers many times meanwhile;
// an engine that walks the tree in one go answers at most a few times before its walk and none during it.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EngineHome } from './engine-home.js';

const home = new EngineHome();
const scratch = mkdtempSync(path.join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'smol-volume-hash-'));
const cache = path.join(scratch, 'cache');
afterAll(async () => {
  await home.destroy();
  rmSync(scratch, { recursive: true, force: true });
});

describe('hashing a volume folder', () => {
  it('leaves the engine answering /health', async () => {
    const tree = path.join(scratch, 'tree');
    for (let d = 0; d < 100; d++) {
      mkdirSync(path.join(tree, `d${d}`), { recursive: true });
      for (let f = 0; f < 500; f++) writeFileSync(path.join(tree, `d${d}`, `f${f}`), 'x');
    }
    const smolfile = home.smolfile('volume', `image = "builtin"\nvolumes = ["${tree}:/data"]\n`);
    process.env.SMOL_CACHE = cache; // the engine the client starts inherits it: no guest assets there
    let smol;
    try {
      smol = await home.client();
    } finally {
      delete process.env.SMOL_CACHE;
    }
    const images = path.join(cache, 'guest', 'images');
    const writing = () => existsSync(images) && readdirSync(images).some((name) => name.includes('.partial-'));
    let settled = false;
    const episode = smol.up(smolfile).then(
      () => 'started',
      (error: Error) => error.message,
    );
    void episode.then(() => (settled = true));
    let answered = 0;
    while (!settled && !writing()) {
      await smol.api.call('health');
      if (!writing()) answered++;
    }
    // The boot fails for want of the guest, after the volume was hashed and built.
    expect(await episode).toMatch(/the builtin image needs the Linux guest/);
    expect(answered, `health answered ${answered} times before the image was being written`).toBeGreaterThanOrEqual(20);
  }, 300_000);
});
