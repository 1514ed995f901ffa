import { PassThrough, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ConsoleInput, type ConsoleSink, type TerminalInput } from './console-input.js';

/** Takes at most `room` bytes per write, like a console input queue that is nearly full. */
class SlowSink implements ConsoleSink {
  received = Buffer.alloc(0);
  constructor(public room: number) {}
  write(data: Buffer): number {
    const n = Math.min(this.room, data.length);
    this.received = Buffer.concat([this.received, data.subarray(0, n)]);
    return n;
  }
}

function terminal(isTTY = false) {
  const input = new PassThrough() as PassThrough & TerminalInput;
  const rawModes: boolean[] = [];
  if (isTTY) {
    input.isTTY = true;
    input.setRawMode = (mode: boolean) => rawModes.push(mode);
  }
  let notices = '';
  const sink = new Writable({ write: (chunk, _enc, done) => ((notices += String(chunk)), done()) });
  return { input, rawModes, sink, notices: () => notices };
}

describe('console input', () => {
  it('forwards piped input as it arrives, and the end of input does not quit', async () => {
    const t = terminal();
    const vm = new SlowSink(Infinity);
    const forwarder = new ConsoleInput(vm, { input: t.input, notices: t.sink });
    let quit = false;
    void forwarder.quit.then(() => (quit = true));
    forwarder.attach();
    t.input.write('echo hi\n');
    await sleep(5);
    expect(vm.received.toString()).toBe('echo hi\n');
    t.input.end();
    await sleep(5);
    expect(quit).toBe(false);
    forwarder.detach();
  });

  it('input the VM cannot take yet is retried until all of it is in, with stdin paused meanwhile', async () => {
    const t = terminal();
    const vm = new SlowSink(3);
    const forwarder = new ConsoleInput(vm, { input: t.input, notices: t.sink, retryMs: 1 });
    forwarder.attach();
    t.input.write('0123456789');
    await sleep(1);
    expect(t.input.isPaused()).toBe(true);
    for (let i = 0; i < 50 && vm.received.length < 10; i++) await sleep(2);
    expect(vm.received.toString()).toBe('0123456789');
    expect(t.input.isPaused()).toBe(false);
    forwarder.detach();
  });

  it('Ctrl-A x settles quit; the bytes before it still reach the VM', async () => {
    const t = terminal();
    const vm = new SlowSink(Infinity);
    const forwarder = new ConsoleInput(vm, { input: t.input, notices: t.sink });
    forwarder.attach();
    t.input.write('ls\r\x01x');
    await forwarder.quit;
    expect(vm.received.toString()).toBe('ls\r');
    forwarder.detach();
  });

  it('a terminal goes into raw mode while attached and back when detached', () => {
    const t = terminal(true);
    const forwarder = new ConsoleInput(new SlowSink(Infinity), { input: t.input, notices: t.sink });
    forwarder.attach();
    expect(t.rawModes).toEqual([true]);
    forwarder.detach();
    expect(t.rawModes).toEqual([true, false]);
    forwarder.detach();
    expect(t.rawModes).toEqual([true, false]);
  });

  it('Ctrl-A h prints the keys on the notices stream, not to the VM', async () => {
    const t = terminal();
    const vm = new SlowSink(Infinity);
    const forwarder = new ConsoleInput(vm, { input: t.input, notices: t.sink });
    forwarder.attach();
    t.input.write('\x01h');
    await sleep(5);
    expect(vm.received.length).toBe(0);
    expect(t.notices()).toMatch(/Ctrl-A x +quit/);
    forwarder.detach();
  });

  it('input after the VM ended is dropped with one notice instead of crashing', async () => {
    const t = terminal();
    const ended: ConsoleSink = {
      write() {
        throw new Error('cannot write to the console: the VM has exited');
      },
    };
    const forwarder = new ConsoleInput(ended, { input: t.input, notices: t.sink });
    forwarder.attach();
    t.input.write('late');
    await sleep(5);
    expect(t.notices()).toBe('smol: console input dropped: cannot write to the console: the VM has exited\n');
    forwarder.detach();
  });
});
