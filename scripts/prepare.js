#!/usr/bin/env node
// npm's `prepare`: `npm ci` and `npm install` build everything (npm run build). Not under `npx`: `npx smol` in the
// checkout installs the checkout itself into npx's cache, which runs `prepare` again, and a rebuild there (minutes
// under the KVM lab's TCG, and node-gyp deletes the module first) left the checkout without its native module when it
// was stopped halfway. The checkout is built by `npm ci`; `npx` only runs it.
import { spawnSync } from 'node:child_process';

if (process.env.npm_command === 'exec') process.exit(0);
const npm = process.env.npm_execpath;
const result = npm
  ? spawnSync(process.execPath, [npm, 'run', 'build'], { stdio: 'inherit' })
  : spawnSync('npm', ['run', 'build'], { stdio: 'inherit' });
process.exit(result.status ?? 1);
