#!/usr/bin/env node
// `npm start`: the desktop app when Electron's binary is installed; otherwise one line saying why not, then web
// mode (`smol serve`, which prints the URL to open). Needs `npm run build` first.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const built = path.join(root, 'dist', 'src', 'doctor', 'electron-binary.js');
if (!existsSync(built) || !existsSync(path.join(root, 'dist', 'renderer', 'index.html'))) {
  process.stderr.write('smol: the app is not built: run npm run build first\n');
  process.exit(1);
}
const { findElectronBinary } = await import(built);

function run(command, args) {
  const child = spawn(command, args, { stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}

const found = findElectronBinary(root);
if (found.binary) run(found.binary, [root, ...process.argv.slice(2)]);
else {
  process.stdout.write(`Electron is not available: ${found.why}; starting web mode instead.\n`);
  run(process.execPath, [path.join(root, 'bin', 'smol.js'), 'serve', ...process.argv.slice(2)]);
}
