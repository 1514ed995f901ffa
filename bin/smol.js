#!/usr/bin/env node
// The `smol` command: a shim over the compiled CLI in dist/ (npm run build).
import { existsSync } from 'node:fs';

const entry = new URL('../dist/src/cli/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('smol: not built yet; run npm run build\n');
  process.exit(1);
}
const { run } = await import(entry.href);
await run(process.argv.slice(2));
