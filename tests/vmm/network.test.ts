// Tier 2: virtio-net in real VMs (docs/network.md): the `virtio-net` resource gives a VM its stack and its `ports`
// forwards on 127.0.0.1; a restore or fork child gets a stack of its own from its own resource; the `net` guest
// (native/guests/net.c, a polled virtio-net driver) opens TCP connections to host.smol.internal through the policy.
// Every packet stays on 127.0.0.1.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Vm } from '../../src/vmm/vm.js';
import { startGuest } from './guests.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'smol-net-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** A network configuration file (docs/network.md, "Host resource") with these lines. */
function netConfig(...lines: string[]): { 'virtio-net': { path: string } } {
  const file = path.join(dir, `net-${++files}.conf`);
  writeFileSync(file, lines.map((l) => `${l}\n`).join(''));
  return { 'virtio-net': { path: file } };
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A TCP server on 127.0.0.1 that counts the connections it accepts. */
async function countingServer(): Promise<{ port: number; accepted: () => number; close: () => Promise<unknown> }> {
  let accepted = 0;
  const server = net.createServer((socket) => (accepted++, socket.destroy()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return { port, accepted: () => accepted, close: () => new Promise((resolve) => server.close(resolve)) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether a TCP connection to 127.0.0.1:port is accepted. */
function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

describe('virtio-net in a VM', () => {
  it('listens on a pinned ports forward while the VM runs, and not after it ends', async () => {
    const port = await freePort();
    const guest = await startGuest('count', { cmdline: 'every=100000', resources: netConfig(`forward ${port} 80`) });
    expect(await connects(port)).toBe(true);
    await guest.vm.kill();
    await guest.vm.exited;
    expect(await connects(port)).toBe(false);
  });

  it('gives a lone guest port a free host port, which the host can read, and a VM without a network has none', async () => {
    const guest = await startGuest('count', { cmdline: 'every=100000', resources: netConfig('forward 0 80') });
    const forwards = guest.vm.network()?.forwards ?? [];
    expect(forwards).toEqual([{ host: expect.any(Number), guest: 80 }]);
    expect(await connects(forwards[0]!.host)).toBe(true);
    await guest.vm.kill();
    const plain = await startGuest('count', { cmdline: 'every=100000' });
    expect(plain.vm.network()).toBeNull();
    await plain.vm.kill();
  });

  it('refuses to boot when a pinned host port is in use, naming the port and who holds it', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as net.AddressInfo;
    try {
      await expect(startGuest('count', { resources: netConfig(`forward ${port} 80`) })).rejects.toThrow(
        new RegExp(`ports: host port ${port} \\(127\\.0\\.0\\.1\\) is in use by pid ${process.pid} \\(`),
      );
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  it('names the line of a bad network configuration', async () => {
    await expect(
      startGuest('count', { resources: netConfig('allow_host ok.example', 'allow_cidr 10.0.0.1/8') }),
    ).rejects.toThrow(
      /net-\d+\.conf:2: allow_cidrs entry "10\.0\.0\.1\/8": the address has bits set past the \/8 prefix/,
    );
  });

  it('a restore needs its own resource, and its forward listens again from it', async () => {
    const first = await freePort();
    const guest = await startGuest('count', { cmdline: 'every=100000', resources: netConfig(`forward ${first} 80`) });
    const snap = await guest.vm.checkpoint(path.join(dir, 'snap-restore'));
    await guest.vm.kill();
    await guest.vm.exited;
    await expect(Vm.restore(snap.dir)).rejects.toThrow(/restoring it needs a "virtio-net" resource/);

    const second = await freePort();
    const restored = await Vm.restore(snap.dir, { resources: netConfig(`forward ${second} 80`) });
    restored.start();
    expect(await connects(second)).toBe(true);
    expect(await connects(first)).toBe(false);
    await restored.kill();
  });

  it('fork children each get their own stack and host ports', async () => {
    const parentPort = await freePort();
    const guest = await startGuest('count', {
      cmdline: 'every=100000',
      resources: netConfig(`forward ${parentPort} 80`),
    });
    const ports = [await freePort(), await freePort()];
    const children = await guest.vm.fork(2, { children: ports.map((p) => netConfig(`forward ${p} 80`)) });
    expect(await Promise.all([parentPort, ...ports].map(connects))).toEqual([true, true, true]);
    await children[0]!.kill();
    expect(await Promise.all([parentPort, ...ports].map(connects))).toEqual([true, false, true]);
    await children[1]!.kill();
    await guest.vm.kill();
  });

  it('a guest reaches host.smol.internal on an allowed port, and a port no rule allows sees no connection', async () => {
    const allowed = await countingServer();
    const other = await countingServer();
    const guest = await startGuest('net', {
      cmdline: `ports=${allowed.port},${other.port}`,
      resources: netConfig(`allow_host host.smol.internal:${allowed.port}`),
    });
    try {
      await guest.waitFor(new RegExp(`net: synack ${allowed.port}\r\n`));
      expect(allowed.accepted()).toBe(1);
      await sleep(2000); // the guest re-sends the refused SYN meanwhile
      expect(other.accepted()).toBe(0);
      expect(guest.output()).not.toMatch(new RegExp(`net: (synack|rst) ${other.port}`));
      // The refusal is an event the host reads, with its destination, protocol, port and rule.
      const network = guest.vm.network();
      expect(network?.events).toContainEqual(
        expect.objectContaining({ destination: '10.0.2.2', port: other.port, protocol: 'tcp', rule: 'host' }),
      );
      expect(network?.events.some((e) => e.port === allowed.port)).toBe(false);
      expect(network?.refused.host).toBeGreaterThanOrEqual(1);
      expect(network?.frames.sent).toBeGreaterThanOrEqual(2); // the ARP and the allowed SYN at least
      const last = network!.events.at(-1)!.seq;
      expect(guest.vm.network(last)?.events.every((e) => e.seq > last)).toBe(true);
    } finally {
      await guest.vm.kill();
      await Promise.all([allowed.close(), other.close()]);
    }
  });

  it('without host.smol.internal in allow_hosts the host is unreachable', async () => {
    const server = await countingServer();
    const guest = await startGuest('net', { cmdline: `ports=${server.port}`, resources: netConfig() });
    try {
      await guest.waitFor(/net: arp ok\r\n/);
      await sleep(2000);
      expect(server.accepted()).toBe(0);
      expect(guest.output()).not.toMatch(/net: (synack|rst)/);
    } finally {
      await guest.vm.kill();
      await server.close();
    }
  });
});
