// Tier 2: the tiny guests booted through the binding on a real /dev/kvm (docs/vmm.md has the contract they test).
import { describe, expect, it } from 'vitest';
import { loadNative } from '../../src/vmm/native.js';
import { runGuest, startGuest } from './guests.js';

describe('booting a tiny guest', () => {
  it('delivers its serial output and ends with reset when it pulses the i8042', async () => {
    const { output, exit } = await runGuest('hello', { cmdline: 'quiet answer=42' });
    expect(output).toContain('smol: hello from a tiny guest\n');
    expect(output).toContain('cmdline: quiet answer=42\n');
    expect(output).toContain('e820: 3 entries\n');
    expect(exit.reason).toBe('reset');
  });

  it('ends with reason poweroff and the code the guest wrote to the debug-exit port', async () => {
    const { exit } = await runGuest('hello', { cmdline: 'exit=7' });
    expect(exit).toMatchObject({ reason: 'poweroff', code: 7 });
  });

  it('ends with reason shutdown when the guest triple-faults', async () => {
    const { output, exit } = await runGuest('hello', { cmdline: 'fault' });
    expect(output).toContain('hello from a tiny guest');
    if (loadNative().kvmProbe().implementation === 'pvm') {
      // PVM (KVM in software, on our build machines) reports a guest's triple fault as an internal error rather
      // than KVM_EXIT_SHUTDOWN; the VM still ends, and says why.
      expect(exit).toMatchObject({ reason: 'error', message: expect.stringMatching(/KVM internal error/) });
      return;
    }
    expect(exit.reason).toBe('shutdown');
    expect(exit.message).toMatch(/triple-fault/);
  });

  it('powers off with reason poweroff and code 0 through the ACPI sleep register the FADT names', async () => {
    const { output, exit } = await runGuest('hello', { cmdline: 'acpi-poweroff' });
    expect(output).toContain('acpi: sleep control port 0x600, status port 0x600\n');
    expect(output).toContain('acpi: WAK_STS clear, entering S5\n'); // the WAK_STS write before S5 did not end it
    expect(exit).toEqual({ reason: 'poweroff', code: 0, message: 'the guest powered off (ACPI S5)' });
  });

  it('ends with reason panic when the guest reports a panic on the pvpanic port', async () => {
    const { output, exit } = await runGuest('hello', { cmdline: 'panic' });
    expect(output).toContain('pvpanic: events 0x1\n');
    expect(exit).toEqual({ reason: 'panic', code: 0, message: 'the guest kernel panicked' });
  });

  it('gives RAM above 3 GiB its own e820 entry', async () => {
    const { output, exit } = await runGuest('hello', { memoryMiB: 3 * 1024 + 64 });
    expect(output).toContain('e820: 4 entries\n');
    expect(exit.reason).toBe('reset');
  });

  it('echoes console input back, woken only by UART receive interrupts', async () => {
    const guest = await startGuest('echo');
    await guest.waitFor(/echo: ready\n/);
    expect(guest.vm.write('hello, guest\r\n')).toBe(14);
    await guest.waitFor(/hello, guest\r\n/);
    guest.vm.write('second line\n');
    await guest.waitFor(/second line\n/);
    guest.vm.write('\x04');
    const exit = await guest.vm.exited;
    expect(exit.reason).toBe('reset');
    expect(guest.output()).toMatch(/echo: bye after [1-9]\d* interrupts/);
  });

  it('echoes an 8 KiB paste without losing or reordering bytes', async () => {
    const guest = await startGuest('echo');
    await guest.waitFor(/echo: ready\n/);
    let paste = '';
    for (let i = 0; paste.length < 8 * 1024; i++) paste += `line ${i} of the paste\n`;
    expect(guest.vm.write(paste)).toBe(paste.length);
    await guest.waitFor(/line \d+ of the paste\n$/, 120_000);
    await guest.waitFor(new RegExp(paste.slice(-40).replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$'), 120_000);
    expect(guest.output()).toBe('echo: ready\n' + paste);
    await guest.vm.kill();
  });

  it('brings up a second vCPU with INIT-SIPI and sees both in the MP table', async () => {
    const { output, exit } = await runGuest('smp', { cpus: 2 });
    expect(output).toContain('smp: the MP table lists 2 cpus\n');
    expect(output).toContain('smp: cpu 1 up\n');
    expect(output).toContain('smp: 2 of 2 cpus up\n');
    expect(exit).toMatchObject({ reason: 'poweroff', code: 0 });
  });

  it('runs four vCPUs', async () => {
    const { output, exit } = await runGuest('smp', { cpus: 4 });
    expect(output).toContain('smp: 4 of 4 cpus up\n');
    expect(exit).toMatchObject({ reason: 'poweroff', code: 0 });
  });
});
