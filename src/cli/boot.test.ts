import { describe, expect, it } from 'vitest';
import { GUEST_CMDLINE } from '../guest-build/guest-assets.js';
import { bootExitStatus, parseBootArgs, resolveBootTarget } from './boot.js';
import { UsageError } from './errors.js';

describe('smol boot arguments', () => {
  it('takes a kernel and fills in the default memory and vCPU count', () => {
    expect(parseBootArgs(['--kernel', 'guest.elf'])).toEqual({ kernel: 'guest.elf', memoryMiB: 256, cpus: 1 });
  });

  it('passes initrd, command line, memory and cpus through', () => {
    const args = ['--kernel=k', '--initrd', 'i', '--cmdline', 'console=ttyS0 quiet', '--memory', '512', '--cpus', '2'];
    expect(parseBootArgs(args)).toEqual({
      kernel: 'k',
      initrd: 'i',
      cmdline: 'console=ttyS0 quiet',
      memoryMiB: 512,
      cpus: 2,
    });
  });

  it('--cpus 0 is refused with the allowed range', () => {
    expect(() => parseBootArgs(['--kernel', 'k', '--cpus', '0'])).toThrow(
      new UsageError('boot', '--cpus must be an integer from 1 to 64 (got 0)'),
    );
  });

  it.each(['1.5', '-1', 'two', '', '65', '0x2'])('--cpus=%s is refused', (value) => {
    expect(() => parseBootArgs(['--kernel', 'k', `--cpus=${value}`])).toThrow(/--cpus must be an integer/);
  });

  it('--memory outside what the VMM supports is refused', () => {
    expect(() => parseBootArgs(['--kernel', 'k', '--memory', '1'])).toThrow(/--memory must be an integer from 2 to/);
    expect(() => parseBootArgs(['--kernel', 'k', '--memory', '99999999'])).toThrow(/--memory/);
  });

  it('leaves the kernel unset without --kernel (the built guest is resolved later)', () => {
    expect(parseBootArgs([])).toEqual({ memoryMiB: 256, cpus: 1 });
  });

  it('an empty --kernel or --initrd is refused', () => {
    expect(() => parseBootArgs(['--kernel='])).toThrow('--kernel needs a file');
    expect(() => parseBootArgs(['--kernel', 'k', '--initrd='])).toThrow('--initrd needs a file');
  });

  it('unknown flags are rejected by name', () => {
    expect(() => parseBootArgs(['--kernel', 'k', '--smp', '2'])).toThrow(
      new UsageError('boot', 'unknown option --smp'),
    );
    expect(() => parseBootArgs(['--kernel', 'k', '-x'])).toThrow('unknown option -x');
  });

  it('a flag without its value says so', () => {
    expect(() => parseBootArgs(['--kernel'])).toThrow('--kernel needs a value');
    expect(() => parseBootArgs(['--kernel', '--cpus', '2'])).toThrow(/^--kernel needs a value/);
    expect(() => parseBootArgs(['--kernel', 'k', '--cpus', '-1'])).toThrow(
      '--cpus needs a value (write --cpus=-… for a value that starts with -)',
    );
  });

  it('stray arguments are rejected', () => {
    expect(() => parseBootArgs(['--kernel', 'k', 'extra'])).toThrow('unexpected argument extra');
  });

  it('--help wins over everything else', () => {
    expect(parseBootArgs(['--help'])).toBe('help');
    expect(parseBootArgs(['-h'])).toBe('help');
  });
});

describe('smol boot exit status', () => {
  it('a guest reset is success', () => {
    expect(bootExitStatus({ reason: 'reset', code: 0, message: '' })).toEqual({ status: 0 });
  });

  it('a guest power-off passes its code through', () => {
    expect(bootExitStatus({ reason: 'poweroff', code: 0, message: '' })).toEqual({ status: 0 });
    expect(bootExitStatus({ reason: 'poweroff', code: 42, message: '' })).toEqual({ status: 42 });
  });

  it('a triple fault fails with a message that says so', () => {
    expect(bootExitStatus({ reason: 'shutdown', code: 0, message: '' })).toEqual({
      status: 1,
      message: 'the guest triple-faulted (shutdown)',
    });
    expect(bootExitStatus({ reason: 'shutdown', code: 0, message: 'the guest triple-faulted on vCPU 0' })).toEqual({
      status: 1,
      message: 'the guest triple-faulted on vCPU 0 (shutdown)',
    });
  });

  it('a guest kernel panic fails with its own status and says so', () => {
    expect(bootExitStatus({ reason: 'panic', code: 0, message: 'the guest kernel panicked' })).toEqual({
      status: 3,
      message: 'the guest kernel panicked',
    });
  });

  it('a VMM error fails and carries the VMM message', () => {
    const result = bootExitStatus({ reason: 'error', code: 0, message: 'KVM_EXIT_INTERNAL_ERROR (suberror 1)' });
    expect(result).toEqual({ status: 1, message: 'the VMM stopped the guest: KVM_EXIT_INTERNAL_ERROR (suberror 1)' });
  });
});

describe('what smol boot boots', () => {
  const built = { kernel: '/cache/kernel-1/vmlinux', initramfs: '/cache/initramfs-2.cpio' };

  it('boots the given kernel as it is, without the guest defaults', () => {
    expect(resolveBootTarget({ kernel: 'k.elf', memoryMiB: 16, cpus: 1 }, built)).toEqual({
      kernel: 'k.elf',
      memoryMiB: 16,
      cpus: 1,
    });
  });

  it('without --kernel boots the built kernel with its initramfs and command line', () => {
    expect(resolveBootTarget({ memoryMiB: 256, cpus: 2 }, built)).toEqual({
      kernel: built.kernel,
      initrd: built.initramfs,
      cmdline: GUEST_CMDLINE,
      memoryMiB: 256,
      cpus: 2,
    });
  });

  it('keeps --initrd and --cmdline over the built defaults', () => {
    const target = resolveBootTarget({ memoryMiB: 256, cpus: 1, initrd: 'mine.cpio', cmdline: 'console=ttyS0' }, built);
    expect(target).toMatchObject({ kernel: built.kernel, initrd: 'mine.cpio', cmdline: 'console=ttyS0' });
  });

  it('says how to build the guest when none was built', () => {
    expect(() => resolveBootTarget({ memoryMiB: 256, cpus: 1 }, {})).toThrow(
      /no guest kernel has been built yet: run `smol guest build`.*or pass --kernel FILE/,
    );
  });

  it('says the initramfs is missing when only the kernel is there', () => {
    expect(() => resolveBootTarget({ memoryMiB: 256, cpus: 1 }, { kernel: built.kernel })).toThrow(
      /base initramfs is missing/,
    );
    expect(resolveBootTarget({ memoryMiB: 256, cpus: 1, initrd: 'i' }, { kernel: built.kernel })).toMatchObject({
      initrd: 'i',
    });
  });
});
