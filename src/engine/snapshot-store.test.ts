import {
  chmodSync,
  closeSync,
  existsSync,
  ftruncateSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiFailure } from '../api/engine-api.js';
import { EpisodeId, SnapshotId, VmId } from '../api/schema.js';
import { SnapshotStore, newId, type PublishInput } from './snapshot-store.js';

const EP_A = 'ep-aaaaaaaaaa';
const EP_B = 'ep-bbbbbbbbbb';
const VM = 'vm-aaaaaaaaaa';

let home: string;
let logged: string[];
let store: SnapshotStore;

beforeEach(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'smol-store-'));
  logged = [];
  store = await SnapshotStore.open(home, (line) => logged.push(line));
});

afterEach(() => {
  rmSync(home, { recursive: true, force: true });
});

const reopen = async () => (store = await SnapshotStore.open(home, (line) => logged.push(line)));

/** What the VMM does: both files into `DIR.partial-<pid>`, made read-only, then the directory renamed to `DIR`. */
function vmmWrites(dir: string, memory: (file: string) => void = (file) => writeFileSync(file, 'memory layer')) {
  const partial = `${dir}.partial-${process.pid}`;
  mkdirSync(partial);
  writeFileSync(path.join(partial, 'state'), 'state blob');
  memory(path.join(partial, 'memory'));
  chmodSync(path.join(partial, 'state'), 0o444);
  chmodSync(path.join(partial, 'memory'), 0o444);
  renameSync(partial, dir);
}

/** A checkpoint as the engine makes one: a fresh id, the VMM's files, then publish. */
async function checkpoint(fields: Partial<PublishInput> & { layerParent?: string } = {}) {
  const { layerParent, ...rest } = fields;
  const id = fields.id ?? store.newSnapshotId();
  vmmWrites(store.dirFor(id));
  return store.publish({
    id,
    episode: EP_A,
    parent: null,
    vm: VM,
    kind: 'manual',
    layerParentDir: layerParent ? store.dirFor(layerParent) : null,
    memoryBytes: 256 << 20,
    cpus: 1,
    ...rest,
  });
}

async function failure(promiseOrCall: Promise<unknown> | (() => unknown)): Promise<ApiFailure> {
  try {
    await (typeof promiseOrCall === 'function' ? promiseOrCall() : promiseOrCall);
  } catch (error) {
    expect(error).toBeInstanceOf(ApiFailure);
    return error as ApiFailure;
  }
  throw new Error('expected an ApiFailure');
}

const ids = (list: Array<{ id: string }>) => list.map((s) => s.id);
const edges = (list: Array<{ id: string; parent: string | null }>) => list.map((s) => [s.id, s.parent]);

