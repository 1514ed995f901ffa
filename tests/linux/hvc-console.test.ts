// Tier 3: the console of an episode of the builtin image is the virtio-console (docs/engine.md, "Consoles"): the
// shell runs on /dev/hvc0 with job control, and a burst of output arrives whole and in order through the engine.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol } from '../../sdk/typescript/smol.js';
import { consoleRun, EngineHome, root } from '../engine/engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 180_000);

describe('the console of a builtin-image episode', () => {
  let smol: Smol;
  let vm: string;

  beforeAll(async () => {
    smol = await home.client();
    vm = (await smol.up(path.join(root, 'smolfiles', 'shell.smolfile'), { name: 'hvc' })).vm.id;
  }, 600_000);

  it('is /dev/hvc0, and Ctrl-C reaches the foreground command', async () => {
    expect(await consoleRun(smol, vm, 'tty; cat /sys/class/tty/console/active', 1)).toBe('/dev/hvc0\nhvc0\n');
    // Without job control on hvc0 the sleep would outlast the next command's wait.
    await smol.write(vm, 'sleep 600\n');
    await new Promise((resolve) => setTimeout(resolve, 2000));
    await smol.write(vm, '\x03');
    expect(await consoleRun(smol, vm, 'echo after', 2, 60_000)).toBe('after\n');
  }, 300_000);

  it('carries 1,000 numbered lines whole and in order', async () => {
    // Few, because the guest's tty hands hvc0 each line as two writes (the text, then CR LF), each one a VM exit
    // and an interrupt, which under the lab's emulated nested virtualization cost milliseconds.
    const lines = 1_000;
    // The kernel's own messages go to hvc0 too, and the lab's emulated CPUs, two labs at once in npm test, can stall
    // a vCPU long enough for an RCU stall warning in the middle of a line: only emergencies are printed from here.
    const quiet = 'echo 1 > /proc/sys/kernel/printk';
    expect(await consoleRun(smol, vm, `${quiet}; seq 1 ${lines} > /tmp/numbers; wc -l < /tmp/numbers`, 3)).toBe(
      `${lines}\n`,
    );
    let text = '';
    let firstByte = 0;
    const finished = new Promise<void>((resolve, reject) => {
      const stream = smol.console(vm, {
        onData: (data) => {
          firstByte ||= performance.now();
          text += data.toString('latin1');
          if (text.includes('<<seq:end>>')) {
            stream.close();
            resolve();
          }
        },
        onClose: (why) => reject(new Error(`the console closed: ${why}`)),
      });
      // The markers the shell prints differ from the typed line's echo: <<$((1))seq>> and <<seq:""end>>.
      void smol.write(vm, `echo "<<$((1))seq>>"; cat /tmp/numbers; echo "<<seq:""end>>"\n`);
    });
    await Promise.race([
      finished,
      new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out; got ${text.slice(-300)}`)), 600_000)),
    ]);
    const seconds = (performance.now() - firstByte) / 1000;
    const body = text.slice(text.indexOf('<<1seq>>\r\n') + '<<1seq>>\r\n'.length, text.indexOf('<<seq:end>>'));
    const numbers = body.split('\r\n').filter((line) => line !== '');
    const wrong = numbers.findIndex((line, i) => line !== String(i + 1));
    expect(wrong === -1 ? '' : `line ${wrong + 1}: ${JSON.stringify(numbers.slice(wrong, wrong + 3))}`).toBe('');
    expect(numbers.length).toBe(lines);
    console.log(`hvc0: ${lines} lines, ${(body.length / 2 ** 20).toFixed(2)} MiB in ${seconds.toFixed(2)} s`);
  }, 900_000);
});
