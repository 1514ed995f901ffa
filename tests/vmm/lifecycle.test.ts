// Tier 2: pausing, resuming and killing real VMs, and what the console does under load.
import { describe, expect, it } from 'vitest';
import { startGuest } from './guests.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function counts(output: string): number[] {
  return [...output.matchAll(/count=(\d+)\n/g)].map((m) => Number(m[1]));
}

describe('the VM lifecycle', () => {
  it('reports its state from created through running and paused to exited', async () => {
    const guest = await startGuest('count', { cmdline: 'every=1000' });
    expect(guest.vm.state).toBe('running');
    await guest.waitFor(/count=3\n/);
    await guest.vm.pause();
    expect(guest.vm.state).toBe('paused');
    guest.vm.resume();
    expect(guest.vm.state).toBe('running');
    await guest.vm.kill();
    const exit = await guest.vm.exited;
    expect(exit.reason).toBe('killed');
    expect(guest.vm.state).toBe('exited');
  });

  it('stops all output while paused and continues the count where it left off on resume', async () => {
    const guest = await startGuest('count', { cmdline: 'every=20000' });
    await guest.waitFor(/count=5\n/);
    await guest.vm.pause();
    await sleep(50); // let the last batch drain into JavaScript
    const atPause = guest.output().length;
    await sleep(500);
    expect(guest.output().length).toBe(atPause);

    guest.vm.resume();
    const lastBefore = counts(guest.output()).at(-1)!;
    await guest.waitFor(new RegExp(`count=${lastBefore + 5}\\n`));
    await guest.vm.kill();
    const seen = counts(guest.output());
    expect(seen).toEqual(seen.map((_, i) => i + 1)); // 1, 2, 3, ... with no gap or repeat across the pause
  });

  it('refuses to pause a paused VM and to resume a running one, saying why', async () => {
    const guest = await startGuest('count', { cmdline: 'every=100000' });
    expect(() => guest.vm.resume()).toThrow(/cannot resume: the VM is running/);
    await guest.vm.pause();
    await expect(guest.vm.pause()).rejects.toThrow(/cannot pause: the VM is paused/);
    await guest.vm.kill();
    expect(() => guest.vm.write('x')).toThrow(/exited/);
  });

  it('kills a paused VM cleanly', async () => {
    const guest = await startGuest('count', { cmdline: 'every=1000' });
    await guest.waitFor(/count=2\n/);
    await guest.vm.pause();
    await guest.vm.kill();
    expect((await guest.vm.exited).reason).toBe('killed');
  });

  it('kills a VM whose second vCPU still waits for a startup IPI', async () => {
    const guest = await startGuest('count', { cmdline: 'every=1000', cpus: 2 });
    await guest.waitFor(/count=2\n/);
    await guest.vm.kill();
    expect((await guest.vm.exited).reason).toBe('killed');
  });

  it('loses no console output when the guest writes faster than JavaScript reads', async () => {
    const lines = 4_000;
    // A 4 KiB console buffer (instead of 1 MiB) so that ~40 KiB of output must wait for the reader many times.
    const guest = await startGuest('count', { cmdline: `every=1 limit=${lines}`, consoleBufferBytes: 4096 });
    // Keep the JavaScript thread busy for a while so the ring fills and the guest has to wait.
    const until = Date.now() + 300;
    while (Date.now() < until);
    const exit = await guest.vm.exited;
    expect(exit).toMatchObject({ reason: 'poweroff', code: 0 });
    const seen = counts(guest.output());
    expect(seen.length).toBe(lines);
    expect(seen.every((n, i) => n === i + 1)).toBe(true);
  });

  it('accepts console input up to its 1 MiB queue and says how much it took', async () => {
    const guest = await startGuest('count', { cmdline: 'every=100000' });
    const accepted = guest.vm.write(Buffer.alloc(2 * 1024 * 1024, 0x61));
    expect(accepted).toBeGreaterThan(1024 * 1024 - 64);
    expect(accepted).toBeLessThanOrEqual(1024 * 1024);
    await guest.vm.kill();
  });
});
