// `smol doctor`'s verdicts: a pure function from host facts to checks (status, one-line message, the fixing command).
import type { HostFacts } from './host-facts.js';
import { linuxGuestsVerdict, type LinuxGuestsVerdict } from './linux-guests.js';

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface Check {
  name: string;
  status: CheckStatus;
  message: string;
  fix?: string;
}

/**
 * KVM capabilities the VMM cannot boot without (irqchip, PIT, memory slots, CPUID, pause and kill). The native probe
 * says which it requires; this list is used when it does not.
 */
export const REQUIRED_CAPABILITIES = ['USER_MEMORY', 'IRQCHIP', 'PIT2', 'SET_TSS_ADDR', 'EXT_CPUID', 'IMMEDIATE_EXIT'];
/** Capabilities virtio devices, snapshots and dirty tracking use; without them those features fail. */
export const FEATURE_CAPABILITIES = ['IOEVENTFD', 'IRQFD', 'XSAVE', 'XCRS', 'KVMCLOCK_CTRL', 'DIRTY_LOG_RING'];

const LAB_FIX = 'npm run lab -- <command>';
const NATIVE_FIX = 'npm run build:native';
const NEWER_KERNEL_FIX = 'run a newer host kernel (Linux 5.10 or later)';

export interface DoctorReport {
  kvm: {
    present: boolean;
    usable: boolean;
    implementation: HostFacts['kvm']['implementation'];
    apiVersion: number | null;
    capabilities: Record<string, boolean>;
    /** Capabilities the VMM uses that KVM lacks; null when /dev/kvm could not be opened to ask. */
    missing: string[] | null;
    error: string | null;
    probedBy: HostFacts['kvm']['probedBy'];
    pvmGuest: boolean;
  };
  /** Whether Linux guests boot here: the verdict the engine's `GET /api/v1/host` gives the app too. */
  linuxGuests: LinuxGuestsVerdict;
  native: HostFacts['native'];
  assets: {
    tinyGuests: HostFacts['tinyGuests'];
    linuxGuest: { dir: string; kernel: string | null; initramfs: string | null };
  };
  electron: HostFacts['electron'];
  chromium: HostFacts['chromium'];
  checks: Check[];
}

function kvmCheck(kvm: HostFacts['kvm'], pvmGuest: boolean): Check {
  const name = 'kvm';
  if (kvm.usable) {
    const api = kvm.apiVersion === undefined ? '' : ` (KVM API ${kvm.apiVersion})`;
    return { name, status: 'ok', message: `/dev/kvm is present and usable${api}` };
  }
  if (pvmGuest) {
    const message = `no /dev/kvm: this machine is itself a PVM guest; run VMs in the KVM lab: npm run lab -- …`;
    return { name, status: 'fail', message, fix: LAB_FIX };
  }
  if (!kvm.present) {
    const message = 'no /dev/kvm: KVM is not enabled (no kvm module, or virtualization is off in firmware/hypervisor)';
    return { name, status: 'fail', message, fix: 'sudo modprobe kvm_intel || sudo modprobe kvm_amd' };
  }
  const error = kvm.error ?? 'cannot open /dev/kvm';
  if (/lacks the capability/.test(error)) return { name, status: 'fail', message: error, fix: NEWER_KERNEL_FIX };
  if (/EACCES|permission denied/i.test(error)) {
    return { name, status: 'fail', message: error, fix: 'sudo usermod -aG kvm "$USER" (then log in again)' };
  }
  return { name, status: 'fail', message: error };
}

function implementationCheck(kvm: HostFacts['kvm']): Check {
  const name = 'kvm-implementation';
  switch (kvm.implementation) {
    case 'hardware':
      return { name, status: 'ok', message: 'hardware KVM: guests run at native speed' };
    case 'pvm':
      return {
        name,
        status: 'warn',
        message:
          'PVM (KVM in software, no hardware virtualization): tiny guests only, Linux guests are too slow; use the lab',
        fix: LAB_FIX,
      };
    default:
      return kvm.probedBy === 'filesystem'
        ? { name, status: 'warn', message: 'unknown: the native module did not load to ask KVM', fix: NATIVE_FIX }
        : { name, status: 'warn', message: 'unknown: neither hardware KVM nor PVM was recognized' };
  }
}

/** Required first, then every other capability the VMM uses or the probe reported. */
function capabilityNames(kvm: HostFacts['kvm']): { required: string[]; all: string[] } {
  const required = kvm.required ?? REQUIRED_CAPABILITIES;
  return { required, all: [...new Set([...required, ...FEATURE_CAPABILITIES, ...Object.keys(kvm.capabilities)])] };
}