describe('publishing and listing snapshots', () => {
  it('ids have the documented shape: a prefix and 10 base-32 characters', () => {
    expect(EpisodeId.safeParse(newId('ep')).success).toBe(true);
    expect(VmId.safeParse(newId('vm')).success).toBe(true);
    expect(SnapshotId.safeParse(store.newSnapshotId()).success).toBe(true);
    expect(new Set(Array.from({ length: 1000 }, () => newId('sn'))).size).toBe(1000);
  });

  it('a published snapshot is what the API describes, and its manifest is on disk beside the VMM files', async () => {
    const snapshot = await checkpoint({ name: 'booted', note: 'after init' });
    expect(snapshot).toEqual({
      id: snapshot.id,
      episode: EP_A,
      parent: null,
      layerParent: null,
      vm: VM,
      kind: 'manual',
      name: 'booted',
      note: 'after init',
      created: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      diskBytes: expect.any(Number),
      memoryBytes: 256 << 20,
      cpus: 1,
      deleted: false,
      labels: {},
    });
    expect(snapshot.diskBytes).toBeGreaterThan(0);
    const manifest = JSON.parse(readFileSync(path.join(store.dirFor(snapshot.id), 'manifest.json'), 'utf8'));
    expect(manifest).toMatchObject({ format: 1, id: snapshot.id, deleted: false });
    expect(manifest).not.toHaveProperty('diskBytes');
    expect(readdirSync(store.dirFor(snapshot.id)).sort()).toEqual(['manifest.json', 'memory', 'state']);
  });

  it("an episode's timeline lists its snapshots oldest first, even when taken within one millisecond", async () => {
    const taken = [];
    for (let i = 0; i < 5; i++) taken.push(await checkpoint({ name: `s${i}` }));
    await checkpoint({ episode: EP_B });
    expect(ids(store.list(EP_A))).toEqual(ids(taken));
    expect(store.list()).toHaveLength(6);
    expect(new Set(taken.map((s) => s.created)).size).toBe(5);
  });

  it('the episode list’s totals, taken for all episodes at once, match each episode’s own count and disk use', async () => {
    const a1 = await checkpoint();
    await checkpoint({ parent: a1.id });
    const doomed = await checkpoint({ parent: a1.id });
    await checkpoint({ episode: EP_B });
    await store.delete(doomed.id);
    const totals = store.episodeTotals();
    for (const episode of [EP_A, EP_B]) {
      expect(totals.get(episode)).toEqual({
        count: store.list(episode).length,
        diskBytes: store.episodeDiskBytes(episode),
      });
    }
    expect(totals.get(EP_A)!.count).toBe(2);
    expect(totals.get(EP_B)!.count).toBe(1);
  });

  it('snapshots and their timeline order survive an engine restart', async () => {
    const a = await checkpoint({ name: 'a' });
    const b = await checkpoint({ name: 'b', parent: a.id, layerParent: a.id });
    await reopen();
    expect(store.list(EP_A)).toEqual([a, b]);
    const c = await checkpoint({ parent: b.id });
    expect(ids(store.list(EP_A))).toEqual([a.id, b.id, c.id]);
  });

  it('a diff records the snapshot whose layer it is written against, whatever path the VMM names it by', async () => {
    const a = await checkpoint();
    const b = await checkpoint({ layerParent: a.id });
    expect(b.layerParent).toBe(a.id);
    const link = path.join(home, 'link-to-snapshots');
    symlinkSync(path.join(home, 'snapshots'), link);
    const c = await checkpoint({ layerParentDir: path.join(link, b.id) });
    expect(c.layerParent).toBe(b.id);
  });

  it('a diff against a layer the store does not hold is refused, and leaves no directory behind', async () => {
    const id = store.newSnapshotId();
    const stranger = mkdtempSync(path.join(home, 'elsewhere-'));
    await expect(checkpoint({ id, layerParentDir: stranger })).rejects.toThrow(/not a snapshot of this store/);
    expect(existsSync(store.dirFor(id))).toBe(false);
    expect(store.list()).toEqual([]);
  });

  it('a second up of the same Smolfile finds its base snapshot by key', async () => {
    const base = await checkpoint({ episode: null, vm: null, kind: 'base', name: 'base-demo', baseKey: 'k1' });
    await reopen();
    expect(store.findBase('k1')).toEqual(base);
    expect(store.findBase('k2')).toBeUndefined();
    expect(store.list(EP_A)).toEqual([]);
  });
});

