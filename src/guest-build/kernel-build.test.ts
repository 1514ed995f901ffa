import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { PackageTools } from './host-packages.js';
import { findDroppedOptions } from './kconfig-fragment.js';
import { findKernelSource, KERNEL_FRAGMENT, kernelHash } from './kernel-build.js';

const SOURCE = { package: 'linux-source-6.1', version: '6.1.192-3' };

function fakeTools(depends: string, versions: Record<string, string>): PackageTools {
  return {
    installedVersions: (names) => new Map(names.filter((n) => versions[n]).map((n) => [n, versions[n]!])),
    depends: (pkg) => (pkg === 'linux-source' ? depends : ''),
    canInstall: false,
    install: () => {},
  };
}

describe('guest kernel cache key', () => {
  const fragment = readFileSync(KERNEL_FRAGMENT, 'utf8');

  it('is the same for the same fragment and source', () => {
    expect(kernelHash({ fragment, source: SOURCE })).toBe(
      kernelHash({ fragment: Buffer.from(fragment), source: SOURCE }),
    );
    expect(kernelHash({ fragment, source: SOURCE })).toMatch(/^[0-9a-f]{16}$/);
  });

  it('changes when the fragment changes, even by one option', () => {
    const edited = fragment.replace('CONFIG_NR_CPUS=64', 'CONFIG_NR_CPUS=32');
    expect(edited).not.toBe(fragment);
    expect(kernelHash({ fragment: edited, source: SOURCE })).not.toBe(kernelHash({ fragment, source: SOURCE }));
  });

  it('changes when Debian ships a new linux-source', () => {
    const newer = { ...SOURCE, version: '6.1.193-1' };
    expect(kernelHash({ fragment, source: newer })).not.toBe(kernelHash({ fragment, source: SOURCE }));
  });
});

describe('guest kernel source', () => {
  it('is the versioned package the linux-source meta package depends on', () => {
    const tools = fakeTools('linux-source-6.1 (= 6.1.192-3)', { 'linux-source-6.1': '6.1.192-3' });
    expect(findKernelSource(tools, () => true)).toEqual({ ...SOURCE, tarball: '/usr/src/linux-source-6.1.tar.xz' });
  });

  it('a missing tarball names the package to reinstall', () => {
    const tools = fakeTools('linux-source-6.1 (= 6.1.192-3)', { 'linux-source-6.1': '6.1.192-3' });
    expect(() => findKernelSource(tools, () => false)).toThrow(
      '/usr/src/linux-source-6.1.tar.xz is missing; reinstall it with: apt-get install --reinstall linux-source-6.1',
    );
  });

  it('a meta package without a versioned dependency is an error that says so', () => {
    expect(() => findKernelSource(fakeTools('', {}))).toThrow(/does not depend on a linux-source-X\.Y package/);
  });
});

describe('the smol.config fragment', () => {
  it('asks for what the VMM platform needs', () => {
    const fragment = readFileSync(KERNEL_FRAGMENT, 'utf8');
    const required = [
      'CONFIG_X86_MPPARSE=y',
      'CONFIG_SERIAL_8250_CONSOLE=y',
      'CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=y',
      // Power-off through the ACPI sleep register, panics through pvpanic, COM1 from the DSDT (docs/vmm.md).
      'CONFIG_ACPI=y',
      'CONFIG_ACPI_REDUCED_HARDWARE_ONLY=y',
      'CONFIG_PVPANIC_MMIO=y',
      'CONFIG_SERIAL_8250_PNP=y',
    ];
    // Checked as a .config would be: everything the platform needs is in the fragment, so the build verifies it.
    expect(findDroppedOptions(required.join('\n'), fragment)).toEqual([]);
    expect(fragment).toMatch(/^# CONFIG_VIRTIO_PCI is not set$/m);
    expect(fragment).toMatch(/^# CONFIG_MODULES is not set$/m);
  });
});
