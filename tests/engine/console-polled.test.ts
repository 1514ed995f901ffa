// Tier 2, end to end: `smol console --send` reaches a guest that polls COM1 with interrupts off (the `poll` guest),
// in its episode's VM, after a checkpoint, after a restore and in a fork (docs/vmm.md, "Console input").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Snapshot, Vm } from '../../src/api/schema.js';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome, eventually } from './engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 120_000);
let smol: Smol;

/** `smol console VM --send TEXT`, then waits until the VM's console shows the echo. */
async function sendAndSeeEcho(vm: string, text: string): Promise<string> {
  const sent = await home.smol(['console', vm, '--send', text]);
  expect(sent.status, sent.stderr).toBe(0);
  return eventually(`${vm} to echo ${JSON.stringify(text)}`, async () => {
    const logs = (await smol.logs(vm)).text;
    return logs.includes(text) ? logs : undefined;
  });
}

describe('console input to a guest that polls COM1, through the CLI', { timeout: 300_000 }, () => {
  let vm: string;

  beforeAll(async () => {
    const smolfile = home.smolfile('poll', `kernel = "@guests@/poll.elf"\nmemory = 16\n`);
    const episode = await home.json<{ vm: { id: string } }>(['up', '-f', smolfile, '--name', 'poller']);
    vm = episode.vm.id;
    smol = await home.client();
    await eventually('the guest to be ready', async () =>
      (await smol.logs(vm)).text.includes('poll: ready') ? true : undefined,
    );
  });

  it('reaches the running guest, after a checkpoint, after a restore and in a fork', async () => {
    await sendAndSeeEcho(vm, 'first words\n');
    const snap = await home.json<{ id: string; snapshot: Snapshot }>(['checkpoint', vm, '-m', 'polled']);
    await sendAndSeeEcho(vm, 'after the checkpoint\n');

    const restored = await home.json<{ vm: Vm }>(['restore', vm, snap.id]);
    expect(restored.vm.snapshot).toBe(snap.id);
    await sendAndSeeEcho(restored.vm.id, 'after the restore\n');

    const forked = await home.json<{ children: Array<{ id: string }> }>(['fork', restored.vm.id, '-n', '1']);
    const child = forked.children[0]!.id;
    const childLogs = await sendAndSeeEcho(child, 'in the fork\n');
    const parentLogs = await sendAndSeeEcho(restored.vm.id, 'in the parent after the fork\n');
    expect(childLogs).not.toContain('in the parent after the fork');
    expect(parentLogs.split('in the fork\n')).toHaveLength(1); // the child's input went to the child only
    await smol.removeVm(child);
  });
});
