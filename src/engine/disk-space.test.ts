// The engine's disk reserve (disk-space.ts): how SMOL_DISK_RESERVE is read, and the refusal below it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { diskReserve, diskSpace, formatBytes, requireDiskReserve } from './disk-space.js';

const GiB = 2 ** 30;

afterEach(() => vi.unstubAllEnvs());

describe('the disk reserve', () => {
  it('is max(256 MiB, 2%) by default, or what SMOL_DISK_RESERVE says in bytes, sizes or a share', () => {
    expect(diskReserve(10 * GiB, undefined)).toBe(256 * 2 ** 20);
    expect(diskReserve(100 * GiB, undefined)).toBe(2 * GiB);
    expect(diskReserve(100 * GiB, '1048576')).toBe(2 ** 20);
    expect(diskReserve(100 * GiB, '512MiB')).toBe(512 * 2 ** 20);
    expect(diskReserve(100 * GiB, '1.5 GiB')).toBe(1.5 * GiB);
    expect(diskReserve(100 * GiB, '5%')).toBe(5 * GiB);
    expect(diskReserve(100 * GiB, '0')).toBe(0);
  });

  it('refuses a setting that is not a size, naming it', () => {
    expect(() => diskReserve(GiB, 'lots')).toThrow(/SMOL_DISK_RESERVE="lots" is not a size/);
    expect(() => diskReserve(GiB, '150%')).toThrow(/more than the whole file system/);
  });

  it('refuses new snapshots with ENOSPC at or below the reserve, saying what is free and what to remove', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'smol-reserve-'));
    try {
      const { totalBytes, freeBytes } = diskSpace(dir);
      expect(totalBytes).toBeGreaterThan(0);
      vi.stubEnv('SMOL_DISK_RESERVE', '100%');
      let refusal: unknown;
      try {
        requireDiskReserve(dir, 'a new snapshot');
      } catch (error) {
        refusal = error;
      }
      expect(refusal).toMatchObject({ code: 'ENOSPC' });
      const message = (refusal as Error).message;
      expect(message).toMatch(/^no space left on device for a new snapshot: .* free in /);
      expect(message).toContain('smol gc');
      expect(message).toContain(formatBytes(freeBytes).split(' ')[1]!);
      vi.stubEnv('SMOL_DISK_RESERVE', '0');
      expect(() => requireDiskReserve(dir, 'a new snapshot')).not.toThrow();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('formats sizes for messages', () => {
    expect(formatBytes(300)).toBe('300 bytes');
    expect(formatBytes(1536 * 2 ** 20)).toBe('1.5 GiB');
    expect(formatBytes(48 * 2 ** 20)).toBe('48 MiB');
  });
});
