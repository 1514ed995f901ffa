// Tier 2, end to end: a networked VM's forwards and refusals as users see them (docs/network.md, "Seen from the
// host"): in the VM's record (`ports`, `network`), GET /vms/:vm/network, `vm.network.refused` events, `smol port`,
// `smol ls` and `smol logs --network`. The `net` guest (native/guests/net.c) sends SYNs to host.smol.internal on a
// port the policy allows and on one it refuses. Every packet stays on 127.0.0.1.
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import type { EngineEvent, Vm } from '../../src/api/schema.js';
import { EngineHome, eventually } from './engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 120_000);

async function listening(): Promise<{ port: number; close: () => Promise<unknown> }> {
  const server = net.createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return { port, close: () => new Promise((resolve) => server.close(resolve)) };
}

async function freePort(): Promise<number> {
  const server = await listening();
  await server.close();
  return server.port;
}

describe('a networked VM seen from the host', { timeout: 300_000 }, () => {
  it('lists its forwards, counts and publishes its refusals, and smol port / ls / logs --network show them', async () => {
    const allowed = await listening();
    const refusedPort = await freePort(); // nothing listens there, and the policy refuses it anyway
    const pinned = await freePort();
    const smolfile = home.smolfile(
      'net',
      [
        'kernel = "@guests@/net.elf"',
        'memory = 16',
        `cmdline = "ports=${allowed.port},${refusedPort}"`,
        'net = true',
        `ports = ["${pinned}:80", "22"]`,
        '[network]',
        `allow_hosts = ["host.smol.internal:${allowed.port}"]`,
        '',
      ].join('\n'),
    );
    const plain = home.smolfile('plain', ['kernel = "@guests@/hello.elf"', 'memory = 16', ''].join('\n'));
    const smol = await home.client();
    const events: EngineEvent[] = [];
    const stream = smol.events((event) => events.push(event));
    try {
      const up = await home.json<{ vm: { id: string } }>(['up', '-f', smolfile, '--name', 'netted']);
      const id = up.vm.id;

      // The record names both forwards as soon as the VM runs: the lone guest port got a free host port.
      const vm = await smol.vm(id);
      expect(vm.network.enabled).toBe(true);
      expect(vm.ports).toHaveLength(2);
      expect(vm.ports[0]).toEqual({ host: pinned, guest: 80, url: `http://127.0.0.1:${pinned}/` });
      const ssh = vm.ports[1]!;
      expect(ssh.guest).toBe(22);
      expect(ssh.host).toBeGreaterThan(0);
      expect(ssh.url).toBeUndefined();

      // The SYN to the port no rule allows becomes an event, with its destination, port, protocol and rule.
      const refusal = await eventually('a vm.network.refused event', async () =>
        events.find((event) => event.type === 'vm.network.refused' && event.vm === id),
      );
      expect(refusal).toMatchObject({
        type: 'vm.network.refused',
        vm: id,
        refusal: { seq: 1, destination: '10.0.2.2', port: refusedPort, protocol: 'tcp', rule: 'host' },
      });
      const network = await smol.network(id);
      expect(network.enabled).toBe(true);
      expect(network.ports).toEqual(vm.ports);
      expect(network.refused).toBeGreaterThanOrEqual(1);
      expect(network.rules.host).toBe(network.refused);
      expect(network.frames!.sent).toBeGreaterThan(0);
      expect(network.events[0]).toMatchObject({ seq: 1, port: refusedPort, rule: 'host' });
      expect(network.events.every((event) => event.port !== allowed.port)).toBe(true);
      const last = network.events.at(-1)!.seq;
      expect((await smol.network(id, { after: last })).events.every((event) => event.seq > last)).toBe(true);
      // Listings carry the count (kept current by the engine's reads).
      await eventually('the listing to count the refusal', async () =>
        ((await smol.vms()).find((v) => v.id === id)?.network.refused ?? 0) >= 1 ? true : undefined,
      );

      // smol events, filtered to refusals: it ends after the one asked for.
      const watched = await home.smol(['events', '--type', 'vm.network.refused', '--vm', id, '-n', '1', '--json']);
      expect(watched.status, watched.stderr).toBe(0);
      expect(JSON.parse(watched.stdout)).toMatchObject({
        type: 'vm.network.refused',
        vm: id,
        refusal: { destination: '10.0.2.2', port: refusedPort, protocol: 'tcp', rule: 'host' },
      });

      // smol port, as docker port.
      const port = await home.smol(['port', id]);
      expect(port.status, port.stderr).toBe(0);
      expect(port.stdout).toBe(`80/tcp -> 127.0.0.1:${pinned}\n22/tcp -> 127.0.0.1:${ssh.host}\n`);
      expect((await home.smol(['port', 'netted', '80/tcp'])).stdout).toBe(`80/tcp -> 127.0.0.1:${pinned}\n`);
      const missing = await home.smol(['port', id, '81']);
      expect(missing.status).toBe(1);
      expect(missing.stderr).toMatch(/forwards no guest port 81 \(it forwards 80, 22\)/);

      // smol ls: the PORTS column.
      const ls = await home.smol(['ls']);
      expect(ls.stdout).toMatch(/PORTS/);
      expect(ls.stdout).toContain(`127.0.0.1:${pinned}->80/tcp, 127.0.0.1:${ssh.host}->22/tcp`);

      // smol logs --network: time, destination:port, protocol, rule; and as JSON.
      const logs = await home.smol(['logs', '--network', id]);
      expect(logs.status, logs.stderr).toBe(0);
      expect(logs.stdout).toMatch(new RegExp(`^TIME\\s+DESTINATION\\s+PROTOCOL\\s+RULE`));
      expect(logs.stdout).toMatch(
        new RegExp(`\\d{4}-\\d\\d-\\d\\dT\\S+\\s+10\\.0\\.2\\.2:${refusedPort}\\s+tcp\\s+host`),
      );
      const json = await home.json<{ refused: number; events: { seq: number; rule: string }[] }>([
        'logs',
        '--network',
        id,
      ]);
      expect(json.refused).toBeGreaterThanOrEqual(1);
      expect(json.events[0]).toMatchObject({ seq: 1, rule: 'host' });

      // A restore starts a fresh stack: the count and the numbering go on across it, the forwards are read anew.
      const before = (await smol.network(id)).refused;
      const snap = await home.json<{ id: string }>(['checkpoint', id]);
      await home.json(['restore', id, snap.id]);
      const restored = await smol.vm(id);
      expect(restored.ports[0]).toEqual({ host: pinned, guest: 80, url: `http://127.0.0.1:${pinned}/` });
      expect(restored.network.refused).toBeGreaterThanOrEqual(before);
      await eventually('a refusal of the restored VM', async () =>
        (await smol.network(id)).refused > before ? true : undefined,
      );
      const after = await smol.network(id);
      const seqs = after.events.map((event) => event.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
      expect(new Set(seqs).size).toBe(seqs.length);

      // A fork child has a stack and host ports of its own (fresh ones, since its parent holds the pinned one), and
      // a count of its own.
      const fork = await home.json<{ children: { id: string }[] }>(['fork', id]);
      const child = await smol.vm(fork.children[0]!.id);
      expect(child.ports.map((p) => p.guest)).toEqual([80, 22]);
      const parentPorts = (await smol.vm(id)).ports.map((p) => p.host);
      for (const p of child.ports) expect(parentPorts).not.toContain(p.host);
      expect(child.ports[0]!.url).toBe(`http://127.0.0.1:${child.ports[0]!.host}/`);
      await eventually('a refusal of the fork child', async () =>
        (await smol.network(child.id)).events[0]?.seq === 1 ? true : undefined,
      );
      await home.json(['rm', child.id, '--force']);

      // Suspended: nothing is forwarded, and smol port says why.
      await home.json(['stop', id]);
      expect((await smol.vm(id)).ports).toEqual([]);
      const stopped = await home.smol(['port', id]);
      expect(stopped.status).toBe(4);
      expect(stopped.stderr).toMatch(/is suspended: its ports are forwarded only while it runs/);

      // A VM without a network says so.
      const other = await home.json<{ vm: { id: string } }>(['up', '-f', plain, '--name', 'plain']);
      const none: Vm = await smol.vm(other.vm.id);
      expect(none.network).toEqual({ enabled: false, refused: 0 });
      expect(none.ports).toEqual([]);
      const noNet = await home.smol(['port', other.vm.id]);
      expect(noNet.status).toBe(1);
      expect(noNet.stderr).toMatch(/has no network \(its Smolfile does not say net = true\)/);
      expect((await home.smol(['logs', '--network', other.vm.id])).status).toBe(1);
    } finally {
      stream.close();
      await allowed.close();
    }
  });
});
