// A real registry on loopback for the OCI tests and `smol bench image`: Debian's docker-registry (the CNCF
// distribution registry) with a temporary storage directory, and skopeo to push images into it. And a small
// front for it that asks for docker's token authentication (a Bearer challenge, a token service with a login), or
// corrupts blobs, as Docker Hub's front and a bad proxy would; the registry behind it is the real one.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import net from 'node:net';
import path from 'node:path';

export const REGISTRY_BINARY = '/usr/bin/docker-registry';
export const SKOPEO = '/usr/bin/skopeo';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

export interface Registry {
  /** `127.0.0.1:PORT` */
  host: string;
  stop(): Promise<void>;
}

/** Starts docker-registry on a free loopback port with its storage under `dir`; resolves once it answers /v2/. */
export async function startRegistry(dir: string): Promise<Registry> {
  const port = await freePort();
  mkdirSync(path.join(dir, 'storage'), { recursive: true });
  const config = path.join(dir, 'config.yml');
  writeFileSync(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: error',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${path.join(dir, 'storage')}`,
      'http:',
      `  addr: 127.0.0.1:${port}`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(REGISTRY_BINARY, ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const host = `127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited with ${child.exitCode}: ${stderr}`);
    const ok = await fetch(`http://${host}/v2/`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`docker-registry did not answer on ${host} in 20 s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    host,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** `skopeo copy [--all] oci:LAYOUT:TAG docker://HOST/REPO` (plain http: --dest-tls-verify=false). */
export function push(source: string, host: string, repository: string, all = false): void {
  const args = [
    'copy',
    '-q',
    '--dest-tls-verify=false',
    ...(all ? ['--all'] : []),
    source,
    `docker://${host}/${repository}`,
  ];
  const result = spawnSync(SKOPEO, args, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`skopeo ${args.join(' ')}: ${result.stderr || result.error?.message}`);
}

export interface Front {
  host: string;
  /** Flip a byte in every blob it passes on. */
  corrupt: boolean;
  stop(): Promise<void>;
}

/**
 * A front for `registry` that answers docker's token authentication: a request without the token gets a 401 with
 * `WWW-Authenticate: Bearer realm="http://HOST/token",service="smol-test",scope=...`; /token hands out the token for
 * Basic `user:password`, and 401 otherwise. With a token, requests go on to the registry.
 */
export async function startTokenFront(registry: string, login: { user: string; password: string }): Promise<Front> {
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const token = 'smol-test-token';
  const basic = `Basic ${Buffer.from(`${login.user}:${login.password}`).toString('base64')}`;
  const front: Front = { host, corrupt: false, stop: async () => {} };
  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', `http://${host}`);
      if (url.pathname === '/token') {
        if (req.headers.authorization !== basic) {
          res.writeHead(401, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ details: 'incorrect username or password' }));
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ token, expires_in: 300 }));
        return;
      }
      if (req.headers.authorization !== `Bearer ${token}`) {
        const repo = /^\/v2\/(.+)\/(manifests|blobs)\//.exec(url.pathname)?.[1] ?? '';
        res.writeHead(401, {
          'content-type': 'application/json',
          'www-authenticate': `Bearer realm="http://${host}/token",service="smol-test",scope="repository:${repo}:pull"`,
        });
        res.end(JSON.stringify({ errors: [{ code: 'UNAUTHORIZED', message: 'authentication required' }] }));
        return;
      }
      const upstream = await fetch(`http://${registry}${url.pathname}${url.search}`, {
        headers: req.headers.accept ? { accept: req.headers.accept } : {},
      });
      const body = Buffer.from(await upstream.arrayBuffer());
      if (front.corrupt && url.pathname.includes('/blobs/') && body.length > 0) body[body.length >> 1]! ^= 0xff;
      const headers: Record<string, string> = {};
      upstream.headers.forEach((value, key) => {
        if (key !== 'content-length' && key !== 'content-encoding' && key !== 'transfer-encoding') headers[key] = value;
      });
      res.writeHead(upstream.status, headers);
      res.end(body);
    })().catch((err: Error) => {
      res.writeHead(502);
      res.end(err.message);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  front.stop = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return front;
}
