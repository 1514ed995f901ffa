// Tier 2: the TypeScript SDK's episode list as a poller asks for it (docs/engine.md, "Listing episodes"): the client
// keeps the last list and its ETag, so a second episodes() with nothing changed is a 304 with no body, counted on
// the wire by a proxy between the SDK and a real engine's TCP listener, and equal to the first; a label, a new
// episode and a checkpoint are each in the very next list; a caller changing the list it got changes neither the
// kept list nor the next. And the API client's kept connections: a request started after this process was busy
// past the engine's keep-alive is answered, not failed on the connection the engine closed meanwhile.
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ApiClient, ApiClientError } from '../../src/api/api-client.js';
import type { Episode } from '../../src/api/schema.js';
import { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome } from './engine-home.js';

const home = new EngineHome();
const proxies: net.Server[] = [];
afterAll(async () => {
  for (const proxy of proxies) proxy.close();
  await home.destroy();
}, 120_000);

/**
 * A TCP proxy to `port` that keeps what the engine answered on each connection: the status of every answer and its
 * bytes (up to the next status line; the engine's bodies are JSON and never hold one).
 */
async function countingProxy(port: number): Promise<{ port: number; answers: () => Array<[number, number]> }> {
  const streams: Buffer[][] = [];
  const server = net.createServer((client) => {
    const engine = net.connect(port, '127.0.0.1');
    const answered: Buffer[] = [];
    streams.push(answered);
    engine.on('data', (data: Buffer) => answered.push(data));
    client.pipe(engine).pipe(client);
    const end = () => (client.destroy(), engine.destroy());
    client.on('error', end).on('close', end);
    engine.on('error', end).on('close', end);
  });
  proxies.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const answers = () =>
    streams.flatMap((chunks) => {
      const text = Buffer.concat(chunks).toString('latin1');
      const starts = [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)];
      return starts.map((m, i): [number, number] => [Number(m[1]), (starts[i + 1]?.index ?? text.length) - m.index!]);
    });
  return { port: (server.address() as net.AddressInfo).port, answers };
}

const busyFor = (ms: number) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // this process's thread held, as under 200 clients parsing lists
  }
};

describe('the SDK’s episode list', () => {
  it('is a 304 while nothing changed, every change is in the next list, and a caller cannot change the kept one', async () => {
    const smol = await home.client();
    const smolfile = home.smolfile('echo', 'kernel = "@guests@/echo.elf"\nmemory = 16\n');
    const listener = await smol.api.call('listen', { body: { host: '127.0.0.1', port: 0 } });
    const token = new URL(listener.url).searchParams.get('token')!;
    const proxy = await countingProxy(listener.port);
    const poller = await Smol.connect({ url: `http://127.0.0.1:${proxy.port}`, token });
    const { vm, episode } = await smol.up(smolfile, { name: 'polled' });
    try {
      let seen = proxy.answers().length; // the connect's health check
      /** The next list through the poller, and that the engine answered it with `status` (one answer). */
      const listed = async (status: number): Promise<Episode[]> => {
        const episodes = await poller.episodes();
        const answers = proxy.answers();
        expect(
          answers.slice(seen).map(([s]) => s),
          `the engine's answers: ${JSON.stringify(answers)}`,
        ).toEqual([status]);
        seen = answers.length;
        return episodes;
      };
      const ours = (episodes: Episode[]) => episodes.find((e) => e.id === episode.id)!;

      const first = await listed(200);
      const second = await listed(304);
      expect(second).toEqual(first);
      expect(ours(second)).toBeDefined();
      // A 304 is its head alone: no list came over the wire.
      expect(Math.max(...proxy.answers().flatMap(([s, n]) => (s === 304 ? [n] : [])))).toBeLessThan(1024);

      // The caller's own list: changing it (an episode's VM's labels, the list itself) changes nothing kept.
      ours(second).vms[0]!.labels!.tampered = 1;
      second.length = 0;
      const third = await listed(304);
      expect(third).toEqual(first);
      expect(ours(third).vms[0]!.labels).toEqual({});

      await smol.labelVm(vm.id, { reward: 0.5 });
      const afterLabel = await listed(200);
      expect(ours(afterLabel).vms[0]!.labels).toEqual({ reward: 0.5 });
      expect(await listed(304)).toEqual(afterLabel);
      const other = await smol.up(smolfile, { name: 'polled-too' });
      expect((await listed(200)).map((e) => e.id)).toContain(other.episode.id);
      await smol.checkpoint(vm.id, { name: 'polled-point' });
      const afterCheckpoint = await listed(200);
      expect(ours(afterCheckpoint).snapshotCount).toBe(1);
      expect(await listed(304)).toEqual(afterCheckpoint);
      await smol.destroy(other.episode.id);
      expect((await listed(200)).map((e) => e.id)).not.toContain(other.episode.id);
    } finally {
      poller.api.close();
      await smol.api.call('unlisten', { query: { port: listener.port } });
    }
  });
});

describe('the API client’s kept connections', () => {
  it('answer a request started after this process was busy past the engine’s keep-alive', async () => {
    await home.client();
    const client = new ApiClient({ socketPath: path.join(home.dir, 'engine.sock') });
    try {
      await client.request('GET', '/api/v1/health');
      // Busy for 7 s: the engine closes the kept connection after its keep-alive (Node's 5 s and its 1 s of margin),
      // and this process's own 4 s idle timer for it is overdue but not yet run. A timer due before that one (as the
      // bench's label every second) starts a POST, which is never asked twice, and a GET.
      const answers = await new Promise<PromiseSettledResult<unknown>[]>((resolve) => {
        setTimeout(() => {
          const post = client.request('POST', '/api/v1/vms/vm-none/checkpoint', {});
          const get = client.request('GET', '/api/v1/health');
          void Promise.allSettled([post, get]).then(resolve);
        }, 1000);
        busyFor(7000);
      });
      const [post, get] = answers as [PromiseSettledResult<unknown>, PromiseSettledResult<unknown>];
      // The POST reached the engine, which knows no such VM; the GET is the health.
      expect(post.status === 'rejected' && (post.reason as ApiClientError).status).toBe(404);
      expect(get).toMatchObject({ status: 'fulfilled', value: { pid: expect.any(Number) as number } });
    } finally {
      client.close();
    }
  }, 60_000);
});
