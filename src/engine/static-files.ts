// The UI's files (the built renderer in dist/renderer) at / of the API server, for web mode (`smol serve`): only
// regular files under the root, never a path that climbs out of it, each with its content type, a strict Content
// Security Policy, and no sniffing. The API stays under /api/v1; the server checks the token before it gets here.
// A page is never blank: when the built UI is missing, or its page or the scripts and styles it names are missing or
// empty (an interrupted build leaves files of 0 bytes), the page's address answers a page that says what is missing
// and the command that builds it.
import { createReadStream, readFileSync, realpathSync, statSync } from 'node:fs';
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

/** The command that makes dist/renderer, run in the checkout. */
export const BUILD_UI = 'npm run build:renderer';

export class StaticFailure extends Error {
  constructor(
    readonly status: 400 | 404 | 405 | 503,
    message: string,
    /** For the page's own address: an HTML page that says the same to a person. */
    readonly page: string | null = null,
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
  const isPage = segments.length === 0 || (segments.length === 1 && segments[0] === 'index.html');
  let realRoot: string;
  try {
    realRoot = realpathSync(root);
  } catch {
    throw notBuilt(isPage, root, [`${root} does not exist`]);
  }
  if (isPage) {
    const missing = uiProblems(realRoot);
    if (missing.length > 0) throw notBuilt(true, root, missing);
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
  if (stat.size === 0 && /\.(js|mjs|css|html)$/.test(file)) {
    throw notBuilt(false, root, [`${path.relative(realRoot, file)} is empty (0 bytes)`]);
  }
  const type = TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
  return { file, size: stat.size, type, immutable: /-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$/.test(path.basename(file)) };
}

/** The scripts and styles a page names by a relative or root-relative address (not `https:`, `data:`, …). */
function pageAssets(html: string): string[] {
  const assets: string[] = [];
  const tags = /<(script|link)\b[^>]*>/gi;
  for (const [tag, name] of html.matchAll(tags)) {
    if (name!.toLowerCase() === 'link' && !/\brel=["']?(stylesheet|modulepreload)\b/i.test(tag)) continue;
    const address = /\b(?:src|href)=["']?([^"'\s>]+)/i.exec(tag)?.[1];
    if (address && !/^[a-z][a-z0-9+.-]*:|^\/\//i.test(address)) assets.push(address.split(/[?#]/)[0]!);
  }
  return assets;
}

/** What is wrong with the built UI at `root` (a real path): its page, or a script or style it names, missing or empty. */
export function uiProblems(root: string): string[] {
  const sizeOf = (relative: string) => statSync(path.join(root, relative), { throwIfNoEntry: false });
  const page = sizeOf('index.html');
  if (!page?.isFile()) return [`${path.join(root, 'index.html')} does not exist`];
  if (page.size === 0) return [`${path.join(root, 'index.html')} is empty (0 bytes)`];
  const problems: string[] = [];
  for (const address of pageAssets(readFileSync(path.join(root, 'index.html'), 'utf8'))) {
    const relative = path.normalize(decodeURIComponent(address).replace(/^\/+/, ''));
    if (relative.startsWith('..')) continue;
    const asset = sizeOf(relative);
    if (!asset?.isFile()) problems.push(`${relative}, which the page loads, does not exist`);
    else if (asset.size === 0) problems.push(`${relative}, which the page loads, is empty (0 bytes)`);
  }
  return problems;
}

/** 503 with what is missing; for the page's address, also a page that says so and how to build the UI. */
function notBuilt(isPage: boolean, root: string, problems: string[]): StaticFailure {
  const message = `the UI is not built or its build is incomplete (${problems.join('; ')}): run ${BUILD_UI}`;
  return new StaticFailure(503, message, isPage ? notBuiltPage(root, problems) : null);
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function notBuiltPage(root: string, problems: string[]): string {
  const items = problems.map((problem) => `<li>${escapeHtml(problem)}</li>`).join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="color-scheme" content="dark light">
<title>Smol Studio: the UI is not built</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:46em;margin:3em auto;padding:0 1em}
code,pre{font-family:ui-monospace,monospace}pre{padding:.8em 1em;border:1px solid #8886;border-radius:6px}</style>
</head><body>
<h1>The UI is not built</h1>
<p>The engine serves the UI from <code>${escapeHtml(root)}</code>, and its build is missing or incomplete:</p>
<ul>${items}</ul>
<p>Build it in the Smol Studio checkout, then reload this page (the engine keeps running):</p>
<pre>${escapeHtml(BUILD_UI)}</pre>
<p>(<code>npm run build</code> builds everything, the UI included.)</p>
</body></html>
`;
}

const SAFETY_HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
};

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
    ...SAFETY_HEADERS,
    'cache-control': found.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
    ...headers,
  });
  if (req.method === 'HEAD') return void res.end();
  const stream = createReadStream(found.file);
  stream.on('error', () => res.destroy());
  stream.pipe(res);
}

/** Sends a failure's page (the UI not built) with its status, never cached: the next reload asks again. */
export function sendFailurePage(req: http.IncomingMessage, res: http.ServerResponse, failure: StaticFailure): void {
  const page = failure.page ?? '';
  res.writeHead(failure.status, {
    'content-type': TYPES['.html']!,
    'content-length': Buffer.byteLength(page),
    ...SAFETY_HEADERS,
    'cache-control': 'no-store',
  });
  res.end(req.method === 'HEAD' ? undefined : page);
}
