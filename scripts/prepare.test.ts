// `npx --no-install smol` in the checkout runs the checkout's CLI and never rebuilds it, even with an empty npm cache
// (the KVM lab's): npx installs the checkout into its cache, which runs `prepare`, and that once rebuilt the native
// module (and, stopped halfway, left the checkout without it).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
let cache: string;
afterEach(() => rmSync(cache, { recursive: true, force: true }));

it('npx --no-install smol runs the checkout’s CLI without building it, from an empty npm cache', () => {
  cache = mkdtempSync(path.join(tmpdir(), 'smol-npx-cache-'));
  const env = { ...process.env, npm_config_cache: cache };
  delete env.npm_command; // as a person types it, not from inside an npm script
  const result = spawnSync('npx', ['--no-install', 'smol', '--help'], { cwd: root, env, encoding: 'utf8' });
  expect(result.status, result.stderr).toBe(0);
  expect(result.stdout).toMatch(/^Usage: smol <command>/);
  const logs = path.join(cache, '_logs');
  const logged = readdirSync(logs)
    .map((name) => readFileSync(path.join(logs, name), 'utf8'))
    .join('\n');
  expect(logged).not.toMatch(/argv "run" "build/);
}, 60_000);
