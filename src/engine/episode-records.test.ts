import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileAtomic } from './atomic-file.js';
import { SnapshotStore } from './snapshot-store.js';

const EP_A = 'ep-aaaaaaaaaa';
const EP_B = 'ep-bbbbbbbbbb';

let home: string;
let logged: string[];
let store: SnapshotStore;

beforeEach(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'smol-episodes-'));
  logged = [];
  store = await SnapshotStore.open(home, (line) => logged.push(line));
});

afterEach(() => {
  rmSync(home, { recursive: true, force: true });
});

const reopen = async () => (store = await SnapshotStore.open(home, (line) => logged.push(line)));
const episodesDir = () => path.join(home, 'episodes');

describe('episode records', () => {
  it('an episode saved by one engine is loaded by the next', async () => {
    await store.saveEpisodeRecord(EP_A, { id: EP_A, name: 'demo', vms: [{ id: 'vm-aaaaaaaaaa' }] });
    await store.saveEpisodeRecord(EP_B, { id: EP_B, name: 'other', vms: [] });
    await reopen();
    expect(store.loadEpisodeRecords()).toEqual([
      { id: EP_A, record: { id: EP_A, name: 'demo', vms: [{ id: 'vm-aaaaaaaaaa' }] } },
      { id: EP_B, record: { id: EP_B, name: 'other', vms: [] } },
    ]);
  });

  it('of saves of one episode made at once, the last one asked for is what stays on disk', async () => {
    const record = { id: EP_A, generation: 0 };
    const saves = [];
    for (let i = 1; i <= 20; i++) {
      record.generation = i;
      saves.push(store.saveEpisodeRecord(EP_A, record));
    }
    record.generation = 99; // changed after the last save: not written
    await Promise.all(saves);
    expect(store.loadEpisodeRecords()).toEqual([{ id: EP_A, record: { id: EP_A, generation: 20 } }]);
    expect(readdirSync(episodesDir())).toEqual([`${EP_A}.json`]);
  });

  it('a removed episode stays removed, even when a save of it was still being written', async () => {
    const save = store.saveEpisodeRecord(EP_A, { id: EP_A });
    await store.removeEpisodeRecord(EP_A);
    await save;
    expect(store.loadEpisodeRecords()).toEqual([]);
    expect(readdirSync(episodesDir())).toEqual([]);
  });

  it('an unreadable record is moved aside and logged, and the other episodes still load', async () => {
    await store.saveEpisodeRecord(EP_B, { id: EP_B });
    writeFileSync(path.join(episodesDir(), `${EP_A}.json`), '{"id": "ep-');
    expect(store.loadEpisodeRecords()).toEqual([{ id: EP_B, record: { id: EP_B } }]);
    expect(existsSync(path.join(episodesDir(), `${EP_A}.json.corrupt`))).toBe(true);
    expect(logged.join('\n')).toContain(`moved episode ${EP_A} aside to ${EP_A}.json.corrupt`);
    expect(store.loadEpisodeRecords()).toEqual([{ id: EP_B, record: { id: EP_B } }]);
  });

  it('a record write a crash interrupted is cleaned up at start-up and the previous record kept', async () => {
    await store.saveEpisodeRecord(EP_A, { id: EP_A, name: 'before' });
    const tmp = path.join(episodesDir(), `${EP_A}.json.tmp-4242-0badf00d`);
    writeFileSync(tmp, '{"id": "ep-aaaaaaaaaa", "na');
    await reopen();
    expect(existsSync(tmp)).toBe(false);
    expect(store.loadEpisodeRecords()).toEqual([{ id: EP_A, record: { id: EP_A, name: 'before' } }]);
  });

  it('an id that is not an episode id is refused rather than written outside the directory', async () => {
    await expect(store.saveEpisodeRecord('../engine', {})).rejects.toThrow(/not an episode id/);
    expect(existsSync(path.join(home, 'engine.json'))).toBe(false);
  });
});

describe('atomic writes', () => {
  it('a rewritten file holds the new contents and no temporary file is left beside it', async () => {
    const file = path.join(home, 'engine.json');
    await writeFileAtomic(file, 'old');
    await writeFileAtomic(file, Buffer.from('new'));
    expect(readFileSync(file, 'utf8')).toBe('new');
    expect(readdirSync(home).filter((name) => name.startsWith('engine.json'))).toEqual(['engine.json']);
  });

  it('a write into a missing directory fails and leaves nothing behind', async () => {
    await expect(writeFileAtomic(path.join(home, 'missing', 'x.json'), 'x')).rejects.toThrow(/ENOENT/);
    expect(existsSync(path.join(home, 'missing'))).toBe(false);
  });
});
