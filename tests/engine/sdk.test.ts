// Tier 2, end to end: what an agent harness does through the SDK (sdk/typescript/smol.ts), with the echo guest in
// real VMs: consoles, forks that diverge, restore, reset, events seen by a second client, and the API's answers to
// bad requests, all against a real engine.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient, ApiClientError } from '../../src/api/api-client.js';
import type { EngineEvent } from '../../src/api/schema.js';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome, eventually } from './engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 120_000);

describe('the SDK drives episodes of the echo guest', () => {
  let smol: Smol;
  let other: Smol;
  const seen: EngineEvent[] = [];
  let episodeId: string;
  let vmId: string;

  beforeAll(async () => {
    smol = await home.client();
    other = await home.client();
    other.events((event) => seen.push(event));
    const smolfile = home.smolfile('echo', `kernel = "@guests@/echo.elf"\nmemory = 16\n`);
    const { episode, vm } = await smol.up(smolfile, { name: 'echoes' });
    episodeId = episode.id;
    vmId = vm.id;
  });

  it('a second client sees the episode the first one made, and its events', async () => {
    const episodes = await other.episodes();
    expect(episodes.map((ep) => ep.id)).toContain(episodeId);
    await eventually('the episode.created event', async () =>
      seen.some((e) => e.type === 'episode.created' && e.episode.id === episodeId) ? true : undefined,
    );
    expect(seen.some((e) => e.type === 'vm.updated' && e.vm.id === vmId && e.vm.state === 'running')).toBe(true);
  });

  it('what is written to the console comes back, and a console attached later shows the screen', async () => {
    const echoed = smol.waitForOutput(vmId, /hello-sdk/);
    await smol.write(vmId, 'hello-sdk');
    await echoed;
    const screen = await eventually('the screen to show the echo', async () => {
      const s = await other.screen(vmId);
      return s.text.includes('hello-sdk') ? s : undefined;
    });
    expect(screen.serialized).toContain('hello-sdk');
    const logs = await smol.logs(vmId);
    expect(logs.text).toContain('hello-sdk');
  });

  it('two forks fed different input diverge, and the parent sees neither', async () => {
    const { children, snapshot } = await smol.fork(vmId, 2);
    expect(children).toHaveLength(2);
    expect(snapshot?.kind).toBe('fork');
    const [a, b] = children as [(typeof children)[0], (typeof children)[0]];
    await Promise.all([smol.write(a.id, 'only-in-a'), smol.write(b.id, 'only-in-b')]);
    await smol.waitForOutput(a.id, /only-in-a/);
    await smol.waitForOutput(b.id, /only-in-b/);
    const [logA, logB, logParent] = await Promise.all([smol.logs(a.id), smol.logs(b.id), smol.logs(vmId)]);
    expect(logA.text).not.toContain('only-in-b');
    expect(logB.text).not.toContain('only-in-a');
    expect(logParent.text).not.toMatch(/only-in-/);
    // A fork's console starts with the parent's screen at the fork.
    expect(logA.text).toContain('hello-sdk');
    const tree = await smol.snapshots(episodeId);
    expect(children.every((child) => child.snapshot === snapshot?.id)).toBe(true);
    expect(tree.map((s) => s.id)).toContain(snapshot?.id);
  });

  it('restore puts a VM back at a checkpoint and keeps where it was as a snapshot', async () => {
    const mark = await smol.checkpoint(vmId, { name: 'marked', note: 'before typing' });
    await smol.write(vmId, 'after-mark');
    await smol.waitForOutput(vmId, /after-mark/);
    const { vm, savedAs } = await smol.restore(vmId, 'marked');
    expect(vm.snapshot).toBe(mark.id);
    expect(savedAs?.parent).toBe(mark.id);
    const names = (await smol.snapshots(episodeId)).map((s) => s.name);
    expect(names).toEqual(expect.arrayContaining(['marked', savedAs!.name]));
    await smol.write(vmId, 'after-restore');
    await smol.waitForOutput(vmId, /after-restore/);
  });

  it('renames and annotates a snapshot, deletes one, and counts the disk each uses', async () => {
    const snap = await smol.checkpoint(vmId, { name: 'to-rename' });
    expect(snap.diskBytes).toBeGreaterThan(0);
    const renamed = await smol.updateSnapshot(snap.id, { name: 'renamed', note: 'a note' });
    expect([renamed.name, renamed.note]).toEqual(['renamed', 'a note']);
    expect((await smol.snapshot('renamed')).id).toBe(snap.id);
    const episode = await smol.episode(episodeId);
    const all = await smol.snapshots(episodeId);
    expect(episode.diskBytes).toBe(all.reduce((sum, s) => sum + s.diskBytes, 0));
    // The VM stands on it: its memory layer stays, the snapshot itself goes from the tree.
    await smol.deleteSnapshot(snap.id);
    expect((await smol.snapshots(episodeId)).map((s) => s.id)).not.toContain(snap.id);
    await smol.write(vmId, 'after-delete');
    await smol.waitForOutput(vmId, /after-delete/);
  });

  it('memory statistics of a fork show what it shares with its parent', async () => {
    const [child] = (await smol.fork(vmId, 1)).children;
    const stats = await smol.memory(child!.id);
    expect(stats.guestBytes).toBe(16 * 2 ** 20);
    expect(stats.privateBytes).toBeLessThan(stats.guestBytes);
  });

  it('metrics show a busy guest using CPU and an idle one not, with their memory, as history and as events', async () => {
    // A guest that counts flat out next to the echo guest, which sits in HLT between keystrokes.
    const busyFile = home.smolfile('busy', `kernel = "@guests@/count.elf"\ncmdline = "every=1000000"\nmemory = 16\n`);
    const busy = await smol.up(busyFile, { name: 'busy' });
    const samples = await eventually(
      'three samples of each',
      async () => {
        const [b, idle] = await Promise.all([smol.metrics(busy.vm.id), smol.metrics(vmId)]);
        return b.samples.length >= 3 && idle.samples.length >= 3 ? { b, idle } : undefined;
      },
      60_000,
    );
    const mean = (xs: Array<{ cpuPercent: number }>) => xs.reduce((sum, x) => sum + x.cpuPercent, 0) / xs.length;
    const busyCpu = mean(samples.b.samples.slice(-3));
    expect(busyCpu, 'the busy guest').toBeGreaterThan(20);
    expect(mean(samples.idle.samples.slice(-3)), 'the idle guest').toBeLessThan(busyCpu / 2);
    expect(samples.b.intervalMs).toBeGreaterThan(0);
    const last = samples.b.samples.at(-1)!;
    expect(last.memory.guestBytes).toBe(16 * 2 ** 20);
    expect(last.memory.residentBytes).toBeGreaterThan(0);
    expect(seen.some((e) => e.type === 'metrics' && e.vm === busy.vm.id)).toBe(true);
    await smol.destroy(busy.episode.id);
  });

  it('answers a malformed request with 400 and says which field is wrong', async () => {
    const error = await smol.api.request('POST', `/api/v1/vms/${vmId}/fork`, { count: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiClientError);
    expect((error as ApiClientError).status).toBe(400);
    expect((error as ApiClientError).message).toMatch(/count/);
    const unknown = await smol.api
      .request('POST', `/api/v1/vms/${vmId}/checkpoint`, { nmae: 'typo' })
      .catch((e: unknown) => e as ApiClientError);
    expect((unknown as ApiClientError).status).toBe(400);
    expect((unknown as ApiClientError).message).toMatch(/nmae/);
  });

  it('answers 100 concurrent calls, checkpoints among them, all correctly', async () => {
    const calls = Array.from({ length: 100 }, (_, i) =>
      i % 10 === 0
        ? smol.checkpoint(vmId, { note: `concurrent ${i}` }).then((s) => s.note === `concurrent ${i}`)
        : i % 2 === 0
          ? smol.vm(vmId).then((vm) => vm.id === vmId)
          : smol.episodes().then((eps) => eps.some((ep) => ep.id === episodeId)),
    );
    expect(await Promise.all(calls)).toEqual(Array(100).fill(true));
  });

  it('refuses requests on the TCP listener without the token, and serves them with it', async () => {
    const listener = await smol.api.call('listen', { body: {} });
    const url = new URL(listener.url);
    const token = url.searchParams.get('token')!;
    const bare = await fetch(`${url.origin}/api/v1/episodes`);
    expect(bare.status).toBe(401);
    const wrong = await fetch(`${url.origin}/api/v1/episodes`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
    const foreign = await fetch(`${url.origin}/api/v1/episodes?token=${token}`, {
      headers: { origin: 'http://evil.example' },
    });
    expect(foreign.status).toBe(403);
    const tcp = new ApiClient({ url: url.origin, token });
    const episodes = await tcp.call('listEpisodes');
    expect(episodes.episodes.map((ep) => ep.id)).toContain(episodeId);
    tcp.close();
    await smol.api.request('DELETE', `/api/v1/engine/listeners?port=${listener.port}`);
  });

  it('reset gives a clean machine, and destroy removes the episode with its snapshots', async () => {
    const vm = await smol.reset(vmId);
    expect(vm.state).toBe('running');
    await smol.write(vmId, 'after-reset');
    await smol.waitForOutput(vmId, /after-reset/);
    await smol.destroy(episodeId);
    expect((await smol.episodes()).map((ep) => ep.id)).not.toContain(episodeId);
    await eventually('the episode.deleted event', async () =>
      seen.some((e) => e.type === 'episode.deleted' && e.id === episodeId) ? true : undefined,
    );
  });
});
