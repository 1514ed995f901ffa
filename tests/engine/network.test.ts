// Tier 2, end to end: an episode whose Smolfile says `net = true` gets its network from the engine (docs/network.md):
// the `net` guest (native/guests/net.c, a bare kernel with its own virtio-net driver) reaches host.smol.internal on
// the port `[network] allow_hosts` names and not on another, and its `ports` forward listens on 127.0.0.1. Every
// packet stays on 127.0.0.1.
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { EngineHome, eventually } from './engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 120_000);

async function countingServer(): Promise<{ port: number; accepted: () => number; close: () => Promise<unknown> }> {
  let accepted = 0;
  const server = net.createServer((socket) => (accepted++, socket.destroy()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return { port, accepted: () => accepted, close: () => new Promise((resolve) => server.close(resolve)) };
}

async function freePort(): Promise<number> {
  const server = await countingServer();
  await server.close();
  return server.port;
}

function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

describe('an episode with net = true', { timeout: 300_000 }, () => {
  it('reaches host.smol.internal where allow_hosts says, and serves its ports forward', async () => {
    const allowed = await countingServer();
    const other = await countingServer();
    const forward = await freePort();
    const smolfile = home.smolfile(
      'net',
      [
        'kernel = "@guests@/net.elf"',
        'memory = 16',
        `cmdline = "ports=${allowed.port},${other.port}"`,
        'net = true',
        `ports = ["${forward}:80"]`,
        '[network]',
        `allow_hosts = ["host.smol.internal:${allowed.port}"]`,
        '',
      ].join('\n'),
    );
    try {
      const up = await home.json<{ vm: { id: string } }>(['up', '-f', smolfile, '--name', 'netted']);
      const smol = await home.client();
      await eventually('the guest to reach the allowed port', async () =>
        (await smol.logs(up.vm.id)).text.includes(`net: synack ${allowed.port}`) ? true : undefined,
      );
      expect(allowed.accepted()).toBe(1);
      expect(await connects(forward)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 2000));
      expect(other.accepted()).toBe(0);
      expect((await smol.logs(up.vm.id)).text).not.toMatch(new RegExp(`net: (synack|rst) ${other.port}`));

      // A restore gets a stack of its own from its own resource, and the pinned forward listens again.
      const snap = await home.json<{ id: string }>(['checkpoint', up.vm.id, '-m', 'netted']);
      const restored = await home.json<{ vm: { id: string } }>(['restore', up.vm.id, snap.id]);
      await eventually('the restored VM to listen on its forward', async () =>
        (await connects(forward)) ? true : undefined,
      );
      expect(restored.vm.id).toBe(up.vm.id);
    } finally {
      await Promise.all([allowed.close(), other.close()]);
    }
  });
});
