// Tier 2: VMs give back everything they took.
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { startGuest } from './guests.js';

const openFds = () => readdirSync('/proc/self/fd').length;
const threads = () => readdirSync('/proc/self/task').length;

describe('resources', () => {
  it('leaves no file descriptors or threads behind after 100 create/kill cycles', async () => {
    const cycle = async () => {
      const guest = await startGuest('count', { cmdline: 'every=1000', cpus: 2 });
      await guest.vm.kill();
      await guest.vm.exited;
    };
    await cycle(); // warm up: libuv's thread pool starts on first use
    const fdsBefore = openFds();
    const threadsBefore = threads();
    for (let i = 0; i < 100; i++) await cycle();
    expect(openFds()).toBe(fdsBefore);
    expect(threads()).toBe(threadsBefore);
  }, 900_000); // about a second a cycle inside the KVM lab

  it('leaves nothing behind when guests end by themselves', async () => {
    const fdsBefore = openFds();
    for (let i = 0; i < 20; i++) {
      const guest = await startGuest('hello');
      await guest.vm.exited;
    }
    expect(openFds()).toBe(fdsBefore);
  });
});
