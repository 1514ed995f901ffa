import { describe, expect, it } from 'vitest';
import { kvmImplementation, linuxGuestsVerdict } from './linux-guests.js';

describe('whether Linux guests run on this host (smol doctor and GET /api/v1/host)', () => {
  const kvm = { present: true, usable: true, implementation: 'hardware' as const };

  it('says yes on hardware KVM, and no on PVM, without /dev/kvm, or when it cannot be opened', () => {
    expect(linuxGuestsVerdict(kvm)).toEqual({ ok: true, message: 'Hardware KVM: Linux guests run at native speed' });
    expect(linuxGuestsVerdict({ ...kvm, implementation: 'pvm' })).toMatchObject({
      ok: false,
      message: expect.stringMatching(/^This host’s KVM is PVM .*Linux guests do not boot.*KVM lab$/),
    });
    expect(linuxGuestsVerdict({ ...kvm, present: false, usable: false })).toMatchObject({
      ok: false,
      message: expect.stringMatching(/^No \/dev\/kvm/),
    });
    expect(
      linuxGuestsVerdict({ ...kvm, usable: false, error: 'cannot open /dev/kvm: EACCES', implementation: 'unknown' }),
    ).toEqual({ ok: false, message: 'cannot open /dev/kvm: EACCES: no VM can run on this host' });
    expect(linuxGuestsVerdict({ ...kvm, implementation: 'unknown' }).ok).toBe(true);
  });

  it('tells PVM from hardware KVM by the loaded modules, as the C probe does', () => {
    const modules =
      (...names: string[]) =>
      (file: string) =>
        names.some((name) => file === `/sys/module/${name}`);
    expect(kvmImplementation(true, modules('kvm', 'kvm_pvm'))).toBe('pvm');
    expect(kvmImplementation(true, modules('kvm', 'kvm_amd'))).toBe('hardware');
    expect(kvmImplementation(true, modules('kvm', 'kvm_intel'))).toBe('hardware');
    expect(kvmImplementation(true, modules('kvm'))).toBe('unknown');
    expect(kvmImplementation(false, modules('kvm_pvm'))).toBe('unknown');
  });
});
