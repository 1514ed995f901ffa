// Tier 2: two engines, each in a network namespace this test makes (a veth pair to 10.200.N.2, inside this machine
// only), each serving HTTPS with its own self-signed certificate; the TypeScript SDK and the Python SDK reach both
// at once over TLS, pinning both certificates on first use (docs/remote.md). Needs root (ip netns); skipped else.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ClientConfig } from '../../src/api/client-config.js';
import type { EngineEvent, Vm } from '../../src/api/schema.js';
import { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome, eventually, root } from './engine-home.js';

const hasIp = spawnSync('ip', ['-V']).status === 0;
const asRoot = process.getuid?.() === 0 && hasIp;
const why = asRoot ? '' : ' (skipped: needs root and ip(8) to make network namespaces)';

interface Node {
  name: string;
  ns: string;
  hostIf: string;
  address: string;
  home: EngineHome;
  serve?: ChildProcess;
  url?: URL;
  fingerprint?: string;
}

// A subnet per run, so two runs at once on this machine do not meet.
const subnet = 100 + (process.pid % 60) * 2;
const nodes: Node[] = [1, 2].map((i) => ({
  name: `node-${i}`,
  ns: `smolt-${process.pid}-${i}`,
  hostIf: `smv${process.pid % 100000}${i}`,
  address: `10.200.${subnet + i - 1}.2`,
  home: new EngineHome(),
}));
const scratch = mkdtempSync(path.join(tmpdir(), 'smol-netns-'));
const enginesFile = path.join(scratch, 'engines.json');

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });

function makeNamespace(node: Node): void {
  const peer = `${node.hostIf}p`;
  const hostAddress = node.address.replace(/\.2$/, '.1');
  ip('netns', 'add', node.ns);
  ip('link', 'add', node.hostIf, 'type', 'veth', 'peer', 'name', peer);
  ip('link', 'set', peer, 'netns', node.ns);
  ip('addr', 'add', `${hostAddress}/24`, 'dev', node.hostIf);
  ip('link', 'set', node.hostIf, 'up');
  ip('-n', node.ns, 'addr', 'add', `${node.address}/24`, 'dev', peer);
  ip('-n', node.ns, 'link', 'set', peer, 'up');
  ip('-n', node.ns, 'link', 'set', 'lo', 'up');
}

