// The engine, run by the app as an Electron utilityProcess when no engine serves the data dir yet (docs/electron.md,
// "Processes"): the same runEngine as `smol engine`, with vmhosts launched through the main process.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runEngine } from '../../src/engine/engine-process.js';
import { packageRoot } from '../../src/package-root.js';
import { utilityVmHostLauncher, type EngineParentPort } from './utility-vmhost.js';

const parentPort = (process as { parentPort?: EngineParentPort }).parentPort;
const home = process.env.SMOL_HOME;
if (!parentPort || !home) {
  process.stderr.write('engine-utility: run by the Smol Studio app only (no parentPort or SMOL_HOME)\n');
  process.exit(2);
}
const { version } = JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string };
runEngine({ home, version, launchVmHost: utilityVmHostLauncher(parentPort) }).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`engine-utility: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