function capabilitiesCheck(kvm: HostFacts['kvm'], missing: string[]): Check {
  const name = 'kvm-capabilities';
  if (kvm.probedBy === 'filesystem') {
    return { name, status: 'warn', message: 'not checked: the native module did not load', fix: NATIVE_FIX };
  }
  const { required, all } = capabilityNames(kvm);
  const fix = NEWER_KERNEL_FIX;
  const missingRequired = missing.filter((cap) => required.includes(cap));
  if (missingRequired.length > 0) {
    const message = `missing ${missing.join(', ')}; the VMM cannot run without ${missingRequired.join(', ')}`;
    return { name, status: 'fail', message, fix };
  }
  if (missing.length > 0) {
    const message = `missing ${missing.join(', ')}: virtio devices, snapshots or dirty tracking will fail`;
    return { name, status: 'warn', message, fix };
  }
  return {
    name,
    status: 'ok',
    message: `all ${all.length} that the VMM uses are present (${required.join(', ')} required)`,
  };
}

export function buildDoctorReport(facts: HostFacts): DoctorReport {
  const { kvm } = facts;
  const pvmGuest = !kvm.present && facts.pvmModule;
  const missing = capabilityNames(kvm).all.filter((cap) => kvm.capabilities[cap] !== true);
  // The native probe lists capabilities whenever /dev/kvm opened, even when a missing one makes KVM unusable.
  const opened = kvm.probedBy === 'native' ? kvm.apiVersion !== undefined : kvm.usable;
  const { kernel: linuxKernel, initramfs } = facts.linuxGuest;

  const checks: Check[] = [kvmCheck(kvm, pvmGuest)];
  if (kvm.present) checks.push(implementationCheck(kvm));
  if (opened) checks.push(capabilitiesCheck(kvm, missing));
  checks.push(
    facts.native.loaded
      ? { name: 'native', status: 'ok', message: `loaded ${facts.native.path}` }
      : { name: 'native', status: 'fail', message: facts.native.error ?? 'did not load', fix: NATIVE_FIX },
  );
  const tiny = facts.tinyGuests;
  checks.push(
    tiny.files.length > 0
      ? { name: 'tiny-guests', status: 'ok', message: `${tiny.files.join(', ')} in ${tiny.dir}` }
      : { name: 'tiny-guests', status: 'warn', message: `none built in ${tiny.dir}`, fix: 'make -C native guests' },
  );
  const { dir } = facts.linuxGuest;
  checks.push(
    linuxKernel && initramfs
      ? { name: 'linux-guest', status: 'ok', message: `${linuxKernel} and ${initramfs}` }
      : {
          name: 'linux-guest',
          status: 'warn',
          message: `no ${linuxKernel ? 'initramfs' : initramfs ? 'kernel' : 'kernel or initramfs'} in ${dir}`,
          fix: 'smol guest build',
        },
  );
  const { electron } = facts;
  checks.push(
    electron.binary
      ? { name: 'electron', status: 'ok', message: `binary at ${electron.binary}` }
      : electron.installed
        ? {
            name: 'electron',
            status: 'warn',
            message: `installed but its binary is missing (${electron.error ?? 'unknown'}); the app runs in web mode`,
            fix: 'node node_modules/electron/install.js',
          }
        : {
            name: 'electron',
            status: 'warn',
            message: 'not installed; the app runs in web mode',
            fix: 'npm install --save-dev electron',
          },
  );
  const { chromium } = facts;
  checks.push(
    chromium.present
      ? { name: 'chromium', status: 'ok', message: `found at ${chromium.path}` }
      : {
          name: 'chromium',
          status: 'warn',
          message: `not found at ${chromium.path}; browser tests cannot run`,
          fix: 'apt-get install chromium',
        },
  );

  return {
    kvm: {
      present: kvm.present,
      usable: kvm.usable,
      implementation: kvm.implementation,
      apiVersion: kvm.apiVersion ?? null,
      capabilities: kvm.capabilities,
      missing: opened ? missing : null,
      error: kvm.error ?? null,
      probedBy: kvm.probedBy,
      pvmGuest,
    },
    linuxGuests: linuxGuestsVerdict(kvm),
    native: facts.native,
    assets: { tinyGuests: tiny, linuxGuest: { dir, kernel: linuxKernel, initramfs } },
    electron,
    chromium,
    checks,
  };
}
