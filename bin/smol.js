#!/usr/bin/env node
// The `smol` command: a shim over the compiled CLI in dist/ (npm run build). SMOL_DIST names another build of the
// sources (`npx tsc -p tsconfig.json --outDir DIR`), so a change can be tried without rebuilding dist/ under others
// (TESTING notes in the README); engines the CLI starts inherit it. Vmhosts always come from dist/.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const dist = process.env.SMOL_DIST
  ? pathToFileURL(`${path.resolve(process.env.SMOL_DIST)}/`)
  : new URL('../dist/', import.meta.url);
const entry = new URL('src/cli/main.js', dist);
if (!existsSync(entry)) {
  process.stderr.write(`smol: not built yet (no ${entry.pathname}); run npm run build\n`);
  process.exit(1);
}
const { run } = await import(entry.href);
await run(process.argv.slice(2));
