import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findGuestAssets, publishEntry, readCurrentGuest, updateCurrentGuest } from './guest-assets.js';

let cache: string;
let guestDir: string;
let env: NodeJS.ProcessEnv;

beforeEach(() => {
  cache = mkdtempSync(path.join(os.tmpdir(), 'smol-guest-assets-'));
  guestDir = path.join(cache, 'guest');
  env = { SMOL_CACHE: cache };
});

afterEach(() => {
  rmSync(cache, { recursive: true, force: true });
});

function touch(relative: string) {
  const file = path.join(guestDir, relative);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, 'x');
  return file;
}

const KERNEL = { hash: 'aaaa', vmlinux: 'kernel-aaaa/vmlinux', bzImage: 'kernel-aaaa/bzImage' };
const INITRAMFS = { hash: 'bbbb', file: 'initramfs-bbbb.cpio' };
const ROOTFS = { hash: 'cccc', file: 'rootfs-cccc.ext4' };

describe('finding the guest kernel, initramfs and root disk', () => {
  it('an empty cache (no guest directory at all) has neither', () => {
    expect(findGuestAssets(env)).toEqual({});
  });

  it('a guest directory without current.json has neither, whatever files lie around', () => {
    touch('kernel-aaaa/vmlinux');
    touch('initramfs-bbbb.cpio');
    expect(findGuestAssets(env)).toEqual({});
  });

  it('after a build both are found, as absolute paths', () => {
    const vmlinux = touch(KERNEL.vmlinux);
    const initramfs = touch(INITRAMFS.file);
    updateCurrentGuest(guestDir, { kernel: KERNEL, initramfs: INITRAMFS });
    expect(findGuestAssets(env)).toEqual({ kernel: vmlinux, initramfs });
  });

  it('the root disk is found once built, as an absolute path', () => {
    const vmlinux = touch(KERNEL.vmlinux);
    const initramfs = touch(INITRAMFS.file);
    const rootfs = touch(ROOTFS.file);
    updateCurrentGuest(guestDir, { kernel: KERNEL, initramfs: INITRAMFS, rootfs: ROOTFS });
    expect(findGuestAssets(env)).toEqual({ kernel: vmlinux, initramfs, rootfs });
  });

  it('a kernel build that failed after the initramfs was built leaves the initramfs usable', () => {
    const initramfs = touch(INITRAMFS.file);
    updateCurrentGuest(guestDir, { initramfs: INITRAMFS });
    expect(findGuestAssets(env)).toEqual({ initramfs });
  });

  it('a file current.json names but someone deleted is not offered', () => {
    touch(KERNEL.vmlinux);
    updateCurrentGuest(guestDir, { kernel: KERNEL, initramfs: INITRAMFS });
    expect(findGuestAssets(env)).toEqual({ kernel: path.join(guestDir, KERNEL.vmlinux) });
  });

  it('a damaged current.json is treated as no build, not as an error', () => {
    touch(KERNEL.vmlinux);
    writeFileSync(path.join(guestDir, 'current.json'), '{"format": 1, "kernel": ');
    expect(findGuestAssets(env)).toEqual({});
    writeFileSync(path.join(guestDir, 'current.json'), JSON.stringify({ format: 1, kernel: { hash: 'aaaa' } }));
    expect(findGuestAssets(env)).toEqual({});
  });

  it('recording a new kernel keeps the current initramfs and root disk', () => {
    mkdirSync(guestDir, { recursive: true });
    updateCurrentGuest(guestDir, { initramfs: INITRAMFS });
    updateCurrentGuest(guestDir, { rootfs: ROOTFS });
    updateCurrentGuest(guestDir, { kernel: KERNEL }, new Date('2026-01-02T03:04:05Z'));
    expect(readCurrentGuest(guestDir)).toEqual({
      format: 1,
      kernel: KERNEL,
      initramfs: INITRAMFS,
      rootfs: ROOTFS,
      updated: '2026-01-02T03:04:05.000Z',
    });
    expect(readdirSync(guestDir)).toEqual(['current.json']); // no temporary file left behind
  });
});

describe('publishing a build', () => {
  it('moves a finished directory into place', () => {
    const tmp = path.dirname(touch('tmp-1/vmlinux'));
    publishEntry(tmp, path.join(guestDir, 'kernel-aaaa'));
    expect(readdirSync(guestDir)).toEqual(['kernel-aaaa']);
  });

  it('a build that finished second leaves the first one in place', () => {
    const first = path.dirname(touch('kernel-aaaa/vmlinux'));
    writeFileSync(path.join(first, 'vmlinux'), 'first');
    const second = path.dirname(touch('tmp-2/vmlinux'));
    publishEntry(second, first);
    expect(readFileSync(path.join(first, 'vmlinux'), 'utf8')).toBe('first');
    expect(readdirSync(guestDir)).toEqual(['kernel-aaaa']);
  });

  it('a forced build replaces the existing one', () => {
    const first = path.dirname(touch('kernel-aaaa/vmlinux'));
    const second = path.dirname(touch('tmp-2/vmlinux'));
    writeFileSync(path.join(second, 'vmlinux'), 'second');
    publishEntry(second, first, { replace: true });
    expect(readFileSync(path.join(first, 'vmlinux'), 'utf8')).toBe('second');
    expect(readdirSync(guestDir)).toEqual(['kernel-aaaa']);
  });
});
