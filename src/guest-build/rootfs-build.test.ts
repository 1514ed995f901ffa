import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstatSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { PackageTools } from './host-packages.js';
import { initramfsHash, readInitramfsEntries, readInitramfsResources } from './initramfs-build.js';
import {
  buildRootfs,
  debugfsNormalizeCommands,
  makeExt4Image,
  mke2fsArgs,
  ROOTFS_EPOCH,
  ROOTFS_SIZE_BYTES,
  rootfsHash,
  rootfsUuid,
  writeRootfsTree,
} from './rootfs-build.js';

const MiB = 1024 * 1024;
const TEST_SIZE = 64 * MiB; // the real image is 2 GiB; the recipe is the same
const INPUTS = { initramfsHash: '0123456789abcdef', sizeBytes: ROOTFS_SIZE_BYTES, e2fsprogsVersion: '1.47.0-2' };

let work: string;
beforeEach(() => {
  work = mkdtempSync(path.join(os.tmpdir(), 'smol-rootfs-'));
});
afterEach(() => rmSync(work, { recursive: true, force: true }));

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

function e2(command: string, args: string[]): string {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
}

describe('root disk cache key', () => {
  it('is the same for the same inputs', () => {
    expect(rootfsHash(INPUTS)).toBe(rootfsHash({ ...INPUTS }));
    expect(rootfsHash(INPUTS)).toMatch(/^[0-9a-f]{16}$/);
  });

  it('changes with the initramfs, the size and e2fsprogs', () => {
    const base = rootfsHash(INPUTS);
    expect(rootfsHash({ ...INPUTS, initramfsHash: 'fedcba9876543210' })).not.toBe(base);
    expect(rootfsHash({ ...INPUTS, sizeBytes: 4 * 1024 ** 3 })).not.toBe(base);
    expect(rootfsHash({ ...INPUTS, e2fsprogsVersion: '1.47.1-1' })).not.toBe(base);
  });

  it('each image has its own file system UUID, the same every time it is built', () => {
    const uuid = rootfsUuid(rootfsHash(INPUTS));
    expect(uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(rootfsUuid(rootfsHash(INPUTS))).toBe(uuid);
    expect(rootfsUuid(rootfsHash({ ...INPUTS, e2fsprogsVersion: 'other' }))).not.toBe(uuid);
  });
});

describe('the root disk tree', () => {
  const entries = readInitramfsEntries(readInitramfsResources());

  it('holds what the initramfs holds, with the same modes, except the console node', () => {
    const tree = path.join(work, 'tree');
    const written = writeRootfsTree(tree, entries);
    expect(written).toEqual(entries.filter((e) => e.path !== 'dev/console').map((e) => e.path));
    expect(entries.some((e) => e.path === 'dev/console')).toBe(true);
    expect(readdirSync(path.join(tree, 'dev'))).toEqual([]); // the kernel mounts devtmpfs there
    const mode = (p: string) => statSync(path.join(tree, p)).mode & 0o7777;
    expect(mode('tmp')).toBe(0o1777);
    expect(mode('proc')).toBe(0o555);
    expect(mode('root')).toBe(0o700);
    expect(mode('init')).toBe(0o755);
    expect(mode('etc/inittab')).toBe(0o644);
    expect(mode('sbin/smol-agent')).toBe(0o755);
    expect(readFileSync(path.join(tree, 'init'))).toEqual(readFileSync(path.resolve('resources/guest-initramfs/init')));
    expect(lstatSync(path.join(tree, 'bin/sh')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(path.join(tree, 'bin/sh'))).toBe('/bin/busybox');
  });

  it('an entry that would land outside the tree is refused', () => {
    expect(() => writeRootfsTree(path.join(work, 't1'), [{ type: 'dir', path: '../x' }])).toThrow(/not a path inside/);
    expect(() => writeRootfsTree(path.join(work, 't2'), [{ type: 'dir', path: '/etc' }])).toThrow(/not a path inside/);
  });
});

describe('mke2fs and debugfs command lines', () => {
  it('makes an ext4 of the tree, labelled, root-owned, of a whole number of MiB', () => {
    expect(mke2fsArgs('/w/tree', '/w/img', 2 * 1024 ** 3, 'u-u')).toEqual([
      '-q',
      '-t',
      'ext4',
      '-d',
      '/w/tree',
      '-L',
      'smol-root',
      '-U',
      'u-u',
      '-E',
      'root_owner=0:0,lazy_journal_init=1,hash_seed=u-u',
      '-F',
      '/w/img',
      '2048M',
    ]);
    expect(() => mke2fsArgs('/w/tree', '/w/img', 2 * 1024 ** 3 + 512, 'u')).toThrow(/whole number of MiB/);
  });

  it('gives every file root as owner and the fixed time', () => {
    expect(debugfsNormalizeCommands(['usr/bin/['], 7).split('\n')).toEqual([
      'sif "/usr/bin/[" uid 0',
      'sif "/usr/bin/[" gid 0',
      'sif "/usr/bin/[" atime @7',
      'sif "/usr/bin/[" mtime @7',
      'sif "/usr/bin/[" ctime @7',
      'sif "/usr/bin/[" crtime @7',
      '',
    ]);
    expect(() => debugfsNormalizeCommands(['a b'], 7)).toThrow(/debugfs cannot be given/);
  });
});

describe('the ext4 image (real mke2fs)', () => {
  const entries = readInitramfsEntries(readInitramfsResources());

  async function image(name: string): Promise<string> {
    const dir = path.join(work, name);
    const tree = path.join(work, `${name}-tree`);
    const paths = writeRootfsTree(tree, entries);
    const file = path.join(work, `${name}.ext4`);
    await makeExt4Image({ tree, file, sizeBytes: TEST_SIZE, uuid: rootfsUuid('t'), paths, log: `${dir}.log` });
    return file;
  }

  it('is byte-identical when built twice from the same files, written at different times', async () => {
    const first = await image('a');
    await new Promise((resolve) => setTimeout(resolve, 1100)); // a new second for every time stamp mke2fs copies
    const second = await image('b');
    expect(sha256(second)).toBe(sha256(first));
  });

  it('is sparse, clean, owned by root, and leaves no inode tables for the guest kernel to zero', async () => {
    const file = await image('c');
    const stats = statSync(file);
    expect(stats.size).toBe(TEST_SIZE);
    expect(stats.blocks * 512).toBeLessThan(8 * MiB); // busybox, the agent and the metadata
    const busybox = e2('/sbin/debugfs', ['-R', 'stat /bin/busybox', file]);
    expect(busybox).toMatch(/User:\s+0\s+Group:\s+0/);
    expect(busybox).toMatch(new RegExp(`mtime: 0x${ROOTFS_EPOCH.toString(16)}:`));
    expect(busybox).toMatch(new RegExp(`ctime: 0x${ROOTFS_EPOCH.toString(16)}:`));
    const header = e2('/sbin/dumpe2fs', ['-h', file]);
    expect(header).toMatch(/Filesystem volume name:\s+smol-root/);
    expect(header).toMatch(/Filesystem features:.*\bhas_journal\b.*\bextent\b/);
    const groups = e2('/sbin/dumpe2fs', [file]).match(/^Group \d+:.*$/gm) ?? [];
    expect(groups.length).toBeGreaterThan(0);
    for (const group of groups) expect(group).toContain('ITABLE_ZEROED');
    expect(spawnSync('/sbin/e2fsck', ['-fn', file]).status).toBe(0);
  });
});

describe('a debugfs failure', () => {
  it('fails the build, naming what debugfs said (debugfs itself exits 0)', async () => {
    const tree = path.join(work, 'tree');
    const paths = writeRootfsTree(tree, [{ type: 'dir', path: 'etc' }]);
    const file = path.join(work, 'x.ext4');
    const options = { tree, file, sizeBytes: TEST_SIZE, uuid: rootfsUuid('t'), log: path.join(work, 'x.log') };
    await expect(makeExt4Image({ ...options, paths: [...paths, 'etc/missing'] })).rejects.toThrow(
      /debugfs could not normalize .*x\.ext4: .*\/etc\/missing: File not found/,
    );
  });
});

describe('building the root disk', () => {
  const files = readInitramfsResources();
  const versions = new Map([
    ['busybox-static', '1:1.35.0-4'],
    ['e2fsprogs', '1.47.0-2'],
  ]);
  const tools: PackageTools = {
    installedVersions: (packages) => new Map([...versions].filter(([name]) => packages.includes(name))),
    depends: () => '',
    canInstall: false,
    install: () => {
      throw new Error('nothing to install');
    },
  };
  const hash = initramfsHash({ files, busyboxVersion: '1:1.35.0-4' });
  const initramfs = { hash, file: `initramfs-${hash}.cpio` };

  it('is cached after the first build, and a forced build makes the same bytes', async () => {
    const steps: string[] = [];
    const options = { guestDir: work, tools, initramfs, sizeBytes: TEST_SIZE, onProgress: () => {} };
    const built = await buildRootfs({ ...options, onProgress: (p) => steps.push(p.detail) });
    expect(built.cached).toBe(false);
    expect(built.file).toBe(path.join(work, built.current.file));
    expect(built.current.file).toBe(`rootfs-${built.current.hash}.ext4`);
    expect(built.size).toBe(TEST_SIZE);
    expect(steps.at(-1)).toMatch(/^rootfs-[0-9a-f]{16}\.ext4 \(0\.1 GiB ext4, \d+\.\d MiB on disk\)$/);
    const bytes = sha256(built.file);

    expect(await buildRootfs(options)).toMatchObject({ cached: true, file: built.file });
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(await buildRootfs({ ...options, force: true })).toMatchObject({ cached: false, file: built.file });
    expect(sha256(built.file)).toBe(bytes);
    expect(readdirSync(work).sort()).toEqual(['logs', built.current.file]); // no build tree or temporary file left
  });

  it('refuses to label a disk with an initramfs hash its files do not have', async () => {
    await expect(
      buildRootfs({
        guestDir: work,
        tools,
        initramfs: { ...initramfs, hash: 'ffffffffffffffff' },
        sizeBytes: TEST_SIZE,
      }),
    ).rejects.toThrow(/files changed since/);
    expect(readdirSync(work).filter((name) => name.startsWith('build-rootfs-'))).toEqual([]);
  });
});
