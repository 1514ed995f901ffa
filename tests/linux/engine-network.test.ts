// Tier 3: an episode with `net = true` on the builtin image, through the engine as `smol up` runs it
// (docs/network.md): eth0 from ip= and /etc/resolv.conf from the base's bake, host.smol.internal only on the port
// allow_hosts names, a forward to busybox httpd that works again after a restore, and fork children that serve
// their own content on their own host ports. Every packet stays on this machine's loopback.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome } from '../engine/engine-home.js';

const home = new EngineHome();
const work = mkdtempSync(path.join(os.tmpdir(), 'smol-engine-net-'));
const servers: http.Server[] = [];
afterAll(async () => {
  for (const s of servers) s.close();
  await home.destroy();
  rmSync(work, { recursive: true, force: true });
}, 180_000);

async function listen(body: string): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const s = http.createServer((_, res) => res.end(body));
  s.on('connection', () => connections++);
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  servers.push(s);
  return { port: (s.address() as net.AddressInfo).port, connections: () => connections };
}

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

const fetchLocal = (port: number) =>
  fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(20_000) }).then((r) => r.text());

describe('an episode with net = true on the builtin image', () => {
  let smol: Smol;
  let vm: string;
  let pinned: number;
  let allowed: { port: number; connections: () => number };
  let other: { port: number; connections: () => number };
  const sh = async (ref: string, script: string) => {
    const result = await smol.exec(ref, ['sh', '-c', script]);
    return { code: result.exitCode, out: result.stdout.toString() };
  };

  beforeAll(async () => {
    allowed = await listen('hello from the host');
    other = await listen('must not be reached');
    pinned = await freePort();
    const smolfile = path.join(work, 'net.smolfile');
    writeFileSync(
      smolfile,
      [
        'net = true',
        `ports = ["${pinned}:80"]`,
        'init = ["mkdir -p /www", "echo base > /www/index.html"]',
        '[network]',
        `allow_hosts = ["host.smol.internal:${allowed.port}"]`,
        '',
      ].join('\n'),
    );
    smol = await home.client();
    vm = (await smol.up(smolfile, { name: 'net' })).vm.id;
  }, 600_000);

  it('has eth0 at 10.0.2.15 and the stack as its resolver', async () => {
    expect((await sh(vm, 'ip -4 addr show eth0 | grep -o "inet [0-9./]*"')).out).toBe('inet 10.0.2.15/24\n');
    expect((await sh(vm, 'cat /etc/resolv.conf')).out).toBe('nameserver 10.0.2.3\n');
  });

  it('reaches host.smol.internal on the allowed port only; other names do not resolve', async () => {
    expect((await sh(vm, `wget -q -O - http://host.smol.internal:${allowed.port}/`)).out).toBe('hello from the host');
    const refused = await sh(vm, `timeout 5 wget -q -O - http://host.smol.internal:${other.port}/`);
    expect(refused.code).not.toBe(0);
    expect(other.connections()).toBe(0);
    expect((await sh(vm, 'nslookup pkgs.example.org >/dev/null 2>&1 || echo unresolved')).out).toBe('unresolved\n');
  });

  it('forwards the pinned port to httpd, and again after a restore', async () => {
    expect((await sh(vm, 'httpd -p 80 -h /www')).code).toBe(0);
    expect(await fetchLocal(pinned)).toBe('base\n');
    const snapshot = await smol.checkpoint(vm, { name: 'serving' });
    await sh(vm, 'echo changed > /www/index.html');
    expect(await fetchLocal(pinned)).toBe('changed\n');
    await smol.restore(vm, snapshot.id);
    expect(await fetchLocal(pinned)).toBe('base\n');
  });

  it('fork children serve their own content on their own host ports', async () => {
    const { children } = await smol.fork(vm, 2);
    const ports: number[] = [];
    for (const [i, child] of children.entries()) {
      await sh(child.id, `echo child-${i} > /www/index.html`);
      const record = await smol.vm(child.id);
      const forward = record.ports.find((p) => p.guest === 80);
      expect(forward, JSON.stringify(record.ports)).toBeDefined();
      expect(forward!.host).not.toBe(pinned);
      ports.push(forward!.host);
    }
    expect(new Set(ports).size).toBe(2);
    expect(await fetchLocal(ports[0]!)).toBe('child-0\n');
    expect(await fetchLocal(ports[1]!)).toBe('child-1\n');
    expect(await fetchLocal(pinned)).toBe('base\n');
  });
});
