// Real Linux guests on our VMM: the kernel and base initramfs `smol guest build` made, booted to a shell.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { GUEST_CMDLINE } from '../../src/guest-build/guest-assets.js';
import { bootLinux, builtGuest, type LinuxGuest } from './linux-guest.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let guest: LinuxGuest | undefined;

afterEach(async () => {
  if (guest && guest.vm.state !== 'exited') await guest.vm.kill();
  guest = undefined;
});

describe('a Linux guest', () => {
  it('boots to a shell on the serial console that runs typed commands', async () => {
    guest = await bootLinux();
    expect(await guest.run('echo answer-$((6 * 7))')).toBe('answer-42\n');
    expect(await guest.run('uname -r')).toBe(`${builtGuest().release}\n`);
    expect(await guest.run('cat /proc/cmdline')).toBe(`${GUEST_CMDLINE}\n`);
  });

  it('sees both vCPUs of a 2-vCPU VM and runs on both', async () => {
    guest = await bootLinux({ cpus: 2 });
    expect(await guest.run('nproc')).toBe('2\n');
    expect(await guest.run('grep -c ^processor /proc/cpuinfo')).toBe('2\n');
    // The clock source is kvmclock and the timer the TSC deadline, as the VMM's CPUID promises.
    expect(await guest.run('cat /sys/devices/system/clocksource/clocksource0/current_clocksource')).toBe('kvm-clock\n');
    expect(await guest.run('grep -o -m1 tsc_deadline_timer /proc/cpuinfo')).toBe('tsc_deadline_timer\n');
  });

  it('edits the command line: backspace removes the character before it', async () => {
    guest = await bootLinux();
    guest.type('echo ed-abX\x7fc');
    await guest.waitFor(/ed-abc\r?\n/);
  });

  it('delivers Ctrl-C to the foreground command', async () => {
    guest = await bootLinux();
    // "sleeping" is printed by the very process that then becomes sleep, so once it shows, sleep is in the foreground.
    guest.type(`sh -c 'echo sleep-$((1 + 1)); exec sleep 1000'`);
    await guest.waitFor(/^sleep-2\r?$/m);
    guest.vm.write('\x03');
    // The shell is back and sleep died of SIGINT: status 128 + 2. (Not through run(): its marker echo would reset $?.)
    guest.type('echo status-$?');
    const output = await guest.waitFor(/^status-\d+\r?\n/m); // the whole line: output arrives in pieces
    expect(/^status-(\d+)\r?\n/m.exec(output)?.[1], output.slice(-1000)).toBe('130');
  });

  it('ends with reason poweroff and code 0 on `poweroff -f`', async () => {
    guest = await bootLinux({ cpus: 2 });
    guest.type('poweroff -f');
    expect(await guest.exited).toMatchObject({ reason: 'poweroff', code: 0 });
  });

  it('ends with reason poweroff after an orderly `poweroff` through init', async () => {
    guest = await bootLinux();
    guest.type('poweroff');
    expect(await guest.exited).toMatchObject({ reason: 'poweroff', code: 0 });
    expect(guest.output()).toMatch(/reboot: Power down/);
  });

  it('ends with reason reset on `reboot -f`', async () => {
    guest = await bootLinux();
    guest.type('reboot -f');
    expect(await guest.exited).toMatchObject({ reason: 'reset' });
  });

  it('ends with reason panic when the kernel panics, after printing the panic', async () => {
    // An init that exits at once: the kernel panics with "Attempted to kill init!".
    guest = await bootLinux({ cmdline: `${GUEST_CMDLINE} rdinit=/bin/false` }, { waitForShell: false });
    const exit = await guest.exited;
    expect(exit.reason).toBe('panic');
    expect(guest.output()).toMatch(/Kernel panic - not syncing: Attempted to kill init!/);
  });

  it('boots the bzImage as well as the vmlinux', async () => {
    guest = await bootLinux({ kernel: builtGuest().bzImage });
    expect(await guest.run('uname -r')).toBe(`${builtGuest().release}\n`);
  });
});

describe('smol boot with no --kernel', () => {
  it('boots the built guest and takes piped commands: printf … | smol boot --cpus 2', async () => {
    const child = spawn(process.execPath, [path.join(root, 'bin/smol.js'), 'boot', '--cpus', '2'], {
      cwd: root,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    // Written at once, before the guest has booted: the VMM holds it until the guest's console is ready.
    child.stdin.end('uname -r\nnproc\npoweroff -f\n');
    const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect({ status, stderr }, `the guest's console said:\n${stdout.slice(-3000)}`).toEqual({ status: 0, stderr: '' });
    const lines = stdout.split(/\r?\n/);
    expect(lines).toContain(builtGuest().release);
    expect(lines).toContain('2');
  });

  it('exits non-zero and says so when the guest kernel panics', async () => {
    const argv = ['boot', '--cmdline', `${GUEST_CMDLINE} rdinit=/bin/false`];
    const child = spawn(process.execPath, [path.join(root, 'bin/smol.js'), ...argv], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect({ status, stderr }, `the guest's console said:\n${stdout.slice(-3000)}`).toEqual({
      status: 3,
      stderr: 'smol: the guest kernel panicked\n',
    });
  });
});
