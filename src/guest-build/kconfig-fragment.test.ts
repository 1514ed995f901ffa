import { describe, expect, it } from 'vitest';
import { findDroppedOptions, formatDroppedOptions, parseKconfig } from './kconfig-fragment.js';

const FRAGMENT = `# a comment
CONFIG_SMP=y
CONFIG_NR_CPUS=64
CONFIG_LOCALVERSION="-smol"
CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=y
# CONFIG_ACPI is not set
# CONFIG_PCI is not set
`;

const FINAL_CONFIG = `#
# Automatically generated file; DO NOT EDIT.
#
CONFIG_SMP=y
CONFIG_NR_CPUS=64
CONFIG_LOCALVERSION="-smol"
CONFIG_VIRTIO_MMIO=y
# CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES is not set
# CONFIG_ACPI is not set
`;

describe('kernel config fragment check', () => {
  it('reads set, quoted and "is not set" options with their line numbers', () => {
    expect(parseKconfig(FRAGMENT)).toEqual([
      { name: 'CONFIG_SMP', value: 'y', line: 2 },
      { name: 'CONFIG_NR_CPUS', value: '64', line: 3 },
      { name: 'CONFIG_LOCALVERSION', value: '-smol', line: 4 },
      { name: 'CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES', value: 'y', line: 5 },
      { name: 'CONFIG_ACPI', value: 'n', line: 6 },
      { name: 'CONFIG_PCI', value: 'n', line: 7 },
    ]);
  });

  it('an option olddefconfig turned off is reported as dropped, with its fragment line', () => {
    expect(findDroppedOptions(FRAGMENT, FINAL_CONFIG)).toEqual([
      { name: 'CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES', wanted: 'y', got: 'n', line: 5 },
    ]);
  });

  it('an option missing from the final .config (its menu is off) is dropped too', () => {
    const final = FINAL_CONFIG.replace('CONFIG_NR_CPUS=64\n', '');
    expect(findDroppedOptions(FRAGMENT, final).map((d) => [d.name, d.got])).toEqual([
      ['CONFIG_NR_CPUS', null],
      ['CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES', 'n'],
    ]);
  });

  it('a numeric value that olddefconfig clamped is dropped', () => {
    const final = FINAL_CONFIG.replace('CONFIG_NR_CPUS=64', 'CONFIG_NR_CPUS=8');
    expect(findDroppedOptions(FRAGMENT, final)).toContainEqual({
      name: 'CONFIG_NR_CPUS',
      wanted: '64',
      got: '8',
      line: 3,
    });
  });

  it('an option asked off that something selected on is reported', () => {
    const final = FINAL_CONFIG.replace('# CONFIG_ACPI is not set', 'CONFIG_ACPI=y');
    expect(findDroppedOptions(FRAGMENT, final)).toContainEqual({ name: 'CONFIG_ACPI', wanted: 'n', got: 'y', line: 6 });
  });

  it('a fragment that survived whole has nothing dropped', () => {
    const final = FINAL_CONFIG.replace(
      '# CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES is not set',
      'CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=y',
    );
    expect(findDroppedOptions(FRAGMENT, final)).toEqual([]);
  });

  it('the report lists each dropped option with what was wanted, what came out and where', () => {
    const text = formatDroppedOptions(
      findDroppedOptions(FRAGMENT, FINAL_CONFIG.replace('CONFIG_NR_CPUS=64\n', '')),
      'smol.config',
    );
    expect(text).toBe(
      [
        '  CONFIG_NR_CPUS: wanted 64, got absent (smol.config:3)',
        '  CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES: wanted y, got not set (smol.config:5)',
      ].join('\n'),
    );
  });
});
