// The image lifecycle through the API's image operations (src/api/image-routes.ts, what the engine runs for
// GET/POST/DELETE /api/v1/images and POST /api/v1/images/prune): pull, list, rm, and prune keeping what a disk
// layer (a snapshot's or a VM's) sits on. The cache is a temporary SMOL_CACHE; the layer a real layer header.
import { spawnSync } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineApi } from '../../src/api/engine-api.js';
import { imageOperations } from '../../src/api/image-routes.js';
import { busyboxLayers, FIXTURE_CONFIG, tarOf, writeLayout } from './oci-fixtures.js';

const asRoot = process.getuid?.() === 0;
let scratch: string;
let home: string;
let cacheImages: string;
const saved = process.env.SMOL_CACHE;

beforeAll(() => {
  scratch = mkdtempSync(path.join(os.tmpdir(), 'smol-oci-lifecycle-'));
  home = path.join(scratch, 'home');
  mkdirSync(path.join(home, 'disks'), { recursive: true });
  process.env.SMOL_CACHE = path.join(scratch, 'cache');
  cacheImages = path.join(scratch, 'cache', 'guest', 'images');
});
afterAll(() => {
  if (saved === undefined) delete process.env.SMOL_CACHE;
  else process.env.SMOL_CACHE = saved;
  rmSync(scratch, { recursive: true, force: true });
});

/** A disk layer file as the VMM writes its header: magic, flags, the path of the image below. */
function layerOver(below: string, inHome = home): void {
  const header = Buffer.alloc(4096);
  header.write('SMOLDISK', 0, 'latin1');
  header.writeUInt32LE(1, 20); // frozen: a snapshot's
  header.writeUInt32LE(Buffer.byteLength(below), 88);
  header.write(below, 96, 'utf8');
  writeFileSync(path.join(inHome, 'disks', '0123456789abcdef0123.layer'), header);
}