describe('the tree', () => {
  it('deleting a snapshot takes it out of the tree and timeline; its children hang from its parent', async () => {
    const a = await checkpoint();
    const b = await checkpoint({ parent: a.id });
    const c = await checkpoint({ parent: b.id });
    const d = await checkpoint({ parent: b.id });
    await store.delete(b.id);
    expect(edges(store.list(EP_A))).toEqual([
      [a.id, null],
      [c.id, a.id],
      [d.id, a.id],
    ]);
    expect(store.get(b.id)?.deleted).toBe(true);
    await store.delete(a.id);
    expect(edges(store.list(EP_A))).toEqual([
      [c.id, null],
      [d.id, null],
    ]);
    await reopen();
    expect(edges(store.list(EP_A))).toEqual([
      [c.id, null],
      [d.id, null],
    ]);
  });

  it('the tree keeps its shape after gc removes a deleted middle snapshot, across restarts too', async () => {
    const a = await checkpoint();
    const b = await checkpoint({ parent: a.id });
    const c = await checkpoint({ parent: b.id });
    await store.delete(b.id);
    expect((await store.gc([])).removed).toEqual([b.id]);
    expect(store.get(b.id)).toBeUndefined();
    expect(store.get(c.id)?.parent).toBe(a.id);
    await reopen();
    expect(edges(store.list(EP_A))).toEqual([
      [a.id, null],
      [c.id, a.id],
    ]);
  });
});

describe('finding a snapshot by what a person types', () => {
  it('by id, by a short prefix of the id with or without sn-, and by name', async () => {
    const a = await checkpoint({ id: 'sn-abcdefghij', name: 'booted' });
    await checkpoint({ id: 'sn-zyxwvutsrq', name: 'later' });
    expect(store.resolve(a.id)).toEqual(a);
    expect(store.resolve('sn-abcd').id).toBe(a.id);
    expect(store.resolve('abcd').id).toBe(a.id);
    expect(store.resolve('booted').id).toBe(a.id);
    expect(store.resolve('booted', EP_A).id).toBe(a.id);
  });

  it('a prefix shorter than 4 characters, an unknown name and a deleted snapshot are not found', async () => {
    const a = await checkpoint({ id: 'sn-abcdefghij', name: 'gone' });
    expect((await failure(() => store.resolve('abc'))).status).toBe(404);
    expect((await failure(() => store.resolve('nothing'))).status).toBe(404);
    await store.delete(a.id);
    expect((await failure(() => store.resolve(a.id))).message).toMatch(/was deleted/);
    expect((await failure(() => store.resolve('gone'))).status).toBe(404);
  });

  it('an ambiguous prefix or name is refused with every candidate named', async () => {
    await checkpoint({ id: 'sn-abcdaaaaaa', name: 'x' });
    await checkpoint({ id: 'sn-abcdbbbbbb', name: 'x', episode: EP_B });
    const prefix = await failure(() => store.resolve('abcd'));
    expect(prefix.status).toBe(400);
    expect(prefix.message).toContain('sn-abcdaaaaaa');
    expect(prefix.message).toContain('sn-abcdbbbbbb');
    expect((await failure(() => store.resolve('x'))).status).toBe(400);
    expect(store.resolve('abcda').id).toBe('sn-abcdaaaaaa');
  });

  it("within an episode a name means that episode's snapshot, then the base's", async () => {
    const a = await checkpoint({ name: 'x' });
    const b = await checkpoint({ name: 'x', episode: EP_B });
    const base = await checkpoint({ episode: null, vm: null, kind: 'base', name: 'base-demo', baseKey: 'k' });
    expect(store.resolve('x', EP_A).id).toBe(a.id);
    expect(store.resolve('x', EP_B).id).toBe(b.id);
    expect(store.resolve('base-demo', EP_A).id).toBe(base.id);
    expect((await failure(() => store.resolve('y', EP_A))).message).toMatch(`in ${EP_A}`);
  });
});

describe('renaming and annotating', () => {
  it('a new name and note are kept across restarts, and the snapshot is then found by its new name', async () => {
    const a = await checkpoint({ name: 'old' });
    const renamed = await store.update(a.id, { name: 'new', note: 'the good one' });
    expect(renamed).toMatchObject({ name: 'new', note: 'the good one', created: a.created });
    await reopen();
    expect(store.resolve('new', EP_A)).toEqual(renamed);
    expect(await store.update(a.id, { note: 'only the note' })).toMatchObject({ name: 'new' });
  });

  it('a name another snapshot of the episode holds, or a malformed one, is refused', async () => {
    const a = await checkpoint({ name: 'a' });
    await checkpoint({ name: 'b' });
    await checkpoint({ name: 'c', episode: EP_B });
    expect((await failure(store.update(a.id, { name: 'b' }))).status).toBe(409);
    expect((await failure(store.update(a.id, { name: 'no spaces' }))).status).toBe(400);
    expect((await store.update(a.id, { name: 'c' })).name).toBe('c');
    expect((await failure(store.update('sn-zzzzzzzzzz', { note: '' }))).status).toBe(404);
  });
});

