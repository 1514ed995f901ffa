// Tier 2: where `packMachine` may write (docs/smolmachine.md, "Where a file goes"). SMOL_HOME/exports/, the UI's
// default folder, is made when missing; any other missing folder, a file in the folder's place or a folder at the
// file's path is refused with the path named, before a running VM is checkpointed for it.
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome } from './engine-home.js';

const home = new EngineHome();
const scratch = mkdtempSync(path.join(tmpdir(), 'smol-pack-dest-'));
let smol: Smol;

beforeAll(async () => {
  const smolfile = home.smolfile('count', `kernel = "@guests@/count.elf"\ncmdline = "hz=20"\nmemory = 16\n`);
  await home.json(['up', '-f', smolfile, '--name', 'counter']);
  smol = await home.client();
}, 120_000);
afterAll(async () => {
  await home.destroy();
  rmSync(scratch, { recursive: true, force: true });
}, 120_000);

const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('the pack was not refused');
    },
    (error: Error & { status?: number }) => ({ status: error.status, message: error.message }),
  );

describe('where a .smolmachine may be written', { timeout: 120_000 }, () => {
  it('makes SMOL_HOME/exports when it is missing', async () => {
    const exports = path.join(home.dir, 'exports');
    expect(existsSync(exports)).toBe(false);
    const file = path.join(exports, 'counter-counter.smolmachine');
    const packed = await smol.pack('counter', file);
    expect(packed.path).toBe(file);
    expect(statSync(file).size).toBe(packed.bytes);
  });

  it('refuses another missing folder, naming it, without checkpointing the VM', async () => {
    const before = (await smol.snapshots('counter')).length;
    const folder = path.join(scratch, 'no-such-folder');
    const file = path.join(folder, 'x.smolmachine');
    const refused = await refusal(smol.pack('counter', file));
    expect(refused.status).toBe(400);
    expect(refused.message).toContain(`cannot write ${file}: the folder ${folder} does not exist`);
    expect(existsSync(folder)).toBe(false);
    expect((await smol.snapshots('counter')).length).toBe(before);
  });

  it('refuses a file where the folder should be, and a folder at the file’s path', async () => {
    const notFolder = path.join(scratch, 'plain-file');
    writeFileSync(notFolder, 'x');
    const under = path.join(notFolder, 'x.smolmachine');
    const refused = await refusal(smol.pack('counter', under));
    expect(refused.status).toBe(400);
    expect(refused.message).toContain(`cannot write ${under}: ${notFolder} is not a folder`);
    const folder = path.join(scratch, 'a-folder.smolmachine');
    mkdirSync(folder);
    const atFolder = await refusal(smol.pack('counter', folder));
    expect(atFolder.status).toBe(400);
    expect(atFolder.message).toContain(`cannot write ${folder}: it is a folder`);
  });
});
