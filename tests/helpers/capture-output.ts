// Captures what a command writes to stdout and stderr during a unit test; vi.restoreAllMocks() puts them back.
import { vi } from 'vitest';

export function captureOutput(): { out: () => string; err: () => string } {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => (out.push(String(chunk)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => (err.push(String(chunk)), true));
  return { out: () => out.join(''), err: () => err.join('') };
}