describe('deleting and garbage collection', () => {
  it('a deleted layer stays on disk while a living descendant diffs against it, and goes with the last one', async () => {
    const a = await checkpoint();
    const b = await checkpoint({ parent: a.id, layerParent: a.id });
    const c = await checkpoint({ parent: b.id, layerParent: b.id });
    await store.delete(a.id);
    await store.delete(b.id);
    expect(await store.gc([])).toEqual({ removed: [], freedBytes: 0 });
    expect(existsSync(store.dirFor(a.id))).toBe(true);
    const bytes = a.diskBytes + b.diskBytes + store.diskBytes(c.id);
    await store.delete(c.id);
    const result = await store.gc([]);
    expect(result.removed.sort()).toEqual([a.id, b.id, c.id].sort());
    expect(result.freedBytes).toBe(bytes);
    for (const id of [a.id, b.id, c.id]) expect(existsSync(store.dirFor(id))).toBe(false);
  });

  it('a deleted layer a running VM will diff against next stays until that VM moves on', async () => {
    const a = await checkpoint();
    const b = await checkpoint({ layerParent: a.id });
    await store.delete(a.id);
    await store.delete(b.id);
    expect((await store.gc([b.id])).removed).toEqual([]);
    expect((await store.gc([])).removed.sort()).toEqual([a.id, b.id].sort());
  });

  it('gc of nothing deleted removes nothing', async () => {
    await checkpoint();
    expect(await store.gc([])).toEqual({ removed: [], freedBytes: 0 });
  });

  it('deleting an episode removes its snapshots but keeps the shared base they diff against', async () => {
    const base = await checkpoint({ episode: null, vm: null, kind: 'base', baseKey: 'k' });
    const a = await checkpoint({ parent: base.id, layerParent: base.id });
    const other = await checkpoint({ episode: EP_B, parent: base.id, layerParent: base.id });
    await store.deleteEpisode(EP_A, []);
    expect(store.list(EP_A)).toEqual([]);
    expect(existsSync(store.dirFor(a.id))).toBe(false);
    expect(store.get(base.id)?.deleted).toBe(false);
    expect(store.list(EP_B)).toEqual([other]);
    expect(store.episodeDiskBytes(EP_A)).toBe(0);
  });
});

describe('disk usage', () => {
  it('counts allocated blocks, so the holes of a sparse memory layer cost nothing', async () => {
    const id = store.newSnapshotId();
    vmmWrites(store.dirFor(id), (file) => {
      const fd = openSync(file, 'w');
      ftruncateSync(fd, 64 << 20);
      writeSync(fd, Buffer.alloc(4096, 1), 0, 4096, 32 << 20);
      closeSync(fd);
    });
    await store.publish({
      id,
      episode: EP_A,
      parent: null,
      vm: VM,
      kind: 'manual',
      layerParentDir: null,
      memoryBytes: 64 << 20,
      cpus: 1,
    });
    expect(store.diskBytes(id)).toBeGreaterThanOrEqual(4096);
    expect(store.diskBytes(id)).toBeLessThan(1 << 20);
    const other = await checkpoint();
    expect(store.episodeDiskBytes(EP_A)).toBe(store.diskBytes(id) + other.diskBytes);
    await reopen();
    expect(store.get(id)?.diskBytes).toBe(store.diskBytes(id));
  });
});

