import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AGENT_BINARY } from '../agent-client/host-agent.js';
import { initramfsEntries, initramfsHash, isDynamicElf, readInitramfsResources } from './initramfs-build.js';

const files = readInitramfsResources();

describe('initramfs cache key', () => {
  it('is the same for the same init and busybox', () => {
    expect(initramfsHash({ files, busyboxVersion: '1:1.35.0-4' })).toBe(
      initramfsHash({ files, busyboxVersion: '1:1.35.0-4' }),
    );
  });

  it('changes when /init changes or busybox-static is upgraded', () => {
    const base = initramfsHash({ files, busyboxVersion: '1:1.35.0-4' });
    const edited = files.map((f) =>
      f.name === 'init' ? { ...f, data: Buffer.concat([f.data, Buffer.from('\n')]) } : f,
    );
    expect(initramfsHash({ files: edited, busyboxVersion: '1:1.35.0-4' })).not.toBe(base);
    expect(initramfsHash({ files, busyboxVersion: '1:1.36.1-1' })).not.toBe(base);
  });

  it('changes when the guest agent is rebuilt differently', () => {
    const base = initramfsHash({ files, busyboxVersion: '1:1.35.0-4' });
    const rebuilt = files.map((f) =>
      f.name === 'smol-agent' ? { ...f, data: Buffer.concat([f.data, Buffer.from([0])]) } : f,
    );
    expect(initramfsHash({ files: rebuilt, busyboxVersion: '1:1.35.0-4' })).not.toBe(base);
  });
});

describe('initramfs contents', () => {
  const entries = initramfsEntries(files, Buffer.from('busybox'), [
    'linuxrc',
    'bin/sh',
    'sbin/poweroff',
    'usr/bin/nproc',
  ]);
  const byPath = new Map(entries.map((e) => [e.path, e]));

  it('has /init executable, the console node, busybox and a link per applet', () => {
    expect(byPath.get('init')).toMatchObject({ type: 'file', mode: 0o755 });
    expect(byPath.get('dev/console')).toMatchObject({ type: 'chardev', major: 5, minor: 1 });
    expect(byPath.get('bin/busybox')).toMatchObject({ type: 'file', mode: 0o755 });
    expect(byPath.get('sbin/poweroff')).toEqual({ type: 'symlink', path: 'sbin/poweroff', target: '/bin/busybox' });
    expect(byPath.get('tmp')).toMatchObject({ type: 'dir', mode: 0o1777 });
    expect(byPath.get('sbin/smol-agent')).toMatchObject({ type: 'file', mode: 0o755 });
    expect(isDynamicElf(AGENT_BINARY)).toBe(false); // it runs in an initramfs without a dynamic loader
    expect(byPath.get('linuxrc')).toMatchObject({ type: 'symlink' }); // applets at the top level are fine too
  });

  it('lists every directory before what is in it', () => {
    const seen = new Set<string>(['.']);
    for (const entry of entries) {
      expect(seen.has(path.posix.dirname(entry.path)), entry.path).toBe(true);
      seen.add(entry.path);
    }
  });

  it('an applet in a directory the archive lacks is an error, not a broken link', () => {
    expect(() => initramfsEntries(files, Buffer.from(''), ['opt/bin/x'])).toThrow(/opt\/bin\/x is in opt\/bin\//);
  });
});

describe('busybox must be static', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'smol-elf-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function elf(programHeaderTypes: number[]): string {
    const header = Buffer.alloc(64);
    header.write('\x7fELF', 0, 'latin1');
    header[4] = 2; // ELFCLASS64
    header.writeBigUInt64LE(64n, 0x20); // e_phoff
    header.writeUInt16LE(56, 0x36); // e_phentsize
    header.writeUInt16LE(programHeaderTypes.length, 0x38);
    const table = Buffer.alloc(56 * programHeaderTypes.length);
    programHeaderTypes.forEach((type, i) => table.writeUInt32LE(type, i * 56));
    const file = path.join(dir, `elf-${programHeaderTypes.join('-')}`);
    writeFileSync(file, Buffer.concat([header, table]));
    return file;
  }

  it('an ELF with an interpreter (PT_INTERP) is dynamic, one without is static', () => {
    expect(isDynamicElf(elf([6, 3, 1, 1]))).toBe(true);
    expect(isDynamicElf(elf([1, 1, 4]))).toBe(false);
  });
});
