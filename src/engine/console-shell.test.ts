import { describe, expect, it } from 'vitest';
import { ConsoleShell } from './console-shell.js';

describe('a bake waiting on a guest console', () => {
  it('fails at once with the exit reason and the console output when the guest ends, not after its timeout', async () => {
    const shell = new ConsoleShell(() => undefined);
    shell.feed(Buffer.from('smol: hello from a tiny guest\n'));
    const waiting = shell.waitFor(/smol-guest: ready/, 120_000);
    shell.guestEnded('exit error: KVM internal error on vCPU 0 (suberror 1)');
    await expect(waiting).rejects.toThrow(
      /^the guest ended before it printed \/smol-guest: ready\/: exit error: KVM internal error on vCPU 0 \(suberror 1\); its console ended with:\nsmol: hello from a tiny guest/,
    );
    // A wait begun after the end fails at once too.
    await expect(shell.run('true', 120_000)).rejects.toThrow(/the guest ended before it printed/);
  });

  it('says the console printed nothing instead of quoting an empty console', async () => {
    const shell = new ConsoleShell(() => undefined);
    const waiting = shell.waitFor(/ready/, 120_000);
    shell.guestEnded('its vmhost process ended (signal SIGKILL)');
    await expect(waiting).rejects.toThrow(/\(signal SIGKILL\); its console printed nothing$/);
    await expect(new ConsoleShell(() => undefined).waitFor(/ready/, 10)).rejects.toThrow(
      /within 0.01 s; its console printed nothing$/,
    );
  });

  it('still resolves a match that arrived before the guest ended', async () => {
    const shell = new ConsoleShell(() => undefined);
    shell.feed(Buffer.from('smol-guest: ready\n'));
    shell.guestEnded('exit reset');
    await expect(shell.waitFor(/smol-guest: ready/, 1000)).resolves.toBeTruthy();
  });
});
