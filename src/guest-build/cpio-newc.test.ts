import { describe, expect, it } from 'vitest';
import { newcArchive } from './cpio-newc.js';

interface Parsed {
  name: string;
  mode: number;
  uid: number;
  rdev: [number, number];
  data: Buffer;
}

/** Reads a newc archive back the way the kernel's initramfs unpacker does. */
function parseNewc(archive: Buffer): Parsed[] {
  const entries: Parsed[] = [];
  let offset = 0;
  for (;;) {
    expect(offset % 4).toBe(0);
    expect(archive.toString('ascii', offset, offset + 6)).toBe('070701');
    const field = (i: number) => parseInt(archive.toString('ascii', offset + 6 + i * 8, offset + 14 + i * 8), 16);
    const [mode, uid, size, rdevMajor, rdevMinor, nameSize] = [
      field(1),
      field(2),
      field(6),
      field(9),
      field(10),
      field(11),
    ];
    const nameStart = offset + 110;
    const name = archive.toString('utf8', nameStart, nameStart + nameSize - 1);
    expect(archive[nameStart + nameSize - 1]).toBe(0);
    const dataStart = nameStart + nameSize + ((4 - ((110 + nameSize) % 4)) % 4);
    const data = archive.subarray(dataStart, dataStart + size);
    offset = dataStart + size + ((4 - (size % 4)) % 4);
    if (name === 'TRAILER!!!') break;
    entries.push({ name, mode, uid, rdev: [rdevMajor, rdevMinor], data });
  }
  expect(offset).toBe(archive.length);
  return entries;
}

describe('newc cpio archive', () => {
  const archive = newcArchive([
    { type: 'dir', path: 'bin' },
    { type: 'dir', path: 'tmp', mode: 0o1777 },
    { type: 'chardev', path: '/dev/console', major: 5, minor: 1 },
    { type: 'file', path: 'init', data: Buffer.from('#!/bin/sh\necho hi\n'), mode: 0o755 },
    { type: 'symlink', path: 'bin/sh', target: '/bin/busybox' },
  ]);

  it('holds directories, a device node, files and symlinks, all owned by root', () => {
    const entries = parseNewc(archive);
    expect(entries.map((e) => [e.name, e.mode.toString(8), e.uid])).toEqual([
      ['bin', '40755', 0],
      ['tmp', '41777', 0],
      ['dev/console', '20600', 0],
      ['init', '100755', 0],
      ['bin/sh', '120777', 0],
    ]);
    expect(entries[2]!.rdev).toEqual([5, 1]);
    expect(entries[3]!.data.toString()).toBe('#!/bin/sh\necho hi\n');
    expect(entries[4]!.data.toString()).toBe('/bin/busybox');
  });

  it('is byte-identical for the same entries', () => {
    const again = newcArchive([
      { type: 'dir', path: 'bin' },
      { type: 'dir', path: 'tmp', mode: 0o1777 },
      { type: 'chardev', path: '/dev/console', major: 5, minor: 1 },
      { type: 'file', path: 'init', data: Buffer.from('#!/bin/sh\necho hi\n'), mode: 0o755 },
      { type: 'symlink', path: 'bin/sh', target: '/bin/busybox' },
    ]);
    expect(again.equals(archive)).toBe(true);
  });

  it('refuses a path twice and paths that climb out', () => {
    expect(() =>
      newcArchive([
        { type: 'dir', path: 'a' },
        { type: 'dir', path: '/a' },
      ]),
    ).toThrow('a is in the archive twice');
    expect(() => newcArchive([{ type: 'dir', path: 'a/../../etc' }])).toThrow(/bad path/);
  });
});
