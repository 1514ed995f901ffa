// `smol cp` in the KVM lab: a 50 MiB tree (random files, nested directories, modes, an owner, a symbolic and a hard
// link) into a VM of the builtin image and back out through the agent, byte-identical, with its attributes.
import { createHash, randomBytes } from 'node:crypto';
import {
  chownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineHome } from '../engine/engine-home.js';

const home = new EngineHome();
let scratch: string;
let vm: string;

/** Every entry under `dir`: type, mode, owner, size and content hash or link target, by relative path. */
function describeTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    const file = path.join(dir, rel);
    const st = lstatSync(file);
    const common = `${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid}`;
    if (st.isDirectory()) {
      out[rel || '.'] = `dir ${common}`;
      for (const child of readdirSync(file).sort()) walk(rel ? `${rel}/${child}` : child);
    } else if (st.isSymbolicLink()) out[rel] = `link -> ${readlinkSync(file)}`;
    else
      out[rel] =
        `file ${common} ${st.size} ${createHash('sha256').update(readFileSync(file)).digest('hex')} nlink ${st.nlink}`;
  };
  walk('');
  return out;
}

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'smol-cp-lab-'));
  const tree = path.join(scratch, 'tree');
  for (let d = 0; d < 5; d++) {
    mkdirSync(path.join(tree, `dir${d}`, 'nested'), { recursive: true });
    for (let f = 0; f < 10; f++)
      writeFileSync(path.join(tree, `dir${d}`, 'nested', `blob${f}.bin`), randomBytes(1 << 20));
    writeFileSync(path.join(tree, `dir${d}`, 'small.txt'), `small ${d}\n`);
  }
  writeFileSync(path.join(tree, 'run.sh'), '#!/bin/sh\necho hi\n', { mode: 0o750 });
  chownSync(path.join(tree, 'run.sh'), 1234, 5678);
  linkSync(path.join(tree, 'run.sh'), path.join(tree, 'run-again.sh'));
  symlinkSync('dir0/small.txt', path.join(tree, 'link'));
  const up = await home.smol(['up', '--image', 'builtin', '--json'], { timeoutMs: 600_000 });
  expect(up.status, `${up.stderr}\n${home.logTail()}`).toBe(0);
  vm = (JSON.parse(up.stdout) as { vm: { id: string } }).vm.id;
}, 600_000);
afterAll(async () => {
  await home.destroy();
  rmSync(scratch, { recursive: true, force: true });
}, 180_000);

describe('smol cp', () => {
  it('copies a 50 MiB tree in and out, byte-identical, with modes, owners and links', async () => {
    const tree = path.join(scratch, 'tree');
    const copyIn = await home.smol(['cp', tree, `${vm}:/tmp/in`], { timeoutMs: 600_000 });
    expect(copyIn.status, copyIn.stderr).toBe(0);
    expect(copyIn.stdout).toMatch(/^\d+ entries, 50\.0 MiB\n$/);
    const inGuest = await home.smol([
      'exec',
      vm,
      '--',
      'sh',
      '-c',
      'stat -c "%a %u %g" /tmp/in/run.sh; cat /tmp/in/link',
    ]);
    expect(inGuest.stdout).toBe('750 1234 5678\nsmall 0\n');
    const out = path.join(scratch, 'out');
    const copyOut = await home.smol(['cp', `${vm}:/tmp/in`, out], { timeoutMs: 600_000 });
    expect(copyOut.status, copyOut.stderr).toBe(0);
    expect(describeTree(out)).toEqual(describeTree(tree));
  }, 900_000);

  it('names a guest path that is not there', async () => {
    const result = await home.smol(['cp', `${vm}:/no/such/thing`, path.join(scratch, 'none')]);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/smol: cp: copying .*:\/no\/such\/thing to .*none: .*(No such file|can't)/);
  }, 120_000);
});
