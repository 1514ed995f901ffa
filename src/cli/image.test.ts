import { describe, expect, it } from 'vitest';
import type { Smolfile } from '../smolfile/smolfile.js';
import { UsageError } from './errors.js';
import { formatImageBuild, formatImageList, formatPruned, nothingToBuild, parseImageArgs } from './image.js';

describe('smol image arguments', () => {
  it('build takes -f, --force and --json, and reads ./Smolfile by default', () => {
    expect(parseImageArgs(['build'])).toEqual({ action: 'build', file: 'Smolfile', force: false, json: false });
    expect(parseImageArgs(['build', '-f', 'smolfiles/debian.smolfile', '--force', '--json'])).toEqual({
      action: 'build',
      file: 'smolfiles/debian.smolfile',
      force: true,
      json: true,
    });
  });

  it('ls takes --json only', () => {
    expect(parseImageArgs(['ls', '--json'])).toEqual({ action: 'ls', json: true });
    expect(() => parseImageArgs(['ls', '--force'])).toThrow(new UsageError('image', 'unknown option --force'));
  });

  it('no action or an unknown one is a usage error naming the actions', () => {
    expect(() => parseImageArgs([])).toThrow(new UsageError('image', 'name an action: build, pull, ls, rm, prune'));
    expect(() => parseImageArgs(['push'])).toThrow(
      new UsageError('image', 'unknown action push (actions: build, pull, ls, rm, prune)'),
    );
    expect(() => parseImageArgs(['pull'])).toThrow(
      new UsageError('image', 'pull takes one image reference (smol image pull python:3.12-slim)'),
    );
    expect(parseImageArgs(['pull', 'python:3.12-slim', '--force'])).toEqual({
      action: 'pull',
      reference: 'python:3.12-slim',
      force: true,
      json: false,
    });
    expect(parseImageArgs(['rm', 'oci-0123456789abcdef', '--json'])).toEqual({
      action: 'rm',
      reference: 'oci-0123456789abcdef',
      force: false,
      json: true,
    });
    expect(parseImageArgs(['rm', '--force', 'python:3.12-slim'])).toMatchObject({ force: true });
    expect(parseImageArgs(['prune'])).toEqual({ action: 'prune', dryRun: false, json: false });
    expect(parseImageArgs(['prune', '--dry-run', '--json'])).toEqual({ action: 'prune', dryRun: true, json: true });
    expect(() => parseImageArgs(['prune', '--force'])).toThrow(new UsageError('image', 'unknown option --force'));
    expect(() => parseImageArgs(['build', '-f', ''])).toThrow(new UsageError('image', '--file needs a file'));
  });

  it('--help works before and after the action', () => {
    expect(parseImageArgs(['--help'])).toBe('help');
    expect(parseImageArgs(['build', '-h'])).toBe('help');
  });
});

describe('smol image build output', () => {
  const smolfile = (image: Smolfile['image']) => ({ image }) as Smolfile;

  it('the builtin image and a bare kernel are not built here, and it says where they come from', () => {
    expect(nothingToBuild(smolfile({ kind: 'builtin' }))).toBe(
      'image = "builtin": the builtin image is built by smol guest build (docs/guest.md)\n',
    );
    expect(nothingToBuild(smolfile(null))).toBe('no image to build: the Smolfile boots a bare kernel as it is\n');
    expect(nothingToBuild(smolfile({ kind: 'debian', suite: 'bookworm' }))).toBeNull();
  });

  it('prints the file, its sizes, how long it took and each init command with its output', () => {
    const text = formatImageBuild('bookworm', {
      file: '/c/guest/images/debian-bookworm-0123456789abcdef.ext4',
      hash: '0123456789abcdef',
      cached: false,
      seconds: 73,
      size: 4 * 1024 ** 3,
      allocated: 208.3 * 1024 ** 2,
      initOutput: [
        { command: 'apt-get install -y python3-minimal', output: 'Reading package lists...\nSetting up python3\n' },
        { command: 'echo built > /etc/smol-built', output: '' },
      ],
    });
    expect(text).toBe(
      [
        'debian:bookworm  /c/guest/images/debian-bookworm-0123456789abcdef.ext4 (4.0 GiB ext4, 208.3 MiB on disk, built in 1:13)',
        'init 1: apt-get install -y python3-minimal',
        '  Reading package lists...',
        '  Setting up python3',
        'init 2: echo built > /etc/smol-built',
        '',
      ].join('\n'),
    );
  });
});

describe('smol image ls output', () => {
  it('a table with the size as the guest sees it and what the file takes on disk', () => {
    const text = formatImageList('/c/guest/images', [
      {
        image: 'debian:bookworm',
        file: '/c/guest/images/debian-bookworm-0123456789abcdef.ext4',
        hash: '0123456789abcdef',
        size: 4 * 1024 ** 3,
        allocated: 208.3 * 1024 ** 2,
        built: '2026-12-01T13:51:09.000Z',
      },
    ]);
    expect(text).toBe(
      [
        'IMAGE            HASH              SIZE     ON DISK    BUILT             FILE',
        'debian:bookworm  0123456789abcdef  4.0 GiB  208.3 MiB  2026-12-01 13:51  /c/guest/images/debian-bookworm-0123456789abcdef.ext4',
        '',
      ].join('\n'),
    );
  });

  it('says how to build one when there is none', () => {
    expect(formatImageList('/c/guest/images', [])).toBe(
      'no images in /c/guest/images; build one with smol image build -f <Smolfile>, or smol image pull REF\n',
    );
  });
});

describe('smol image prune output', () => {
  const removed = [
    { name: 'oci-0123456789abcdef', file: '/c/guest/images/oci-0123456789abcdef.ext4', bytes: 52.5 * 2 ** 20 },
    { name: 'blob sha256:ab12', file: '/c/guest/images/blobs/sha256/ab12', bytes: 3 * 2 ** 20 },
  ];

  it('a dry run gives the total and each file with its size, and says nothing was removed', () => {
    expect(formatPruned(removed, true)).toBe(
      [
        'a prune would free 2 files, 55.5 MiB in all (nothing removed: --dry-run)',
        '  52.5 MiB  oci-0123456789abcdef  /c/guest/images/oci-0123456789abcdef.ext4',
        '   3.0 MiB  blob sha256:ab12  /c/guest/images/blobs/sha256/ab12',
        '',
      ].join('\n'),
    );
    expect(formatPruned(removed, false).split('\n')[0]).toBe('pruned 2 files, 55.5 MiB freed');
    expect(formatPruned([], true)).toBe(
      'nothing to prune: every image left is in use by a snapshot or VM, or there is none\n',
    );
  });
});
