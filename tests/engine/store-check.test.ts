// `smol store check [--repair]` on a real data dir: real snapshots of a tiny guest taken by a real engine, then
// damaged as a disk or a person damages them (a flipped byte, a deleted directory, a stray layer). The check names
// each problem with its path, the engine refuses a store it cannot trust and says how to repair it, and --repair
// moves what is broken into the quarantine and says what was lost.
import { readFileSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Snapshot } from '../../src/api/schema.js';
import { loadNative } from '../../src/vmm/native.js';
import { EngineHome } from './engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 120_000);
let snaps: Snapshot[];

const snapshotDir = (id: string) => path.join(home.dir, 'snapshots', id);

describe('smol store check', { timeout: 300_000 }, () => {
  beforeAll(async () => {
    const smolfile = home.smolfile('count', `kernel = "@guests@/count.elf"\ncmdline = "hz=50"\nmemory = 16\n`);
    const { vm } = await home.json<{ vm: { id: string } }>(['up', '-f', smolfile, '--name', 'counter']);
    const smol = await home.client();
    snaps = [];
    for (const name of ['one', 'two', 'three']) {
      await smol.waitForOutput(vm.id, /count=\d+\r?\n/);
      snaps.push(await smol.checkpoint(vm.id, { name }));
    }
    expect((await home.smol(['engine', 'stop'])).status).toBe(0);
    // Stopping the engine suspended the VM: a fourth snapshot, on the third.
    const suspend = readdirSync(path.join(home.dir, 'snapshots')).find((id) => !snaps.some((s) => s.id === id));
    snaps.push({ id: suspend! } as Snapshot);
  });

  it('finds a store the engine wrote clean, with what it holds', async () => {
    const result = await home.smol(['store', 'check']);
    expect(result.stdout, result.stderr).toMatch(
      /4 snapshots, 0 disk layers, 1 episodes \(full check\)\nno problems\n$/,
    );
    expect(result.status).toBe(0);
  });

  it('names a flipped byte in a snapshot’s state and what needs it; the quick check only looks at the files', async () => {
    const [, two, three, suspend] = snaps;
    const state = path.join(snapshotDir(two!.id), 'state');
    const bytes = readFileSync(state);
    bytes[bytes.length - 9]! ^= 0x40;
    writeFileSync(state, bytes);
    try {
      const result = await home.smol(['store', 'check', '--json']);
      expect(result.status).toBe(1);
      const report = JSON.parse(result.stdout) as { problems: Array<{ kind: string; path: string; problem: string }> };
      expect(report.problems).toEqual([
        {
          kind: 'broken',
          path: `snapshots/${two!.id}`,
          problem: 'state is corrupted: its checksum does not match its contents',
          snapshot: two!.id,
        },
        {
          kind: 'broken',
          path: `snapshots/${three!.id}`,
          problem: `it needs ${two!.id}, which is broken`,
          snapshot: three!.id,
        },
        {
          kind: 'broken',
          path: `snapshots/${suspend!.id}`,
          problem: `it needs ${three!.id}, which is broken`,
          snapshot: suspend!.id,
        },
        {
          kind: 'dangling',
          path: expect.stringMatching(/^episodes\/ep-\w+\.json$/),
          problem: expect.stringMatching(
            `\\(counter\\) resumes from ${suspend!.id}, which is gone \\(starting it will fail\\)$`,
          ),
        },
      ]);
      expect((await home.smol(['store', 'check', '--quick'])).status).toBe(0);
    } finally {
      bytes[bytes.length - 9]! ^= 0x40;
      writeFileSync(state, bytes);
    }
  });

  it('lists a disk layer nothing owns as an orphan', async () => {
    const image = path.join(home.dir, 'images', 'stray.img');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(path.dirname(image), { recursive: true });
    writeFileSync(image, Buffer.alloc(1 << 20));
    const layer = path.join(home.dir, 'disks', '0123456789abcdef0123.layer');
    await loadNative().createDiskLayer(layer, image);
    const result = await home.smol(['store', 'check']);
    expect(result.stdout).toContain(
      'orphan    disks/0123456789abcdef0123.layer: a disk layer no snapshot owns or needs',
    );
    expect(result.status).toBe(1);
  });

  it('the engine refuses a store missing a snapshot others need, saying how to repair it; repair quarantines', async () => {
    const [one, two, three, suspend] = snaps;
    rmSync(snapshotDir(one!.id), { recursive: true });
    const refused = await home.smol(['ls']);
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain(`the store in ${home.dir} has 3 problems an engine cannot start on`);
    expect(refused.stderr).toContain(`snapshots/${two!.id}: its layer parent ${one!.id} is missing`);
    expect(refused.stderr).toContain(`run: smol store check --repair --home ${home.dir}`);

    const repaired = await home.smol(['store', 'check', '--repair']);
    expect(repaired.stdout).toContain(`lost: snapshot ${two!.id} (two, `);
    expect(repaired.stdout).toContain(`snapshot ${three!.id} (three, `);
    expect(repaired.stdout).toContain(`snapshot ${suspend!.id} (`);
    expect(repaired.stdout).toMatch(/repaired/);
    expect(repaired.status, repaired.stdout + repaired.stderr).toBe(0);
    const [stamp] = readdirSync(path.join(home.dir, 'quarantine'));
    const quarantine = path.join(home.dir, 'quarantine', stamp!);
    expect(readdirSync(path.join(quarantine, 'snapshots')).sort()).toEqual([two!.id, three!.id, suspend!.id].sort());
    // The refused engine's start-up sweep had already removed the stray layer (a writable one no snapshot needs).
    expect(existsSync(path.join(home.dir, 'disks', '0123456789abcdef0123.layer'))).toBe(false);
    expect(readFileSync(path.join(quarantine, 'REPORT.txt'), 'utf8')).toContain(
      `snapshots/${two!.id} -> quarantine/${stamp}/snapshots/${two!.id} : its layer parent ${one!.id} is missing`,
    );
    expect(existsSync(snapshotDir(two!.id))).toBe(false);

    // The engine starts again, and the episode is there.
    const listed = await home.smol(['ls']);
    expect(listed.status, listed.stderr).toBe(0);
    expect(listed.stdout).toContain('counter');
  });

  it('refuses to repair while an engine runs', async () => {
    const result = await home.smol(['store', 'check', '--repair']);
    expect(result.stderr).toContain('an engine is running');
    expect(result.stderr).toContain('smol engine stop');
    expect(result.status).toBe(4);
  });
});
