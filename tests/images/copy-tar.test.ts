// The host's halves of `smol cp` (sdk/typescript/copy.ts): a tree packed as copyIn sends it, then written as copyOut
// writes what a guest sends, comes back the same: data, modes, owners (as root), symbolic and hard links, a name
// starting with .wh. (a plain file here, not a whiteout). The guest's busybox tar is tested in the KVM lab.
import { randomBytes } from 'node:crypto';
import {
  chownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { packTree } from '../../sdk/typescript/copy.js';
import { LayerTree } from '../../src/guest-build/oci-layers.js';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'smol-copy-tar-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

it('a tree packed for copyIn and written by copyOut comes back the same, under the new name', async () => {
  const src = path.join(scratch, 'src');
  mkdirSync(path.join(src, 'sub/deeper'), { recursive: true });
  writeFileSync(path.join(src, 'sub/deeper/data.bin'), randomBytes(300_000));
  writeFileSync(path.join(src, '.wh.not-a-whiteout'), 'plain\n');
  writeFileSync(path.join(src, 'script.sh'), '#!/bin/sh\n', { mode: 0o750 });
  linkSync(path.join(src, 'script.sh'), path.join(src, 'hardlink.sh'));
  symlinkSync('sub/deeper/data.bin', path.join(src, 'link'));
  if (process.getuid?.() === 0) chownSync(path.join(src, 'script.sh'), 1234, 5678);
  const counts = { entries: 0, bytes: 0 };
  const out = path.join(scratch, 'out');
  mkdirSync(out);
  const tree = new LayerTree(out, { whiteouts: false });
  await tree.apply(packTree(src, 'copied', counts), 'test', (parts) => parts);
  const copy = path.join(out, 'copied');
  expect(readFileSync(path.join(copy, 'sub/deeper/data.bin'))).toEqual(
    readFileSync(path.join(src, 'sub/deeper/data.bin')),
  );
  expect(readFileSync(path.join(copy, '.wh.not-a-whiteout'), 'utf8')).toBe('plain\n');
  expect(readlinkSync(path.join(copy, 'link'))).toBe('sub/deeper/data.bin');
  const script = lstatSync(path.join(copy, 'script.sh'));
  expect(script.mode & 0o7777).toBe(0o750);
  expect(lstatSync(path.join(copy, 'hardlink.sh')).ino).toBe(script.ino);
  if (process.getuid?.() === 0) expect([script.uid, script.gid]).toEqual([1234, 5678]);
  expect(counts).toEqual({ entries: 8, bytes: 300_000 + 6 + 10 });
}, 60_000);
