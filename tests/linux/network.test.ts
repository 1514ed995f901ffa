// Real Linux guests on a network (docs/network.md): virtio-net on the VM's libslirp stack, eth0 configured by the
// kernel's ip= at boot, the policy in front. Every packet stays on this machine's loopback: the host's servers
// listen on 127.0.0.1, the names the guest must not resolve are answered by the policy itself, and no test sends a
// packet to any other address, not even to see it refused.
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GUEST_CMDLINE, GUEST_IP_CMDLINE } from '../../src/guest-build/guest-assets.js';
import { Vm } from '../../src/vmm/vm.js';
import { attachLinux, bootLinux, linuxWorkspace, type LinuxGuest } from './linux-guest.js';

const { work, vms } = linuxWorkspace('smol-linux-net-');

let files = 0;

function netConfig(...lines: string[]): { 'virtio-net': { path: string } } {
  const file = path.join(work, `net-${++files}.conf`);
  writeFileSync(file, lines.map((l) => `${l}\n`).join(''));
  return { 'virtio-net': { path: file } };
}

/** An HTTP server on 127.0.0.1 answering `body`, counting the connections it accepts. */
async function server(body: string): Promise<{ port: number; connections: () => number; close: () => void }> {
  let connections = 0;
  const s = http.createServer((_, res) => res.end(body));
  s.on('connection', () => connections++);
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return { port: (s.address() as net.AddressInfo).port, connections: () => connections, close: () => s.close() };
}

/** GET http://127.0.0.1:port/ from the host. */
function fetchLocal(port: number): Promise<string> {
  return fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(20_000) }).then((r) => r.text());
}

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

async function bootNet(resources?: { 'virtio-net': { path: string } }): Promise<LinuxGuest> {
  // As the engine is to boot it: ip= only with a network (without eth0 the kernel would wait for one).
  const guest = await bootLinux(resources ? { cmdline: `${GUEST_CMDLINE} ${GUEST_IP_CMDLINE}`, resources } : {});
  vms.push(guest.vm);
  return guest;
}

/** Serves `text` with busybox httpd on the guest's port 80. */
async function serveInGuest(guest: LinuxGuest, text: string): Promise<void> {
  await guest.run(
    `mkdir -p /www && echo ${text} > /www/index.html && (httpd -p 80 -h /www || busybox httpd -p 80 -h /www)`,
  );
}

describe('a Linux guest on a network', () => {
  it('has eth0 up with its address and reaches host.smol.internal only where allow_hosts says', async () => {
    const allowed = await server('hello from the host');
    const other = await server('must not be reached');
    const guest = await bootNet(netConfig(`allow_host host.smol.internal:${allowed.port}`));
    try {
      expect(await guest.run('ip addr show eth0 | grep -o "inet [0-9./]*"')).toBe('inet 10.0.2.15/24\n');
      await guest.run('echo nameserver 10.0.2.3 > /etc/resolv.conf');
      // busybox's nslookup asks the stack's DNS itself (the static busybox's wget may not resolve names).
      const resolve = `nslookup host.smol.internal 2>/dev/null | awk '/^Address: /{print $2}' | tail -1`;
      expect(await guest.run(resolve)).toBe('10.0.2.2\n');
      expect(await guest.run(`wget -q -O - http://$(${resolve}):${allowed.port}/`)).toBe('hello from the host');
      expect(await guest.run(`timeout 5 wget -q -O - http://10.0.2.2:${other.port}/ || echo refused`)).toMatch(
        /refused\n$/,
      );
      expect(other.connections()).toBe(0);
      // A name the lists do not allow does not resolve: the policy answers NXDOMAIN, nothing leaves.
      expect(await guest.run('nslookup pkgs.example.org >/dev/null 2>&1 || echo unresolved')).toBe('unresolved\n');
      const events = guest.vm.network()?.events ?? [];
      expect(events).toContainEqual(expect.objectContaining({ rule: 'host', port: other.port }));
      expect(events).toContainEqual(expect.objectContaining({ rule: 'dns-name', name: 'pkgs.example.org' }));
    } finally {
      allowed.close();
      other.close();
    }
  });

  it('without allow_hosts naming it, host.smol.internal does not resolve and the host sees nothing', async () => {
    const host = await server('must not be reached');
    const guest = await bootNet(netConfig());
    try {
      await guest.run('echo nameserver 10.0.2.3 > /etc/resolv.conf');
      expect(await guest.run('nslookup host.smol.internal >/dev/null 2>&1 || echo unresolved')).toBe('unresolved\n');
      expect(await guest.run(`timeout 5 wget -q -O - http://10.0.2.2:${host.port}/ || echo refused`)).toMatch(
        /refused\n$/,
      );
      expect(host.connections()).toBe(0);
    } finally {
      host.close();
    }
  });

  it('net off means no eth0: the guest sees only lo', async () => {
    const guest = await bootNet();
    expect(await guest.run('ls /sys/class/net')).toBe('lo\n');
  });

  it("ports reach busybox httpd in the guest, and again after a restore, on the restore's own port", async () => {
    const port = await freePort();
    const guest = await bootNet(netConfig(`forward ${port} 80`));
    await serveInGuest(guest, 'served-by-the-guest');
    expect(await fetchLocal(port)).toBe('served-by-the-guest\n');

    const snap = await guest.vm.checkpoint(path.join(work, 'snap-ports'));
    await guest.vm.kill();
    const again = await freePort();
    const restored = await Vm.restore(snap.dir, { resources: netConfig(`forward ${again} 80`) });
    vms.push(restored);
    attachLinux(restored);
    restored.start();
    expect(await fetchLocal(again)).toBe('served-by-the-guest\n');
  });

  it('after a fork, two children serve different content on their own host ports', async () => {
    const guest = await bootNet(netConfig(`forward ${await freePort()} 80`));
    await serveInGuest(guest, 'parent');
    const ports = [await freePort(), await freePort()];
    const children = await guest.vm.fork(2, { children: ports.map((p) => netConfig(`forward ${p} 80`)) });
    vms.push(...children);
    const linux = children.map((child) => attachLinux(child));
    await linux[0]!.run('echo child-one > /www/index.html');
    await linux[1]!.run('echo child-two > /www/index.html');
    expect(await fetchLocal(ports[0]!)).toBe('child-one\n');
    expect(await fetchLocal(ports[1]!)).toBe('child-two\n');
  });
});
