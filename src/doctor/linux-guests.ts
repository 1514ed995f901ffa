// Can this host run Linux guests? `smol doctor`'s verdict on it, and the same verdict for the engine's API
// (`GET /api/v1/host`), so the app can say so before a Linux guest is started and mark the examples it cannot run
// (docs/ui.md, "Hosts that cannot run Linux guests"). It reads only files (/dev/kvm, /sys/module), never the native
// module: the engine process does not load it (ARCHITECTURE.md), and the C probe decides the implementation from the
// same files (native/vmm/kvm_probe.c).
import { closeSync, existsSync, openSync } from 'node:fs';
import type { KvmImplementation, KvmProbe } from '../vmm/native.js';

export const DEV_KVM = '/dev/kvm';

export interface LinuxGuestsVerdict {
  /** false: a Linux guest will not get through its boot here (no usable KVM, or KVM in software). */
  ok: boolean;
  /** One line a person can act on. */
  message: string;
}

/** What kind of KVM the loaded modules are, as kvm_probe.c decides it. */
export function kvmImplementation(present: boolean, exists: (file: string) => boolean = existsSync): KvmImplementation {
  if (!present) return 'unknown'; // a kvm module may be loaded without providing /dev/kvm (a PVM guest's is)
  if (exists('/sys/module/kvm_pvm')) return 'pvm';
  if (exists('/sys/module/kvm_intel') || exists('/sys/module/kvm_amd')) return 'hardware';
  return 'unknown';
}

/** /dev/kvm probed by opening it, without the native module (no capabilities then). */
export function probeKvmFromFiles(): KvmProbe {
  const present = existsSync(DEV_KVM);
  const probe: KvmProbe = { present, usable: false, implementation: kvmImplementation(present), capabilities: {} };
  try {
    closeSync(openSync(DEV_KVM, 'r+'));
    probe.usable = true;
  } catch (err) {
    probe.error = `cannot open ${DEV_KVM}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
  }
  return probe;
}

export function linuxGuestsVerdict(kvm: Pick<KvmProbe, 'present' | 'usable' | 'implementation' | 'error'>) {
  const verdict = (ok: boolean, message: string): LinuxGuestsVerdict => ({ ok, message });
  if (!kvm.present) return verdict(false, `No ${DEV_KVM}: no VM can run on this host; run them in the KVM lab`);
  if (!kvm.usable) return verdict(false, `${kvm.error ?? `cannot open ${DEV_KVM}`}: no VM can run on this host`);
  if (kvm.implementation === 'pvm') {
    return verdict(
      false,
      'This host’s KVM is PVM (KVM in software, no hardware virtualization): tiny guests run, Linux guests do not ' +
        'boot (too slow, or a KVM internal error on the way); run them in the KVM lab',
    );
  }
  if (kvm.implementation === 'hardware') return verdict(true, 'Hardware KVM: Linux guests run at native speed');
  return verdict(true, 'KVM of an unknown kind (neither hardware KVM nor PVM was recognized): Linux guests may run');
}

/** The engine's answer to `GET /api/v1/host`. */
export function hostReport() {
  const kvm = probeKvmFromFiles();
  return {
    kvm: { present: kvm.present, usable: kvm.usable, implementation: kvm.implementation, error: kvm.error ?? null },
    linuxGuests: linuxGuestsVerdict(kvm),
  };
}
