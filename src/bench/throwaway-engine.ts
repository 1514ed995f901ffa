// A real engine in a throwaway data dir for the engine benchmarks (reset, exec, files, console): started by connecting, shut
// down and removed afterwards, whatever happened.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pidAlive } from '../engine/engine-process.js';
import { Smol } from '../../sdk/typescript/smol.js';

export async function withThrowawayEngine<T>(name: string, work: (smol: Smol, home: string) => Promise<T>): Promise<T> {
  const home = mkdtempSync(path.join(os.tmpdir(), `smol-bench-${name}-`));
  const smol = await Smol.connect({ home });
  const { pid } = await smol.api.call('health');
  try {
    return await work(smol, home);
  } finally {
    await smol.api.call('shutdown').catch(() => undefined);
    smol.api.close();
    for (let i = 0; i < 300 && pidAlive(pid); i++) await new Promise((resolve) => setTimeout(resolve, 100));
    rmSync(home, { recursive: true, force: true });
  }
}
