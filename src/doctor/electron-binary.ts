// Where Electron's binary is, found without `require('electron')`: that call downloads the binary from GitHub on
// the spot when it is missing (electron ≥ 38 has no install script), which `npm start` and the tests must not do.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

export type ElectronBinary = { binary: string } | { why: string };

/** The binary of the electron package under `root`'s node_modules, or why there is none. */
export function findElectronBinary(root: string, env: NodeJS.ProcessEnv = process.env): ElectronBinary {
  const pkg = path.join(root, 'node_modules', 'electron');
  if (!existsSync(path.join(pkg, 'package.json'))) return { why: 'the electron package is not installed' };
  let name: string | null = null;
  try {
    name = readFileSync(path.join(pkg, 'path.txt'), 'utf8').trim() || null;
  } catch {
    // no path.txt: the binary was never downloaded
  }
  if (env.ELECTRON_OVERRIDE_DIST_PATH) {
    const binary = path.join(env.ELECTRON_OVERRIDE_DIST_PATH, name ?? 'electron');
    return existsSync(binary) ? { binary } : { why: `ELECTRON_OVERRIDE_DIST_PATH has no ${path.basename(binary)}` };
  }
  if (!name) return { why: 'its binary was never downloaded from GitHub' };
  const binary = path.join(pkg, 'dist', name);
  return existsSync(binary) ? { binary } : { why: `its binary ${binary} is missing` };
}
