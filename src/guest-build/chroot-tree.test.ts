import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mountPointsUnder, removeChrootTree } from './chroot-tree.js';

const MOUNTINFO = [
  '22 1 254:0 / / rw,relatime - ext4 /dev/vda rw',
  '90 22 0:5 / /c/build-x/tree/dev/pts rw - devpts none rw',
  '91 22 0:60 / /c/build-x/tree/proc ro - proc proc ro',
  '92 22 0:61 / /c/build-x/tree/dev/shm rw - tmpfs tmpfs rw',
  '93 22 0:62 / /c/build-x/tree/dev rw - tmpfs tmpfs rw',
  '94 22 0:63 / /c/build-x/tree2/proc rw - proc proc rw',
  '95 22 0:64 / /c/build-x/tree/with\\040space rw - tmpfs tmpfs rw',
  '',
].join('\n');

describe('mounts left in a chroot tree', () => {
  it('are found at or under the tree, deepest first, and only there', () => {
    expect(mountPointsUnder(MOUNTINFO, '/c/build-x/tree')).toEqual([
      '/c/build-x/tree/dev/shm',
      '/c/build-x/tree/dev/pts',
      '/c/build-x/tree/with space',
      '/c/build-x/tree/proc',
      '/c/build-x/tree/dev',
    ]);
    expect(mountPointsUnder(MOUNTINFO, '/c/build-x/tree/dev/pts')).toEqual(['/c/build-x/tree/dev/pts']);
    expect(mountPointsUnder(MOUNTINFO, '/elsewhere')).toEqual([]);
  });
});

const isRoot = process.getuid?.() === 0;

describe.runIf(isRoot)('removing a chroot tree (as root, with real mounts)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'smol-chroot-tree-'));
  });
  afterEach(() => {
    spawnSync('umount', ['--recursive', '--lazy', dir], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  });

  it('unmounts what is mounted in it before deleting, so nothing outside is touched', () => {
    // A directory outside the tree, bind-mounted into it the way mmdebstrap mounts the host's /dev.
    const outside = path.join(dir, 'outside');
    mkdirSync(outside);
    writeFileSync(path.join(outside, 'precious'), 'keep me');
    const tree = path.join(dir, 'build', 'tree');
    mkdirSync(path.join(tree, 'dev'), { recursive: true });
    mkdirSync(path.join(tree, 'tmp'));
    const bind = spawnSync('mount', ['--bind', outside, path.join(tree, 'dev')], { encoding: 'utf8' });
    expect(bind.status, bind.stderr).toBe(0);
    const tmpfs = spawnSync('mount', ['-t', 'tmpfs', 'tmpfs', path.join(tree, 'tmp')], { encoding: 'utf8' });
    expect(tmpfs.status, tmpfs.stderr).toBe(0);

    removeChrootTree(path.join(dir, 'build'));
    expect(existsSync(path.join(dir, 'build'))).toBe(false);
    expect(readFileSync(path.join(outside, 'precious'), 'utf8')).toBe('keep me');
  });
});
