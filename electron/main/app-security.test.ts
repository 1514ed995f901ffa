import { describe, expect, it } from 'vitest';
import {
  APP_CONTENT_SECURITY_POLICY,
  appWebPreferences,
  appWindowOptions,
  externalUrl,
  isAppNavigation,
} from './app-security.js';

describe('the app window', () => {
  it('is isolated and sandboxed, without Node', () => {
    const prefs = appWindowOptions({ width: 800, height: 600 }, '/p/preload.cjs').webPreferences!;
    expect(prefs).toMatchObject({
      preload: '/p/preload.cjs',
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
    });
    expect(appWebPreferences('x')).toEqual(prefs === undefined ? null : { ...prefs, preload: 'x' });
  });

  it('has a CSP that allows no inline script, no remote origin and no connection', () => {
    const directives = new Map(
      APP_CONTENT_SECURITY_POLICY.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1)] as const),
    );
    expect(directives.get('default-src')).toEqual(["'none'"]);
    expect(directives.get('script-src')).toEqual(["'self'"]);
    expect(directives.get('connect-src')).toEqual(["'none'"]);
    expect(directives.get('object-src')).toEqual(["'none'"]);
    expect(APP_CONTENT_SECURITY_POLICY).not.toMatch(/unsafe-eval|https?:|\*/);
  });

  it('opens only plain http(s) links outside the app', () => {
    expect(externalUrl('https://example.com/a?b=c')).toBe('https://example.com/a?b=c');
    expect(externalUrl('http://127.0.0.1:8080/')).toBe('http://127.0.0.1:8080/');
    for (const url of [
      'file:///etc/passwd',
      'javascript:alert(1)',
      'smb://host/share',
      'https://bank.example@evil.example/',
      'https://user:pw@example.com/',
      'not a url',
      'data:text/html,<script>x</script>',
    ]) {
      expect(externalUrl(url), url).toBeNull();
    }
  });

  it('stays on its own page', () => {
    expect(isAppNavigation('smol-app://app/index.html#x')).toBe(true);
    expect(isAppNavigation('https://example.com/')).toBe(false);
    expect(isAppNavigation('smol-app://evil/index.html')).toBe(false);
    expect(isAppNavigation('file:///index.html')).toBe(false);
  });
});
