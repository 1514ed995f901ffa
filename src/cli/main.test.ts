import { afterEach, describe, expect, it, vi } from 'vitest';
import { captureOutput } from '../../tests/helpers/capture-output.js';
import { main } from './main.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('smol command line', () => {
  it('an unknown command is one error line and status 2', async () => {
    const output = captureOutput();
    expect(await main(['frobnicate'])).toBe(2);
    expect(output.err()).toMatch(
      /^smol: unknown command frobnicate \(commands: boot, doctor, bench\b.*\); see smol --help\n$/,
    );
  });

  it('a usage error names the command and where its help is', async () => {
    const output = captureOutput();
    expect(await main(['boot', '--kernel', 'k', '--cpus', '0'])).toBe(2);
    expect(output.err()).toBe('smol: boot: --cpus must be an integer from 1 to 64 (got 0); see smol boot --help\n');
  });

  it('a kernel that does not exist fails with status 1 before any VM is made', async () => {
    const output = captureOutput();
    expect(await main(['boot', '--kernel', '/nonexistent/vmlinux'])).toBe(1);
    expect(output.err()).toBe('smol: kernel /nonexistent/vmlinux: no such file\n');
  });

  it('every command has --help on stdout with status 0', async () => {
    const commands = ['boot', 'doctor', 'bench', 'guest', 'validate', 'up', 'ls', 'logs', 'console', 'checkpoint'];
    commands.push('fork', 'restore', 'label', 'snapshots', 'stop', 'start', 'pause', 'resume', 'reset');
    commands.push('rm', 'serve', 'engine');
    for (const command of commands) {
      const output = captureOutput();
      expect(await main([command, '--help'])).toBe(0);
      expect(output.out()).toMatch(new RegExp(`^Usage: smol ${command}`));
      vi.restoreAllMocks();
    }
  });

  it('the command list keeps a gap between each name and its summary', async () => {
    const output = captureOutput();
    expect(await main(['--help'])).toBe(0);
    const lines = output
      .out()
      .split('\n')
      .filter((line) => /^ {2}\S/.test(line));
    const summaryColumn = new Set(lines.map((line) => /^ {2}\S+ {2,}/.exec(line)?.[0].length));
    expect(lines.length).toBeGreaterThan(15);
    expect([...summaryColumn]).toHaveLength(1); // every summary starts in the same column, 2+ spaces after the name
    expect(output.out()).toMatch(/^ {2}validate {2,}check a Smolfile/m);
  });

  it('no command prints the usage on stderr with status 2', async () => {
    const output = captureOutput();
    expect(await main([])).toBe(2);
    expect(output.err()).toMatch(/^Usage: smol <command>/);
  });
});
