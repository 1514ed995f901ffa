#!/usr/bin/env node
// What a poller of the episode list costs (docs/survival.md, "A poller's bytes and the engine's CPU"): a real engine
// on a throwaway data dir seeded with --episodes episodes (ui-seed.ts, as `smol bench clients` seeds it), a TCP
// listener, and a proxy in front of it that counts the bytes each way. One client lists --lists times plainly (every
// list a whole body), then --lists times through the SDK's episodes() (If-None-Match with the kept ETag); the same
// with the Python SDK when /usr/bin/python3 has it. Per list: bytes on the wire, the engine's CPU (/proc/PID/stat,
// user + system, over the phase) and the client's. Run after `npx tsc -p tsconfig.json` and `npm run build:native`.
//   node scripts/poll-episodes.mjs [--episodes 1000] [--lists 300]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { episodes: { type: 'string' }, lists: { type: 'string' } } });
const episodes = Number(values.episodes ?? 1000);
const lists = Number(values.lists ?? 300);
const { Smol } = await import(path.join(root, 'dist/sdk/typescript/smol.js'));
const { ApiClient } = await import(path.join(root, 'dist/src/api/api-client.js'));
const { seedUiHome } = await import(path.join(root, 'dist/src/bench/ui-seed.js'));

const cpuOf = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
};
const home = mkdtempSync(path.join(os.tmpdir(), 'smol-poll-'));
const echo = path.join(root, 'native', 'out', 'guests', 'echo.elf');
const smolfile = path.join(home, 'echo.smolfile');
writeFileSync(smolfile, `kernel = "${echo}"\nmemory = 16\n`);
await seedUiHome({ home, episodes, snapshots: 10, echoGuest: echo, smolfile, progress: () => undefined });
const smol = await Smol.connect({ home });
const { pid } = await smol.api.call('health');
const listener = await smol.api.call('listen', { body: { host: '127.0.0.1', port: 0 } });
const token = new URL(listener.url).searchParams.get('token');
const wire = { toClient: 0, toEngine: 0 };
const proxy = net.createServer((client) => {
  const engine = net.connect(listener.port, '127.0.0.1');
  client.on('data', (d) => (wire.toEngine += d.length));
  engine.on('data', (d) => (wire.toClient += d.length));
  client.pipe(engine).pipe(client);
  const end = () => (client.destroy(), engine.destroy());
  client.on('error', end).on('close', end);
  engine.on('error', end).on('close', end);
});
await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${proxy.address().port}`;

const rows = [];
async function phase(name, run) {
  const before = { ...wire, engine: cpuOf(pid) };
  const ownBefore = process.cpuUsage();
  const child = await run();
  const used = process.cpuUsage(ownBefore);
  const own = child?.seconds ?? (used.user + used.system) / 1e6;
  const bytes = (wire.toClient - before.toClient + wire.toEngine - before.toEngine) / lists;
  const engineMs = ((cpuOf(pid) - before.engine - (child?.engine ?? 0)) * 1000) / lists;
  rows.push({
    name,
    bytes: Math.round(bytes),
    engineMs: engineMs.toFixed(2),
    clientMs: ((own * 1000) / lists).toFixed(2),
  });
}
const plain = new ApiClient({ url, token });
await phase('TypeScript, plain GET', async () => {
  for (let i = 0; i < lists; i++) await plain.call('listEpisodes');
});
const poller = await Smol.connect({ url, token });
await poller.episodes(); // the first list is whole: the ETag to ask with
await phase('TypeScript SDK episodes(), conditional', async () => {
  for (let i = 0; i < lists; i++) await poller.episodes();
});
const python = `
import sys, time, resource
sys.path.insert(0, ${JSON.stringify(path.join(root, 'sdk', 'python'))})
import smol_studio
from smol_studio import Episode
from smol_studio._protocol import HttpRequest
s = smol_studio.connect(url=${JSON.stringify(url)}, token=${JSON.stringify(token)})
mode, n = sys.argv[1], int(sys.argv[2])
s.episodes()
r0 = resource.getrusage(resource.RUSAGE_SELF)
for _ in range(n):
    if mode == "plain":
        [Episode.from_json(e) for e in s.transport.request(HttpRequest("GET", "/api/v1/episodes")).json()["episodes"]]
    else:
        s.episodes()
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
`;
/** The Python poller's `n` lists in a child (not spawnSync: the proxy runs on this thread); its CPU seconds in them. */
const pythonLists = (mode, n) =>
  new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', ['-c', python, mode, String(n)]);
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (status) => (status === 0 ? resolve(Number(out.trim())) : reject(new Error(err))));
  });
for (const mode of ['plain', 'conditional']) {
  // The child's connect and first list (its ETag) are not lists of the phase: a child that lists none is taken out.
  const setup = { ...wire, engine: cpuOf(pid) };
  await pythonLists(mode, 0);
  const cost = {
    bytes: wire.toClient - setup.toClient + wire.toEngine - setup.toEngine,
    engine: cpuOf(pid) - setup.engine,
  };
  await phase(`Python SDK, ${mode === 'plain' ? 'plain GET' : 'episodes(), conditional'}`, async () => {
    const seconds = await pythonLists(mode, lists);
    wire.toClient -= cost.bytes;
    return { seconds, engine: cost.engine };
  });
}
console.log(`${episodes} episodes, ${lists} lists each (the list unchanged meanwhile); per list:`);
console.log('| poller | bytes on the wire | engine CPU | client CPU |\n| --- | --- | --- | --- |');
for (const r of rows) console.log(`| ${r.name} | ${r.bytes} | ${r.engineMs} ms | ${r.clientMs} ms |`);
plain.close();
poller.api.close();
proxy.close();
await smol.api.call('shutdown').catch(() => undefined);
smol.api.close();
await new Promise((resolve) => setTimeout(resolve, 1500));
rmSync(home, { recursive: true, force: true });