/** `smol serve --tls` inside the node's namespace: its engine starts there too, so it listens only there. */
function serveIn(node: Node): Promise<void> {
  const child = spawn(
    'ip',
    [
      'netns',
      'exec',
      node.ns,
      process.execPath,
      path.join(root, 'bin', 'smol.js'),
      'serve',
      '--tls',
      '--listen',
      `${node.address}:7443`,
    ],
    { env: { ...process.env, SMOL_HOME: node.home.dir } },
  );
  node.serve = child;
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  return eventually(
    `${node.name} serving`,
    async () => {
      if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}:\n${output}`);
      const url = /(https:\/\/\S+\/\?token=[\w-]+)\n/.exec(output)?.[1];
      const fingerprint = /certificate SHA-256 fingerprint ([0-9A-F:]{95})/.exec(output)?.[1];
      if (!url || !fingerprint) return undefined;
      node.url = new URL(url);
      node.fingerprint = fingerprint;
      return true;
    },
    90_000,
  ).then(() => undefined);
}

afterAll(async () => {
  for (const node of nodes) {
    node.serve?.kill('SIGINT');
    await node.home.destroy();
    if (asRoot) {
      spawnSync('ip', ['netns', 'del', node.ns]); // takes the veth pair with it
      spawnSync('ip', ['link', 'del', node.hostIf]);
    }
  }
  rmSync(scratch, { recursive: true, force: true });
}, 120_000);

describe.skipIf(!asRoot)(`two engines in two network namespaces${why}`, () => {
  it('are reached at once over TLS from the TypeScript SDK and the Python SDK, each certificate pinned', async () => {
    for (const node of nodes) makeNamespace(node);
    await Promise.all(nodes.map(serveIn));
    // One VM in each engine, made through its own data dir's socket.
    const smolfile = nodes[0]!.home.smolfile('echo', 'kernel = "@guests@/echo.elf"\nmemory = 16\n');
    for (const node of nodes) {
      const up = await node.home.json<{ vm: Vm }>(['up', '-f', smolfile, '--name', `on-${node.name}`]);
      expect(up.vm.state).toBe('running');
    }

    // TypeScript: both at once, over TLS from this (the host's) namespace; calls and the event stream.
    const pins = ClientConfig.load(enginesFile);
    const clients = await Promise.all(
      nodes.map((node) =>
        Smol.connect({ url: `https://${node.address}:7443`, token: node.url!.searchParams.get('token')!, pins }),
      ),
    );
    const names = await Promise.all(clients.map(async (smol) => (await smol.vms()).map((vm) => vm.name)));
    expect(names).toEqual([['on-node-1'], ['on-node-2']]);
    for (const [i, node] of nodes.entries()) {
      expect(ClientConfig.load(enginesFile).get(`${node.address}:7443`)?.fingerprint).toBe(node.fingerprint);
      const smol = clients[i]!;
      let checkpoint: Promise<unknown> | null = null;
      const seen = new Promise<EngineEvent>((resolve) => {
        const stream = smol.api.events(
          (event) => event.type === 'snapshot.created' && (stream.close(), resolve(event)),
          {
            onOpen: () =>
              (checkpoint = smol.api.call('checkpoint', {
                params: { vm: `on-${node.name}` },
                body: { name: 'remote' },
              })),
          },
        );
      });
      expect((await seen).type).toBe('snapshot.created');
      await checkpoint;
      smol.api.close();
    }
    expect(nodes[0]!.fingerprint).not.toBe(nodes[1]!.fingerprint);

    // Python (stdlib + the SDK's own h11/wsproto): both engines, the same pins file (TOFU already done above).
    const script = `
import asyncio, json, sys, smol_studio
out = []
for url, fp in zip(sys.argv[1::2], sys.argv[2::2]):
    smol = smol_studio.connect(url=url, fingerprint=fp)
    pinned = smol_studio.connect(url=url)
    out.append({"vms": [vm.name for vm in smol.vms()], "snapshots": len(pinned.snapshots(smol.vms()[0].episode))})
try:
    smol_studio.connect(url=sys.argv[1], fingerprint=sys.argv[4])
except smol_studio.CertificateChanged as error:
    out.append(str(error))
async def asynchronous():
    async with smol_studio.connect_async(url=sys.argv[3]) as smol:
        names = [vm.name for vm in await smol.vms()]
    try:
        await smol_studio.connect_async(url=sys.argv[3], fingerprint=sys.argv[2])
    except smol_studio.CertificateChanged:
        names.append("refused")
    return names
out.append(asyncio.run(asynchronous()))
print(json.dumps(out))
`;
    const args = nodes.flatMap((node) => [node.url!.toString(), node.fingerprint!]);
    const python = spawnSync('/usr/bin/python3', ['-c', script, ...args], {
      cwd: path.join(root, 'sdk', 'python'),
      env: { ...process.env, SMOL_CLIENT_CONFIG: enginesFile },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(python.stderr).toBe('');
    const [first, second, refused, asynchronous] = JSON.parse(python.stdout) as [
      { vms: string[]; snapshots: number },
      { vms: string[]; snapshots: number },
      string,
      string[],
    ];
    expect(asynchronous).toEqual(['on-node-2', 'refused']); // connect_async: pinned, then a wrong fingerprint
    expect(first.vms).toEqual(['on-node-1']);
    expect(second.vms).toEqual(['on-node-2']);
    expect(first.snapshots).toBeGreaterThanOrEqual(1);
    expect(refused).toContain(`presented a certificate with SHA-256 fingerprint ${nodes[0]!.fingerprint}`);
    expect(refused).toContain(`the fingerprint given is ${nodes[1]!.fingerprint}`);
  }, 300_000);
});
