import { describe, expect, it } from 'vitest';
import { UsageError } from './errors.js';
import { formatGuestInfo, parseGuestArgs } from './guest.js';

describe('smol guest arguments', () => {
  it('build takes --force and --json', () => {
    expect(parseGuestArgs(['build'])).toEqual({ action: 'build', force: false, json: false });
    expect(parseGuestArgs(['build', '--force', '--json'])).toEqual({ action: 'build', force: true, json: true });
  });

  it('info takes --json but not --force', () => {
    expect(parseGuestArgs(['info', '--json'])).toEqual({ action: 'info', json: true });
    expect(() => parseGuestArgs(['info', '--force'])).toThrow(new UsageError('guest', 'unknown option --force'));
  });

  it('no action or an unknown one is a usage error naming the actions', () => {
    expect(() => parseGuestArgs([])).toThrow(new UsageError('guest', 'name an action: build or info'));
    expect(() => parseGuestArgs(['make'])).toThrow(
      new UsageError('guest', 'unknown action make (actions: build, info)'),
    );
  });

  it('--help works before and after the action', () => {
    expect(parseGuestArgs(['--help'])).toBe('help');
    expect(parseGuestArgs(['build', '-h'])).toBe('help');
  });
});

describe('smol guest info output', () => {
  it('an empty cache says what to run', () => {
    expect(formatGuestInfo({ dir: '/c/guest', kernel: null, initramfs: null, rootfs: null })).toBe(
      [
        'cache      /c/guest',
        'kernel     none built; run smol guest build',
        'initramfs  none built; run smol guest build',
        'rootfs     none built; run smol guest build',
        '',
      ].join('\n'),
    );
  });

  it('an outdated kernel says the recipe changed', () => {
    const text = formatGuestInfo({
      dir: '/c/guest',
      kernel: {
        hash: 'a',
        vmlinux: '/c/guest/kernel-a/vmlinux',
        bzImage: '',
        present: true,
        build: null,
        upToDate: false,
      },
      initramfs: { hash: 'b', file: '/c/guest/initramfs-b.cpio', present: false, size: null, upToDate: true },
      rootfs: null,
    });
    expect(text).toContain('kernel     /c/guest/kernel-a/vmlinux (outdated: the recipe changed; run smol guest build)');
    expect(text).toContain('initramfs  /c/guest/initramfs-b.cpio is missing; run smol guest build');
  });

  it('the root disk shows its size and what the sparse file takes on disk', () => {
    const text = formatGuestInfo({
      dir: '/c/guest',
      kernel: null,
      initramfs: null,
      rootfs: {
        hash: 'c',
        file: '/c/guest/rootfs-c.ext4',
        present: true,
        size: 2 * 1024 ** 3,
        allocated: 3.5 * 1024 ** 2,
        upToDate: true,
      },
    });
    expect(text).toContain('rootfs     /c/guest/rootfs-c.ext4 (2.0 GiB ext4, 3.5 MiB on disk, matches this checkout)');
  });
});
