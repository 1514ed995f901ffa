import { describe, expect, it } from 'vitest';
import type { HostFacts } from './host-facts.js';
import { buildDoctorReport, type Check } from './report.js';

const ALL_CAPS = [
  'IRQCHIP',
  'USER_MEMORY',
  'SET_TSS_ADDR',
  'PIT2',
  'EXT_CPUID',
  'IMMEDIATE_EXIT',
  'IOEVENTFD',
  'IRQFD',
  'XSAVE',
  'XCRS',
  'KVMCLOCK_CTRL',
  'DIRTY_LOG_RING',
];
const REQUIRED = ['IRQCHIP', 'USER_MEMORY', 'SET_TSS_ADDR', 'PIT2', 'EXT_CPUID', 'IMMEDIATE_EXIT'];

/** A machine where everything is in place, with hardware KVM; each test changes what it is about. */
function healthyHost(): HostFacts {
  return {
    kvm: {
      present: true,
      usable: true,
      apiVersion: 12,
      implementation: 'hardware',
      capabilities: Object.fromEntries(ALL_CAPS.map((cap) => [cap, true])),
      required: REQUIRED,
      probedBy: 'native',
    },
    pvmModule: false,
    native: { loaded: true, path: '/smol/native/build/Release/smol.node' },
    tinyGuests: { dir: '/smol/native/out/guests', files: ['echo.elf', 'hello.elf'] },
    linuxGuest: {
      dir: '/cache/smol-studio/guest',
      kernel: '/cache/smol-studio/guest/kernel-abc/vmlinux',
      initramfs: '/cache/smol-studio/guest/initramfs-def.cpio',
    },
    electron: { installed: true, binary: '/smol/node_modules/electron/dist/electron' },
    chromium: { path: '/usr/bin/chromium', present: true },
  };
}

const check = (checks: Check[], name: string) => checks.find((c) => c.name === name);