/** The real `smol` (bin/smol.js: dist/, or SMOL_DIST's build) on the data dir `inHome` and the test's cache. */
function smol(inHome: string, args: string[]) {
  const bin = path.resolve(import.meta.dirname, '../../bin/smol.js');
  const run = spawnSync(process.execPath, [bin, ...args], {
    env: { ...process.env, SMOL_HOME: inHome },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe.skipIf(!asRoot)('the image lifecycle (as root)', () => {
  it('pull, ls, rm and prune: an image a snapshot sits on is kept, the rest is freed', async () => {
    const images = imageOperations({ health: () => ({ home }) } as unknown as EngineApi);
    const one = writeLayout(path.join(scratch, 'one'), await busyboxLayers(), 'v1', {
      ...FIXTURE_CONFIG,
      author: 'one',
    });
    const other = await tarOf([{ header: { name: 'etc/two' }, data: 'two' }]);
    const two = writeLayout(path.join(scratch, 'two'), [...(await busyboxLayers()), other], 'v1');
    const a = await images.pull({ reference: `oci:${one.dir}:v1` });
    const b = await images.pull({ reference: `oci:${two.dir}:v1` });
    expect(a.name).not.toBe(b.name);
    expect((await images.list()).map((i) => i.name).sort()).toEqual([a.name, b.name].sort());

    // The engine adopted image a for an episode (a hard link in SMOL_HOME/images) and a snapshot's layer sits on it.
    mkdirSync(path.join(home, 'images'));
    const adopted = path.join(home, 'images', `${a.name}.ext4`);
    linkSync(a.file, adopted);
    layerOver(adopted);
    // b was adopted too, but nothing sits on it any more.
    linkSync(b.file, path.join(home, 'images', `${b.name}.ext4`));

    await expect(images.remove('oci:/no/such/layout:v1')).rejects.toThrow(/^no image oci:\/no\/such\/layout:v1 in /);
    // A dry run says what prune will free and frees nothing.
    const planned = await images.prune(true);
    expect(existsSync(b.file) && existsSync(path.join(home, 'images', `${b.name}.ext4`))).toBe(true);
    const pruned = await images.prune();
    expect(planned.removed).toEqual(pruned.removed);
    const names = pruned.removed.map((r) => r.name);
    expect(names).toContain(b.name);
    expect(names).not.toContain(a.name);
    expect(names).toContain(`blob ${two.layerDigests[2]}`); // b's own layer; the shared ones stay for a
    expect(existsSync(adopted) && existsSync(a.file)).toBe(true);
    expect(existsSync(b.file) || existsSync(path.join(home, 'images', `${b.name}.ext4`))).toBe(false);
    for (const digest of one.layerDigests)
      expect(existsSync(path.join(cacheImages, 'blobs/sha256', digest.slice(7)))).toBe(true);
    expect((await images.list()).map((i) => i.name)).toEqual([a.name]);

    // The list says what keeps it: first the layer no snapshot owns (a VM's), then the snapshot that owns it.
    const layer = '0123456789abcdef0123.layer';
    expect((await images.list())[0]!.usedBy).toEqual([{ snapshot: null, episode: null, name: null, layer }]);
    const snapshot = path.join(home, 'snapshots', 'sn-bbbbbbbbbb');
    mkdirSync(snapshot, { recursive: true });
    const manifest = { id: 'sn-bbbbbbbbbb', episode: 'ep-cccccccccc', name: 'before', diskLayers: [layer] };
    writeFileSync(path.join(snapshot, 'manifest.json'), JSON.stringify(manifest));
    expect((await images.list())[0]!.usedBy).toEqual([
      { snapshot: 'sn-bbbbbbbbbb', episode: 'ep-cccccccccc', name: 'before', layer },
    ]);
    // rm refuses it, naming the snapshot, and leaves everything as it was.
    await expect(images.remove(`oci:${one.dir}:v1`)).rejects.toThrow(
      `oci:${one.dir}:v1 is needed by snapshot "before" (sn-bbbbbbbbbb) of episode ep-cccccccccc: delete it first`,
    );
    expect(existsSync(a.file)).toBe(true);
    // Forced, rm forgets the reference and takes the cache's copy; the snapshot's copy stays, and says so.
    const removed = await images.remove(`oci:${one.dir}:v1`, true);
    expect(removed.inUse).toBe(true);
    expect(existsSync(a.file)).toBe(false);
    expect(existsSync(adopted)).toBe(true);
    expect(await images.list()).toEqual([]);
    expect(readdirSync(path.join(cacheImages, 'blobs/sha256'))).toEqual([]);
    // Once no layer sits on it, prune frees the engine's copy too.
    rmSync(path.join(home, 'disks', '0123456789abcdef0123.layer'));
    rmSync(snapshot, { recursive: true });
    expect((await images.prune()).removed.map((r) => r.file)).toEqual([adopted]);
  }, 120_000);

  it('prune keeps a volume image a snapshot names (a read-only volume has no layer) and frees the rest', async () => {
    const images = imageOperations({ health: () => ({ home }) } as unknown as EngineApi);
    mkdirSync(path.join(home, 'images'), { recursive: true });
    mkdirSync(cacheImages, { recursive: true });
    const kept = 'volume-00000000000000aa.ext4';
    const freed = 'volume-00000000000000bb.ext4';
    for (const name of [kept, freed]) {
      writeFileSync(path.join(home, 'images', name), 'ext4');
      writeFileSync(path.join(cacheImages, name), 'ext4');
    }
    const snapshot = path.join(home, 'snapshots', 'sn-aaaaaaaaaa');
    mkdirSync(snapshot, { recursive: true });
    writeFileSync(path.join(snapshot, 'manifest.json'), JSON.stringify({ id: 'sn-aaaaaaaaaa', volumeImages: [kept] }));
    await images.prune();
    expect(existsSync(path.join(home, 'images', kept)) && existsSync(path.join(cacheImages, kept))).toBe(true);
    expect(existsSync(path.join(home, 'images', freed)) || existsSync(path.join(cacheImages, freed))).toBe(false);
  });

  it('smol image rm refuses an image a snapshot needs, naming it, unless --force; prune --dry-run frees nothing', async () => {
    // The CLI runs the API's own image operations: the same refusal, worded with --force, exit 4 (wrong state).
    const cliHome = path.join(scratch, 'cli-home');
    const images = imageOperations({ health: () => ({ home: cliHome }) } as unknown as EngineApi);
    mkdirSync(path.join(cliHome, 'disks'), { recursive: true });
    mkdirSync(path.join(cliHome, 'images'));
    const kept = writeLayout(path.join(scratch, 'kept'), await busyboxLayers(), 'v1');
    const spareLayer = await tarOf([{ header: { name: 'etc/spare' }, data: 'spare' }]);
    const spare = writeLayout(path.join(scratch, 'spare'), [...(await busyboxLayers()), spareLayer]);
    const a = await images.pull({ reference: `oci:${kept.dir}:v1` });
    const b = await images.pull({ reference: `oci:${spare.dir}:v1` });
    const adopted = path.join(cliHome, 'images', `${a.name}.ext4`);
    linkSync(a.file, adopted);
    layerOver(adopted, cliHome);
    const snapshot = path.join(cliHome, 'snapshots', 'sn-dddddddddd');
    mkdirSync(snapshot, { recursive: true });
    const manifest = {
      id: 'sn-dddddddddd',
      episode: 'ep-eeeeeeeeee',
      name: 'kept',
      diskLayers: ['0123456789abcdef0123.layer'],
    };
    writeFileSync(path.join(snapshot, 'manifest.json'), JSON.stringify(manifest));

    const refused = smol(cliHome, ['image', 'rm', `oci:${kept.dir}:v1`]);
    expect(refused.status, refused.stderr).toBe(4);
    expect(refused.stderr).toBe(
      `smol: image rm: oci:${kept.dir}:v1 is needed by snapshot "kept" (sn-dddddddddd) of episode ep-eeeeeeeeee: ` +
        'delete it first, or remove it anyway with --force (the engine keeps its copy until prune finds it unused)\n',
    );
    expect(existsSync(a.file)).toBe(true);
    const missing = smol(cliHome, ['image', 'rm', 'oci:/no/such/layout:v1']);
    expect(missing.status).toBe(3);
    expect(missing.stderr).toMatch(/^smol: image rm: no image oci:\/no\/such\/layout:v1 in /);

    // A dry run lists what a prune would free, with sizes, the same as the API's, and removes none of it.
    const planned = await images.prune(true);
    const names = planned.removed.map((r) => r.name);
    expect(names).toContain(b.name);
    expect(names).not.toContain(a.name);
    const dry = smol(cliHome, ['image', 'prune', '--dry-run']);
    expect(dry.status, dry.stderr).toBe(0);
    const lines = dry.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^a prune would free \d+ files, [\d.]+ MiB in all \(nothing removed: --dry-run\)$/);
    const size = `${(planned.removed.find((r) => r.name === b.name)!.bytes / 2 ** 20).toFixed(1)} MiB`;
    expect(lines.map((line) => line.trim())).toContain(`${size}  ${b.name}  ${b.file}`);
    const json = JSON.parse(smol(cliHome, ['image', 'prune', '--dry-run', '--json']).stdout) as { removed: unknown };
    expect(json.removed).toEqual(planned.removed);
    for (const r of planned.removed) expect(existsSync(r.file), r.file).toBe(true);

    // --force removes it from the cache; the snapshot's copy stays, and the output says so.
    const forced = smol(cliHome, ['image', 'rm', `oci:${kept.dir}:v1`, '--force']);
    expect(forced.status, forced.stderr).toBe(0);
    expect(forced.stdout).toMatch(/^removed oci:.*: \d+ files?, [\d.]+ MiB freed \(snapshots still sit on it: /);
    expect(existsSync(a.file)).toBe(false);
    expect(existsSync(adopted)).toBe(true);
    const pruned = smol(cliHome, ['image', 'prune']);
    expect(pruned.status, pruned.stderr).toBe(0);
    expect(pruned.stdout).toContain(b.name);
    expect(existsSync(b.file)).toBe(false);
    expect(existsSync(adopted)).toBe(true); // the snapshot's layer still sits on it
  }, 120_000);
});
