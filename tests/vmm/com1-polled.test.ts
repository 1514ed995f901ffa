// Tier 2: COM1 for a guest that polls it with interrupts off, as a boot loader or a bare-metal program does (the
// `poll` guest): host input reaches it through LSR.DR and RBR, as on a 16550 (docs/vmm.md, "Console input").
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Vm } from '../../src/vmm/vm.js';
import { guestPath, startGuest, watchConsole, type RunningGuest } from './guests.js';

const work = mkdtempSync(path.join(tmpdir(), 'smol-com1-polled-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function smolBoot(args: string[], input: string): Promise<{ stdout: string; stderr: string; status: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.resolve('bin/smol.js'), 'boot', ...args], { timeout: 60_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('latin1')));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ stdout, stderr, status }));
    child.stdin.end(input);
  });
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Types `text` into the guest and waits for its echo at the end of the output. */
async function echoes(guest: RunningGuest, text: string): Promise<void> {
  expect(guest.vm.write(text)).toBe(text.length);
  await guest.waitFor(new RegExp(`${escape(text)}$`));
}

describe('a guest that polls COM1 with interrupts off', () => {
  it('smol boot fed by a pipe: every byte the pipe held before the guest polled comes back, in order', async () => {
    let piped = '';
    for (let i = 0; piped.length < 4096; i++) piped += `piped line ${i}\n`;
    const { stdout, stderr, status } = await smolBoot(['--kernel', guestPath('poll')], `${piped}\x04`);
    expect(status, stderr).toBe(0);
    expect(stdout).toBe(`poll: ready\n${piped}\npoll: bye after ${piped.length + 1} bytes\n`);
  });

  it('echoes what is typed while it polls, an 8 KiB paste without losing or reordering bytes', async () => {
    const guest = await startGuest('poll');
    await guest.waitFor(/poll: ready\n/);
    await echoes(guest, 'hello, polled guest\n');
    let paste = '';
    for (let i = 0; paste.length < 8 * 1024; i++) paste += `line ${i} of the paste\n`;
    expect(guest.vm.write(paste)).toBe(paste.length);
    await guest.waitFor(new RegExp(`${escape(paste.slice(-40))}$`), 120_000);
    expect(guest.output()).toBe(`poll: ready\nhello, polled guest\n${paste}`);
    await guest.vm.kill();
  });

  it('gets its input after a checkpoint, in a VM restored from it and in a fork', async () => {
    const guest = await startGuest('poll');
    await guest.waitFor(/poll: ready\n/);
    await echoes(guest, 'before the checkpoint\n');
    const dir = path.join(work, 'checkpoint');
    await guest.vm.checkpoint(dir);
    await echoes(guest, 'after the checkpoint\n');

    const restoredVm = await Vm.restore(dir);
    const restored: RunningGuest = { vm: restoredVm, ...watchConsole(restoredVm) };
    restoredVm.start();
    await echoes(restored, 'in the restored VM\n');
    expect(restored.output()).not.toContain('after the checkpoint');
    await restoredVm.kill();

    const [childVm] = await guest.vm.fork(1);
    const child: RunningGuest = { vm: childVm!, ...watchConsole(childVm!) };
    await echoes(child, 'in the fork\n');
    await echoes(guest, 'in the parent, after the fork\n');
    expect(child.output()).not.toContain('in the parent');
    expect(guest.output()).not.toContain('in the fork');
    await childVm!.kill();
    await guest.vm.kill();
  });
});
