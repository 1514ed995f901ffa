// The app window's security decisions as plain data (docs/electron.md, "Security"): where its content comes from,
// its Content Security Policy, its webPreferences, and which URLs may leave the app for the system browser.
// main.ts applies them; the unit tests check them without Electron.
import type { BrowserWindowConstructorOptions, WebPreferences } from 'electron';
import type { WindowBounds } from './window-state.js';

/** The app's pages come from this scheme, never file:// (a standard, secure scheme behaves like https). */
export const APP_SCHEME = 'smol-app';
export const APP_HOST = 'app';
export const APP_ORIGIN = `${APP_SCHEME}://${APP_HOST}`;
export const APP_ENTRY = `${APP_ORIGIN}/index.html`;

/**
 * Stricter than web mode's (src/engine/static-files.ts): the page talks to the engine only through the
 * preload bridge, so it may connect nowhere at all. Scripts only from the app, nothing inline; inline styles are
 * allowed because xterm.js and React Flow set them at run time; no frames, forms, plugins or base URL.
 */
export const APP_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-src 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
  "worker-src 'none'",
].join('; ');

export function appWebPreferences(preload: string): WebPreferences {
  return {
    preload,
    contextIsolation: true,
    sandbox: true,
    nodeIntegration: false,
    nodeIntegrationInWorker: false,
    nodeIntegrationInSubFrames: false,
    webSecurity: true,
    allowRunningInsecureContent: false,
    experimentalFeatures: false,
    webviewTag: false,
    navigateOnDragDrop: false,
    spellcheck: false,
    devTools: true,
  };
}

export function appWindowOptions(bounds: WindowBounds, preload: string): BrowserWindowConstructorOptions {
  return {
    ...bounds,
    minWidth: 720,
    minHeight: 480,
    title: 'Smol Studio',
    backgroundColor: '#0f1115',
    show: false, // shown on ready-to-show: no white flash
    webPreferences: appWebPreferences(preload),
  };
}

/**
 * A URL the app may hand to the system browser: http or https with a host and no user name or password (a link
 * such as `https://bank.example@evil.example` reads as one host and goes to another). Everything else (file:,
 * javascript:, smb:, custom schemes an installed program registered) returns null. Links come from guest
 * output through xterm's web-links addon, so they are attacker-controlled.
 */
export function externalUrl(raw: string): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (!url.hostname || url.username || url.password) return null;
  return url.href;
}

/** Whether a navigation stays on the app's own page (a reload, or a same-document hash change). */
export function isAppNavigation(raw: string): boolean {
  try {
    const url = new URL(raw);
    return `${url.protocol}//${url.host}` === APP_ORIGIN;
  } catch {
    return false;
  }
}
