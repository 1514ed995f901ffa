import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createBuildDir, removeAbandonedBuildDirs } from './build-dir.js';

let guestDir: string;
beforeEach(() => {
  guestDir = mkdtempSync(path.join(os.tmpdir(), 'smol-build-dir-'));
});
afterEach(() => rmSync(guestDir, { recursive: true, force: true }));

/** The pid of a process that has exited. */
function deadPid(): number {
  const child = spawnSync('sh', ['-c', 'echo $$'], { encoding: 'utf8' });
  return Number(child.stdout.trim());
}

describe('kernel build trees left behind', () => {
  it('a tree whose build is still running is kept', () => {
    const dir = createBuildDir(guestDir, 'build-kernel-');
    expect(removeAbandonedBuildDirs(guestDir, 'build-kernel-')).toEqual([]);
    expect(existsSync(dir)).toBe(true);
  });

  it('a tree whose build died is removed', () => {
    const dir = path.join(guestDir, 'build-kernel-dead');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'owner.pid'), `${deadPid()}\n`);
    expect(removeAbandonedBuildDirs(guestDir, 'build-kernel-')).toEqual(['build-kernel-dead']);
    expect(readdirSync(guestDir)).toEqual([]);
  });

  it('a tree without an owner is removed only once it is old', () => {
    const dir = path.join(guestDir, 'build-kernel-unowned');
    mkdirSync(dir);
    expect(removeAbandonedBuildDirs(guestDir, 'build-kernel-')).toEqual([]);
    const twoHoursAgo = new Date(Date.now() - 2 * 3600 * 1000);
    utimesSync(dir, twoHoursAgo, twoHoursAgo);
    expect(removeAbandonedBuildDirs(guestDir, 'build-kernel-')).toEqual(['build-kernel-unowned']);
  });

  it('finished kernels and other entries are never touched', () => {
    mkdirSync(path.join(guestDir, 'kernel-aaaa'));
    writeFileSync(path.join(guestDir, 'initramfs-bbbb.cpio'), '');
    expect(removeAbandonedBuildDirs(guestDir, 'build-kernel-')).toEqual([]);
    expect(readdirSync(guestDir).sort()).toEqual(['initramfs-bbbb.cpio', 'kernel-aaaa']);
  });
});
