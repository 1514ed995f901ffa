import { describe, expect, it } from 'vitest';
import { parseDoctorArgs } from './doctor.js';

describe('smol doctor arguments', () => {
  it('prints for people by default and JSON with --json', () => {
    expect(parseDoctorArgs([])).toEqual({ json: false });
    expect(parseDoctorArgs(['--json'])).toEqual({ json: true });
  });

  it('rejects unknown flags and arguments', () => {
    expect(() => parseDoctorArgs(['--verbose'])).toThrow('unknown option --verbose');
    expect(() => parseDoctorArgs(['kvm'])).toThrow('unexpected argument kvm');
    expect(() => parseDoctorArgs(['--json=yes'])).toThrow('--json takes no value');
  });

  it('has --help', () => {
    expect(parseDoctorArgs(['--help'])).toBe('help');
  });
});
