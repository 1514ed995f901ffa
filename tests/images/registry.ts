// A front for the loopback registry (src/bench/loopback-registry.ts) that asks for docker's token authentication (a
// Bearer challenge, a token service with a login), or corrupts blobs, as Docker Hub's front and a bad proxy would;
// the registry behind it is the real one.
import { createServer, type Server } from 'node:http';
import { freePort } from '../../src/bench/loopback-registry.js';

export { push, REGISTRY_BINARY, SKOPEO, startRegistry, type Registry } from '../../src/bench/loopback-registry.js';

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
