// Applying layers to a tree (src/guest-build/oci-layers.ts): whiteouts, opaque directories, links, owners, and
// hostile archives that try to write outside the tree.
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync as readdir,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync, createGunzip } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LayerTree } from '../../src/guest-build/oci-layers.js';
import { debugfsXattrCommands, setExt4Xattrs } from '../../src/guest-build/rootfs-build.js';
import { busyboxLayers, tarOf, type FixtureEntry } from './oci-fixtures.js';

let scratch: string;
let tree: string;
let outside: string;
beforeEach(() => {
  scratch = mkdtempSync(path.join(os.tmpdir(), 'smol-oci-layers-'));
  tree = path.join(scratch, 'tree');
  outside = path.join(scratch, 'outside');
  mkdirSync(tree);
  mkdirSync(outside);
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

const apply = async (layers: LayerTree, entries: FixtureEntry[], name = 'sha256:test') =>
  layers.apply(Readable.from([await tarOf(entries)]), name);

describe('LayerTree', () => {
  it('applies layers in order: whiteouts, opaque directories, links, modes and owners', async () => {
    const layers = new LayerTree(tree);
    const [one, two] = await busyboxLayers();
    await layers.apply(Readable.from([one!]), 'sha256:one');
    expect(readFileSync(path.join(tree, 'etc/doomed'), 'utf8')).toContain('deleted by layer 2');
    await layers.apply(Readable.from([two!]), 'sha256:two');
    expect(existsSync(path.join(tree, 'etc/doomed'))).toBe(false);
    expect(existsSync(path.join(tree, 'etc/.wh.doomed'))).toBe(false);
    expect(existsSync(path.join(tree, 'gone/a'))).toBe(false); // the opaque directory hid layer 1's child
    expect(readFileSync(path.join(tree, 'gone/b'), 'utf8')).toBe('b\n'); // but not layer 2's own
    expect(existsSync(path.join(tree, 'gone/.wh..wh..opq'))).toBe(false);
    expect(readlinkSync(path.join(tree, 'bin/sh'))).toBe('busybox');
    expect(statSync(path.join(tree, 'bin/cat')).ino).toBe(statSync(path.join(tree, 'bin/busybox')).ino);
    const greeting = statSync(path.join(tree, 'etc/greeting'));
    expect(greeting.mode & 0o7777).toBe(0o640);
    expect(statSync(path.join(tree, 'usr/bin/setuid-tool')).mode & 0o7777).toBe(0o4755);
    if (process.getuid?.() === 0) expect([greeting.uid, greeting.gid]).toEqual([1000, 1001]);
    expect(greeting.mtime.toISOString()).toBe('2026-01-02T03:04:05.000Z');
  });

  it('keeps what a layer made from its own whiteouts, and replaces a file with a directory', async () => {
    const layers = new LayerTree(tree);
    await apply(layers, [{ header: { name: 'x' }, data: 'file' }]);
    await apply(layers, [
      { header: { name: 'x/', type: 'directory', mode: 0o755 } },
      { header: { name: 'x/y' }, data: 'inside' },
      { header: { name: 'x/.wh.y' }, data: '' },
    ]);
    expect(readFileSync(path.join(tree, 'x/y'), 'utf8')).toBe('inside');
  });

  it('refuses `..` in a name and in a hard link, naming the layer and the entry', async () => {
    const layers = new LayerTree(tree);
    await expect(apply(layers, [{ header: { name: '../escape' }, data: 'x' }], 'sha256:evil')).rejects.toThrow(
      'layer sha256:evil: entry "../escape": its name has a `..` component',
    );
    await expect(apply(layers, [{ header: { name: 'a/../../escape' }, data: 'x' }])).rejects.toThrow('`..` component');
    await expect(
      apply(layers, [{ header: { name: 'passwd', type: 'link', linkname: '../../../../etc/passwd' } }]),
    ).rejects.toThrow('entry "passwd": a hard link to "../../../../etc/passwd", a name with a `..` component');
    expect(readdir(outside)).toEqual([]);
  });

  it('keeps absolute names and symbolic-link tricks inside the tree', async () => {
    const layers = new LayerTree(tree);
    await apply(layers, [
      { header: { name: `/${path.join(outside, 'abs')}` }, data: 'absolute' },
      { header: { name: 'out', type: 'symlink', linkname: outside } },
      { header: { name: 'out/through-absolute-link' }, data: 'x' },
      { header: { name: 'up', type: 'symlink', linkname: '../../../../../..' } },
      { header: { name: 'up/through-relative-link' }, data: 'y' },
      { header: { name: 'loop', type: 'symlink', linkname: 'loop' } },
    ]);
    expect(readdir(outside)).toEqual([]);
    // A leading / is dropped; an absolute link is followed from the tree's root; `..` stops at the root.
    expect(readFileSync(path.join(tree, outside, 'abs'), 'utf8')).toBe('absolute');
    expect(readFileSync(path.join(tree, outside, 'through-absolute-link'), 'utf8')).toBe('x');
    expect(readFileSync(path.join(tree, 'through-relative-link'), 'utf8')).toBe('y');
    expect(lstatSync(path.join(tree, 'out')).isSymbolicLink()).toBe(true);
    await expect(apply(layers, [{ header: { name: 'loop/x' }, data: 'z' }])).rejects.toThrow(
      'entry "loop/x": too many levels of symbolic links',
    );
    // An entry replaces a link at its own name rather than writing through it.
    await apply(layers, [{ header: { name: 'out' }, data: 'replaced' }]);
    expect(readFileSync(path.join(tree, 'out'), 'utf8')).toBe('replaced');
    expect(readdir(outside)).toEqual([]);
  });

  it('a hard link to a file the image does not have is refused', async () => {
    const layers = new LayerTree(tree);
    await expect(
      apply(layers, [{ header: { name: 'l', type: 'link', linkname: 'nowhere' } }], 'sha256:l'),
    ).rejects.toThrow('layer sha256:l: entry "l": a hard link to "nowhere", which the image does not have');
  });

  it('a truncated layer names the layer and the last entry read', async () => {
    const layers = new LayerTree(tree);
    const tar = await tarOf([
      { header: { name: 'first' }, data: randomBytes(10_000) },
      { header: { name: 'second' }, data: randomBytes(100_000) },
    ]);
    const gz = gzipSync(tar);
    const cut = Readable.from([gz.subarray(0, gz.length - 2000)]).pipe(createGunzip());
    await expect(layers.apply(cut, 'sha256:cut')).rejects.toThrow(
      /layer sha256:cut: the tar is truncated or damaged after entry "second"/,
    );
  });

  it('collects extended attributes without setting them on the tree: replaced, whited out and linked', async () => {
    const layers = new LayerTree(tree);
    const x = (value: string) => ({ 'SCHILY.xattr.user.v': value });
    const f = (name: string, pax?: Record<string, string>): FixtureEntry => ({
      header: { name, mode: 0o644, mtime: new Date(0), ...(pax ? { pax } : {}) },
      data: name,
    });
    await apply(layers, [
      { header: { name: 'd/', type: 'directory', mode: 0o755, pax: { 'SCHILY.xattr.trusted.dir': 'one' } } },
      f('d/kept', { ...x('kept'), 'SCHILY.xattr.security.capability': '\u0001\u0002' }),
      f('d/replaced', x('old')),
      f('gone/a', x('hidden')),
      f('linked', x('shared')),
      { header: { name: 'link', type: 'link', linkname: 'linked' } },
    ]);
    await apply(layers, [
      { header: { name: 'd/', type: 'directory', mode: 0o755, pax: { 'SCHILY.xattr.user.two': 'two' } } },
      f('d/replaced'),
      f('.wh.gone'),
      f('.wh.linked'),
    ]);
    expect(layers.xattrs().map((a) => [a.path, a.name, a.value.toString('hex')])).toEqual([
      ['d', 'trusted.dir', Buffer.from('one').toString('hex')],
      ['d', 'user.two', Buffer.from('two').toString('hex')],
      ['d/kept', 'user.v', Buffer.from('kept').toString('hex')],
      ['d/kept', 'security.capability', '0102'],
      ['link', 'user.v', Buffer.from('shared').toString('hex')], // the inode outlives the name it was made with
    ]);
    // Nothing was set on the tree: its file system need not hold xattrs (docs/images.md).
    const dumped = spawnSync('getfattr', ['-R', '-d', '-m', '-', '.'], { cwd: tree, encoding: 'utf8' });
    expect(dumped.status).toBe(0);
    expect(dumped.stdout).toBe('');
  });

  it('leaves out an extended attribute outside the namespaces Linux has, as containerd does', async () => {
    const layers = new LayerTree(tree);
    await apply(layers, [
      { header: { name: 'f', pax: { 'SCHILY.xattr.bogus.x': 'v', 'SCHILY.xattr.user.ok': 'k' } }, data: 'f' },
    ]);
    expect(layers.xattrs().map((a) => `${a.path} ${a.name}`)).toEqual(['f user.ok']);
  });
});

describe('setExt4Xattrs', () => {
  it('sets bytes on paths debugfs must be given quoted, on a symbolic link itself, and names a path not there', async () => {
    const src = path.join(scratch, 'src');
    mkdirSync(src);
    writeFileSync(path.join(src, 'a "quoted" name'), 'x');
    writeFileSync(path.join(src, 'plain'), 'x');
    symlinkSync('plain', path.join(src, 'link'));
    const image = path.join(scratch, 'disk.ext4');
    writeFileSync(image, '');
    truncateSync(image, 64 * 1024 * 1024);
    expect(spawnSync('/sbin/mke2fs', ['-q', '-t', 'ext4', '-d', src, '-F', image]).status).toBe(0);
    const log = path.join(scratch, 'log');
    const binary = Buffer.from([0, 1, 0xff, 0x22, 0x0a]);
    await setExt4Xattrs(
      image,
      [
        { path: 'a "quoted" name', name: 'user.bytes', value: binary },
        { path: 'link', name: 'trusted.on-the-link', value: Buffer.from('l') },
        { path: '', name: 'user.root', value: Buffer.from('r') },
      ],
      { work: scratch, log },
    );
    const list = (what: string) =>
      spawnSync('/sbin/debugfs', ['-R', `ea_list ${what}`, image], { encoding: 'utf8' }).stdout;
    expect(list('"/a ""quoted"" name"')).toContain('user.bytes (5) = 00 01 ff 22 0a');
    expect(list('/link')).toContain('trusted.on-the-link (1) = "l"');
    expect(list('/plain')).not.toContain('on-the-link');
    expect(list('/')).toContain('user.root (1) = "r"');
    expect(existsSync(path.join(scratch, 'xattr-values'))).toBe(false);
    await expect(
      setExt4Xattrs(image, [{ path: 'missing', name: 'user.x', value: Buffer.from('x') }], { work: scratch, log }),
    ).rejects.toThrow("setting the image's extended attributes failed: /missing: File not found by ext2_lookup");
    expect(() => debugfsXattrCommands([{ path: 'a\nb', name: 'user.x', value: Buffer.alloc(0) }], String)).toThrow(
      '"/a\\nb" (it has extended attributes) has a line break, which debugfs cannot be given',
    );
  });
});
