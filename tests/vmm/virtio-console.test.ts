// Tier 2: the virtio-console (docs/vmm.md, "virtio-console") on real KVM: the flood guest's lines cross it whole and
// in order while the console makes the guest wait, a snapshot taken mid-flood goes on in the restored VM without a
// gap, and a guest that never starts the driver keeps its input on the UART.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { floodLine, floodLinesInOrder, LINE_BYTES } from '../../src/bench/console.js';
import { Vm } from '../../src/vmm/vm.js';
import { guestPath, startGuest, watchConsole } from './guests.js';

const work = mkdtempSync(path.join(tmpdir(), 'smol-hvc-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function startFlood(lines: number, consoleBufferBytes: number) {
  const vm = await Vm.create({
    kernel: guestPath('flood'),
    cmdline: `lines=${lines} console=hvc0`,
    memoryMiB: 16,
    virtioConsole: true,
    consoleBufferBytes,
  });
  const guest = { vm, ...watchConsole(vm) };
  vm.start();
  await guest.waitFor(/flood: ready.*\r\n/);
  vm.write('x');
  return guest;
}

describe('the virtio-console', () => {
  it("carries every flood line whole and in order, through a console smaller than the guest's buffers", async () => {
    // 32 KiB of console is two of the guest's 15 KiB buffers: the device has to put buffers back and wait.
    const guest = await startFlood(20_000, 32 * 1024);
    const text = await guest.waitFor(/flood: done 20000\r\n/, 300_000);
    const start = text.indexOf(floodLine(1));
    expect(start).toBeGreaterThan(0);
    expect(floodLinesInOrder(text, 20_000)).toBe(20_000);
    expect(text.slice(start + 20_000 * LINE_BYTES)).toBe('flood: done 20000\r\n');
    await guest.vm.kill();
  });

  it('goes on after a checkpoint taken mid-flood: parent and restored VM together print every line once', async () => {
    const guest = await startFlood(30_000, 32 * 1024);
    await guest.waitFor(new RegExp(floodLine(200)));
    await guest.vm.pause();
    await sleep(300); // the output the guest produced before the pause reaches JavaScript
    const info = await guest.vm.checkpoint(path.join(work, 'mid-flood'));
    const before = guest.output();
    await guest.vm.kill();

    const vm = await Vm.restore(info.dir);
    const restored = { vm, ...watchConsole(vm) };
    vm.start();
    await restored.waitFor(/flood: done 30000\r\n/, 300_000);
    const text = before + restored.output();
    expect(floodLinesInOrder(text, 30_000)).toBe(30_000);
    expect(restored.output().length).toBeGreaterThan(1000 * LINE_BYTES); // most of the flood came from the restored VM
    await vm.kill();
  });

  it('leaves console input on the UART while the guest has not started its driver', async () => {
    const guest = await startGuest('echo', { virtioConsole: true });
    await guest.waitFor(/echo: ready/);
    guest.vm.write('typed on the UART\r');
    await guest.waitFor(/typed on the UART/);
    await guest.vm.kill();
  });
});
