// The smol-app:// protocol: the built renderer (dist/renderer) served like https, with the app's CSP. The path
// checks are web mode's (resolveStatic: no `..`, backslash or NUL, no symbolic link out of the root); this adds
// the scheme, host and method checks. Pure apart from reading the file system, so it is tested without Electron.
import { resolveStatic, StaticFailure } from '../../src/engine/static-files.js';
import { APP_CONTENT_SECURITY_POLICY, APP_HOST, APP_SCHEME } from './app-security.js';

export type AppResponse =
  { ok: true; file: string; headers: Record<string, string> } | { ok: false; status: number; message: string };

export function resolveAppRequest(root: string, method: string, rawUrl: string): AppResponse {
  if (method !== 'GET' && method !== 'HEAD') return { ok: false, status: 405, message: `method ${method}` };
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    return { ok: false, status: 400, message: `malformed URL ${rawUrl}` };
  }
  if (url.protocol !== `${APP_SCHEME}:` || url.host !== APP_HOST)
    return { ok: false, status: 404, message: `not the app: ${rawUrl}` };
  try {
    // The raw path: URL parsing already folded `/a/../b`, but a `%2e%2e` or `%2f` survives to be refused here.
    const found = resolveStatic(root, url.pathname);
    return {
      ok: true,
      file: found.file,
      headers: {
        'content-type': found.type,
        'content-security-policy': APP_CONTENT_SECURITY_POLICY,
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
        'cache-control': 'no-cache',
      },
    };
  } catch (error) {
    if (error instanceof StaticFailure) return { ok: false, status: error.status, message: error.message };
    throw error;
  }
}