describe('smol doctor report', () => {
  it('a healthy hardware-KVM machine passes every check', () => {
    const report = buildDoctorReport(healthyHost());
    expect(report.checks.map((c) => [c.name, c.status])).toEqual([
      ['kvm', 'ok'],
      ['kvm-implementation', 'ok'],
      ['kvm-capabilities', 'ok'],
      ['native', 'ok'],
      ['tiny-guests', 'ok'],
      ['linux-guest', 'ok'],
      ['electron', 'ok'],
      ['chromium', 'ok'],
    ]);
    expect(report.kvm).toMatchObject({ present: true, usable: true, implementation: 'hardware', apiVersion: 12 });
    expect(report.kvm.missing).toEqual([]);
    expect(report.assets.linuxGuest).toMatchObject({
      kernel: '/cache/smol-studio/guest/kernel-abc/vmlinux',
      initramfs: '/cache/smol-studio/guest/initramfs-def.cpio',
    });
  });

  it('a PVM guest without /dev/kvm is told to use the KVM lab', () => {
    const facts = healthyHost();
    facts.kvm = {
      present: false,
      usable: false,
      error: 'cannot open /dev/kvm: No such file or directory',
      implementation: 'pvm',
      capabilities: Object.fromEntries(ALL_CAPS.map((cap) => [cap, false])),
      required: REQUIRED,
      probedBy: 'native',
    };
    facts.pvmModule = true;
    const report = buildDoctorReport(facts);
    expect(check(report.checks, 'kvm')).toEqual({
      name: 'kvm',
      status: 'fail',
      message: 'no /dev/kvm: this machine is itself a PVM guest; run VMs in the KVM lab: npm run lab -- …',
      fix: 'npm run lab -- <command>',
    });
    expect(report.kvm.pvmGuest).toBe(true);
    expect(report.kvm.missing).toBeNull();
    expect(check(report.checks, 'kvm-capabilities')).toBeUndefined();
  });

  it('PVM on the host is a warning: tiny guests only, Linux guests in the lab', () => {
    const facts = healthyHost();
    facts.kvm.implementation = 'pvm';
    facts.pvmModule = true;
    const implementation = check(buildDoctorReport(facts).checks, 'kvm-implementation');
    expect(implementation?.status).toBe('warn');
    expect(implementation?.message).toMatch(/tiny guests only, Linux guests are too slow/);
    expect(implementation?.fix).toBe('npm run lab -- <command>');
  });

  it('a machine without KVM at all is told to load the module', () => {
    const facts = healthyHost();
    facts.kvm = { present: false, usable: false, implementation: 'unknown', capabilities: {}, probedBy: 'native' };
    const kvm = check(buildDoctorReport(facts).checks, 'kvm');
    expect(kvm?.status).toBe('fail');
    expect(kvm?.fix).toMatch(/modprobe kvm_intel/);
  });

  it('a /dev/kvm the user may not open points at the kvm group', () => {
    const facts = healthyHost();
    facts.kvm.usable = false;
    facts.kvm.error = 'cannot open /dev/kvm: Permission denied';
    delete facts.kvm.apiVersion;
    const kvm = check(buildDoctorReport(facts).checks, 'kvm');
    expect(kvm).toMatchObject({ status: 'fail', message: 'cannot open /dev/kvm: Permission denied' });
    expect(kvm?.fix).toMatch(/usermod -aG kvm/);
  });

  it('a missing required capability fails and names it', () => {
    const facts = healthyHost();
    facts.kvm.capabilities.IMMEDIATE_EXIT = false;
    facts.kvm.usable = false;
    facts.kvm.error = 'KVM lacks the capability KVM_CAP_IMMEDIATE_EXIT';
    const report = buildDoctorReport(facts);
    expect(check(report.checks, 'kvm-capabilities')).toMatchObject({
      status: 'fail',
      message: 'missing IMMEDIATE_EXIT; the VMM cannot run without IMMEDIATE_EXIT',
    });
    expect(report.kvm.missing).toEqual(['IMMEDIATE_EXIT']);
  });

  it('a missing capability for later features only warns', () => {
    const facts = healthyHost();
    facts.kvm.capabilities.DIRTY_LOG_RING = false;
    expect(check(buildDoctorReport(facts).checks, 'kvm-capabilities')).toMatchObject({
      status: 'warn',
      message: 'missing DIRTY_LOG_RING: virtio devices, snapshots or dirty tracking will fail',
    });
  });

  it('a capability the probe did not report counts as missing', () => {
    const facts = healthyHost();
    delete facts.kvm.capabilities.XCRS;
    expect(buildDoctorReport(facts).kvm.missing).toEqual(['XCRS']);
  });

  it('a native module that does not load fails with the build command, and KVM is still checked', () => {
    const facts = healthyHost();
    facts.native = {
      loaded: false,
      path: '/x/smol.node',
      error: 'native module not built: /x/smol.node does not exist',
    };
    facts.kvm = { present: true, usable: true, implementation: 'unknown', capabilities: {}, probedBy: 'filesystem' };
    const report = buildDoctorReport(facts);
    expect(check(report.checks, 'native')).toMatchObject({ status: 'fail', fix: 'npm run build:native' });
    expect(check(report.checks, 'kvm')?.status).toBe('ok');
    expect(check(report.checks, 'kvm-implementation')).toMatchObject({ status: 'warn', fix: 'npm run build:native' });
    expect(check(report.checks, 'kvm-capabilities')).toMatchObject({ status: 'warn', fix: 'npm run build:native' });
  });

  it('missing guest assets are warnings with the command that builds them', () => {
    const facts = healthyHost();
    facts.tinyGuests.files = [];
    facts.linuxGuest.initramfs = null;
    const report = buildDoctorReport(facts);
    expect(check(report.checks, 'tiny-guests')).toMatchObject({ status: 'warn', fix: 'make -C native guests' });
    expect(check(report.checks, 'linux-guest')).toMatchObject({
      status: 'warn',
      message: 'no initramfs in /cache/smol-studio/guest',
      fix: 'smol guest build',
    });
  });

  it('without Electron the app runs in web mode, which is a warning', () => {
    const facts = healthyHost();
    facts.electron = { installed: false };
    expect(check(buildDoctorReport(facts).checks, 'electron')).toEqual({
      name: 'electron',
      status: 'warn',
      message: 'not installed; the app runs in web mode',
      fix: 'npm install --save-dev electron',
    });
  });

  it('without Chromium the fix is to install it', () => {
    const facts = healthyHost();
    facts.chromium.present = false;
    expect(check(buildDoctorReport(facts).checks, 'chromium')).toMatchObject({
      status: 'warn',
      fix: 'apt-get install chromium',
    });
  });
});
