// Tier 2: the episode list the engine keeps serialized (docs/engine.md, "Listing episodes") is never stale: every
// change it shows (a VM's state, labels, a checkpoint's count and bytes, a deleted snapshot, a new or deleted episode)
// is in the very next list, a conditional GET (If-None-Match) answers 304 only while nothing changed, and another
// engine on the same data dir never answers 304 to the last one's ETag. Real engine, echo guests in real VMs.
import http from 'node:http';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Episode } from '../../src/api/schema.js';
import { EngineHome } from './engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 120_000);

const LIST = '/api/v1/episodes';

/** One raw GET of the list on the data dir's socket: status, ETag and the parsed body (none for a 304). */
function rawList(ifNoneMatch?: string): Promise<{ status: number; etag: string | undefined; body: unknown }> {
  return new Promise((resolve, reject) => {
    const headers = ifNoneMatch === undefined ? {} : { 'if-none-match': ifNoneMatch };
    const req = http.request({ socketPath: path.join(home.dir, 'engine.sock'), path: LIST, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, etag: res.headers.etag, body: text ? JSON.parse(text) : undefined });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the episode list', () => {
  it('shows every change in the very next list, and a conditional GET is 304 only while nothing changed', async () => {
    const smol = await home.client();
    const smolfile = home.smolfile('echo', 'kernel = "@guests@/echo.elf"\nmemory = 16\n');
    const { vm, episode } = await smol.up(smolfile, { name: 'listed' });
    let etag: string | null = null;
    /** The next list through the SDK's conditional GET: it must have changed, and `check` holds for it. */
    const changed = async (what: string, check: (listed: Episode) => void) => {
      const answer = await smol.api.getIfChanged<{ episodes: Episode[] }>(LIST, etag);
      expect(answer.changed, `the list changed after ${what}`).toBe(true);
      if (!answer.changed) return;
      expect(answer.etag).not.toBe(etag);
      etag = answer.etag;
      const listed = answer.value.episodes.find((e) => e.id === episode.id);
      expect(listed, `the episode is listed after ${what}`).toBeDefined();
      check(listed!);
      // Nothing changed since: the same ETag is a 304 with no body, twice.
      for (let i = 0; i < 2; i++) expect((await smol.api.getIfChanged(LIST, etag)).changed).toBe(false);
      // And a plain list is the same list as the one the ETag names.
      expect((await smol.episodes()).find((e) => e.id === episode.id)).toEqual(listed);
    };

    await changed('up', (listed) => expect(listed.vms[0]!.state).toBe('running'));
    await smol.pause(vm.id);
    await changed('pause', (listed) => expect(listed.state).toBe('paused'));
    await smol.resume(vm.id);
    await changed('resume', (listed) => expect(listed.vms[0]!.state).toBe('running'));
    await smol.labelVm(vm.id, { reward: 0.5 });
    await changed('a label', (listed) => expect(listed.vms[0]!.labels).toEqual({ reward: 0.5 }));
    const snapshot = await smol.checkpoint(vm.id, { name: 'one' });
    let bytes = 0;
    await changed('a checkpoint', (listed) => {
      expect(listed.snapshotCount).toBe(1);
      expect(listed.vms[0]!.snapshot).toBe(snapshot.id);
      expect(listed.diskBytes).toBeGreaterThan(0);
      bytes = listed.diskBytes;
    });
    await smol.checkpoint(vm.id, { name: 'two' });
    await changed('a second checkpoint', (listed) => {
      expect(listed.snapshotCount).toBe(2);
      expect(listed.diskBytes).toBeGreaterThan(bytes);
    });
    await smol.deleteSnapshot('two');
    await changed('deleting a snapshot', (listed) => expect(listed.snapshotCount).toBe(1));
    await smol.stop(vm.id);
    await changed('stop', (listed) => expect(listed.state).toBe('suspended'));

    const other = await smol.up(smolfile, { name: 'second' });
    const withBoth = await smol.api.getIfChanged<{ episodes: Episode[] }>(LIST, etag);
    expect(withBoth.changed && withBoth.value.episodes.map((e) => e.name).sort()).toEqual(['listed', 'second']);
    etag = withBoth.etag;
    await smol.destroy(other.episode.id);
    const afterDelete = await smol.api.getIfChanged<{ episodes: Episode[] }>(LIST, etag);
    expect(afterDelete.changed && afterDelete.value.episodes.map((e) => e.name)).toEqual(['listed']);
    etag = afterDelete.etag;

    // HTTP as any client speaks it: a weak form and a list of tags match too; `*` matches any list.
    const raw = await rawList();
    expect(raw.status).toBe(200);
    expect(raw.etag).toBe(etag);
    expect((await rawList(`"nope", W/${etag}`)).status).toBe(304);
    expect((await rawList('*')).status).toBe(304);
    const stale = await rawList('"nope"');
    expect(stale.status).toBe(200);
    expect((stale.body as { episodes: Episode[] }).episodes).toHaveLength(1);

    // Another engine on the same data dir counts its changes from zero again: its ETags are its own.
    expect((await home.smol(['engine', 'stop'])).status).toBe(0);
    const again = await home.client();
    const fresh = await again.api.getIfChanged<{ episodes: Episode[] }>(LIST, etag);
    expect(fresh.changed).toBe(true);
    expect(fresh.changed && fresh.value.episodes.map((e) => e.name)).toEqual(['listed']);
  }, 180_000);
});