describe('recovery at start-up', () => {
  it('a checkpoint interrupted inside the VMM leaves no trace after a restart', async () => {
    const partial = `${store.dirFor(store.newSnapshotId())}.partial-4242`;
    mkdirSync(partial);
    writeFileSync(path.join(partial, 'state'), 'half');
    await reopen();
    expect(existsSync(partial)).toBe(false);
    expect(logged.join('\n')).toMatch(/removed sn-\w+\.partial-4242 : /);
  });

  it('a snapshot the engine died before publishing (no manifest) is removed and logged', async () => {
    const kept = await checkpoint();
    const id = store.newSnapshotId();
    vmmWrites(store.dirFor(id));
    await reopen();
    expect(existsSync(store.dirFor(id))).toBe(false);
    expect(logged).toContain(`store: removed ${id} : no manifest (half-written snapshot)`);
    expect(store.list()).toEqual([kept]);
  });

  it('a snapshot whose memory file is missing is moved aside, not offered', async () => {
    const a = await checkpoint();
    unlinkSync(path.join(store.dirFor(a.id), 'memory'));
    await reopen();
    expect(store.get(a.id)).toBeUndefined();
    expect(existsSync(`${store.dirFor(a.id)}.corrupt`)).toBe(true);
    expect(logged.join('\n')).toContain(`moved ${a.id} aside to ${a.id}.corrupt : its memory file is missing`);
  });

  it.each([
    ['not JSON', '{"format": 1,', /not JSON/],
    ['a field of the wrong type', (m: object) => ({ ...m, cpus: 'two' }), /cpus/],
    ['a newer format', (m: object) => ({ ...m, format: 2 }), /format 2, newer than this Smol reads/],
    ['another id', (m: object) => ({ ...m, id: 'sn-zzzzzzzzzz' }), /describes sn-zzzzzzzzzz/],
  ])('a manifest with %s is moved aside with the reason, and the rest of the store opens', async (_, damage, why) => {
    const good = await checkpoint();
    const bad = await checkpoint();
    const file = path.join(store.dirFor(bad.id), 'manifest.json');
    const text = typeof damage === 'string' ? damage : JSON.stringify(damage(JSON.parse(readFileSync(file, 'utf8'))));
    writeFileSync(file, text);
    await reopen();
    expect(store.list()).toEqual([good]);
    expect(existsSync(`${store.dirFor(bad.id)}.corrupt`)).toBe(true);
    const line = logged.find((l) => l.includes(`moved ${bad.id} aside`));
    expect(line).toMatch(why);
  });

  it('a second corrupt copy of the same snapshot is moved aside without replacing the first', async () => {
    const a = await checkpoint();
    mkdirSync(`${store.dirFor(a.id)}.corrupt`);
    writeFileSync(path.join(store.dirFor(a.id), 'manifest.json'), 'garbage');
    await reopen();
    expect(existsSync(`${store.dirFor(a.id)}.corrupt-2`)).toBe(true);
  });

  it('temporary files of an interrupted manifest write are removed and the old manifest kept', async () => {
    const a = await checkpoint({ name: 'kept' });
    const tmp = path.join(store.dirFor(a.id), 'manifest.json.tmp-4242-0badf00d');
    writeFileSync(tmp, '{"half":');
    const stray = path.join(home, 'snapshots', 'x.tmp-4242-0badf00d');
    writeFileSync(stray, '');
    await reopen();
    expect(existsSync(tmp)).toBe(false);
    expect(existsSync(stray)).toBe(false);
    expect(store.get(a.id)?.name).toBe('kept');
  });

  it('a snapshot whose layer parent is gone is kept, and the problem logged', async () => {
    const a = await checkpoint();
    const b = await checkpoint({ layerParent: a.id });
    rmSync(store.dirFor(a.id), { recursive: true, force: true });
    await reopen();
    expect(store.get(b.id)?.layerParent).toBe(a.id);
    expect(logged.join('\n')).toContain(`${b.id} : its layer parent ${a.id} is missing`);
  });
});
