// The UI's files (the built renderer in dist/renderer) at / of the API server, for web mode (`smol serve`): only
// regular files under the root, never a path that climbs out of it, each with its content type, a strict Content
// Security Policy, and no sniffing. The API stays under /api/v1; the server checks the token before it gets here.
import { createReadStream, realpathSync, statSync } from 'node:fs';
import type http from 'node:http';
import path from 'node:path';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * Scripts only from this origin, nothing inline; styles from this origin plus inline ones (xterm.js's DOM renderer
 * writes its colours into a <style> element, React Flow positions nodes with style attributes); connections only to
 * this origin (its WebSockets included); no frames, forms, plugins or base URL.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

export class StaticFailure extends Error {
  constructor(
    readonly status: 400 | 404 | 405,
    message: string,
  ) {
    super(message);
  }
}

export interface StaticFile {
  file: string;
  size: number;
  type: string;
  /** Built files with a content hash in their name never change. */
  immutable: boolean;
}

/** The file `pathname` names under `root`, or a StaticFailure saying why not. */
export function resolveStatic(root: string, pathname: string): StaticFile {
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    throw new StaticFailure(400, `path: malformed percent-encoding in ${pathname}`);
  }
  if (decoded.includes('\0') || decoded.includes('\\')) throw new StaticFailure(400, `path: not allowed: ${pathname}`);
  const segments = decoded.split('/').filter((segment) => segment !== '');
  if (segments.some((segment) => segment === '..' || segment === '.')) {
    throw new StaticFailure(400, `path: ${pathname} climbs out of the UI's directory`);
  }
  let realRoot: string;
  try {
    realRoot = realpathSync(root);
  } catch {
    throw new StaticFailure(404, `the UI is not built (no ${root}): run npm run build:renderer`);
  }
  const wanted = segments.length === 0 ? ['index.html'] : segments;
  const notFound = new StaticFailure(404, `no such file: ${pathname}`);
  let file: string;
  try {
    file = realpathSync(path.join(realRoot, ...wanted));
  } catch {
    throw notFound;
  }
  // A symbolic link that leads out of the root counts as missing.
  if (!file.startsWith(realRoot + path.sep)) throw notFound;
  const stat = statSync(file, { throwIfNoEntry: false });
  if (!stat?.isFile()) throw notFound;
  const type = TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
  return { file, size: stat.size, type, immutable: /-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$/.test(path.basename(file)) };
}

/** Sends the file (GET) or only its headers (HEAD), with `headers` added (a Set-Cookie, say). */
export function sendStatic(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  found: StaticFile,
  headers: Record<string, string> = {},
): void {
  res.writeHead(200, {
    'content-type': found.type,
    'content-length': found.size,
    'content-security-policy': CONTENT_SECURITY_POLICY,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cross-origin-opener-policy': 'same-origin',
    'cache-control': found.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
    ...headers,
  });
  if (req.method === 'HEAD') return void res.end();
  const stream = createReadStream(found.file);
  stream.on('error', () => res.destroy());
  stream.pipe(res);
}
