// Tier 2, end to end: a stalled console reader never stalls a guest (docs/engine.md, "Console back-pressure"). The
// flood guest (lines=0) prints without end and answers every byte typed with "flood: echo C at N". A WebSocket viewer
// that stops reading for a long time, and an engine stopped with SIGSTOP, leave the guest printing and answering, the
// engine serving its other viewers, and each stalled reader gets a marker saying what it missed once it reads again.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome, eventually, sleep } from './engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 120_000);
let smol: Smol;

/** A live viewer (the SDK's console stream): how many bytes it got, the guest's answers and the markers in them. */
class LiveViewer {
  bytes = 0;
  readonly echoes = new Map<string, number>();
  readonly markers: string[] = [];
  #tail = '';
  close: () => void = () => undefined;

  constructor(vm: string) {
    this.close = smol.console(vm, {
      onData: (data) => {
        this.bytes += data.length;
        const text = this.#tail + data.toString('latin1');
        for (const [, byte, line] of text.matchAll(/flood: echo (.) at (\d+)\r\n/g))
          this.echoes.set(byte!, Number(line));
        for (const [marker] of text.matchAll(/\[smol: \d+ bytes dropped: [^\]]+\]/g)) {
          if (!this.markers.includes(marker)) this.markers.push(marker);
        }
        this.#tail = text.slice(-120);
      },
    }).close;
  }
}

/** Types one byte and waits for the guest's answer on `viewer`; the line number the guest had reached. */
async function roundTrip(vm: string, viewer: LiveViewer, byte: string): Promise<number> {
  await smol.write(vm, byte);
  return eventually(`the guest to answer ${JSON.stringify(byte)}`, async () => viewer.echoes.get(byte), 120_000);
}

/** A guest that floods its console from the first byte typed, without end. */
async function floodingVm(name: string, cmdline: string): Promise<string> {
  const smolfile = home.smolfile(name, `kernel = "@guests@/flood.elf"\ncmdline = "${cmdline}"\nmemory = 16\n`);
  const episode = await home.json<{ vm: { id: string } }>(['up', '-f', smolfile, '--name', name]);
  const vm = episode.vm.id;
  await eventually(`${name} to be ready`, async () =>
    (await smol.logs(vm)).text.includes('flood: ready') ? true : undefined,
  );
  return vm;
}

function rssKiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
}

describe('a stalled console reader never stalls a guest', { timeout: 600_000 }, () => {
  beforeAll(async () => {
    smol = await home.client();
  });

  it('a WebSocket viewer that stops reading: the guest floods and answers, others are served, it gets a marker', async () => {
    const vm = await floodingVm('flood-stalled-viewer', 'lines=0');
    // The stalled viewer: a raw WebSocket whose socket stops being read once its first screen has come.
    const socket = path.join(home.dir, 'engine.sock');
    const stalled = new WebSocket(`ws+unix:${socket}:/api/v1/vms/${vm}/console`);
    const received: { text?: { type: string; reason?: string }; binary?: Buffer }[] = [];
    stalled.on('message', (data: Buffer, isBinary) =>
      received.push(isBinary ? { binary: data } : { text: JSON.parse(data.toString()) as { type: string } }),
    );
    await eventually('the stalled viewer to get its screen', async () => (received.length > 0 ? true : undefined));
    const raw = (stalled as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    raw.pause();

    const live = new LiveViewer(vm);
    await smol.write(vm, 'g'); // the flood starts
    // Long enough for the stalled viewer to be far behind (4 MiB unsent, past what the sockets hold): 6 MiB.
    await eventually('6 MiB of output', async () => (live.bytes > 6 * 2 ** 20 ? true : undefined), 400_000);
    const lines: number[] = [];
    for (const byte of 'abc') lines.push(await roundTrip(vm, live, byte));
    expect(lines[1]!).toBeGreaterThan(lines[0]!); // it kept printing between the answers
    expect(lines[2]!).toBeGreaterThan(lines[1]!);
    expect((await smol.vm(vm)).state).toBe('running');

    raw.resume();
    const marker = await eventually(
      'the stalled viewer to be told what it missed',
      async () => {
        const resync = received.findIndex((m) => m.text?.type === 'screen' && m.text.reason === 'resync');
        if (resync < 0) return undefined;
        const after = Buffer.concat(received.slice(resync + 1).flatMap((m) => (m.binary ? [m.binary] : [])));
        return /\[smol: (\d+) bytes dropped: this viewer fell behind\]/.exec(after.toString('latin1')) ?? undefined;
      },
      120_000,
    );
    expect(Number(marker[1])).toBeGreaterThan(4 * 2 ** 20); // it was more than the lag limit behind
    stalled.close();
    live.close();
    await smol.removeVm(vm);
  });

  it('an engine stopped with SIGSTOP: the guest floods on through hvc0, its vmhost stays small, the output marks the gap', async () => {
    const vm = await floodingVm('flood-stopped-engine', 'lines=0 console=hvc0');
    const live = new LiveViewer(vm);
    await smol.write(vm, 'g');
    await eventually('8 MiB of output', async () => (live.bytes > 8 * 2 ** 20 ? true : undefined), 300_000);

    const engine = home.enginePid()!;
    const vmhost = [...home.vmhosts().values()][0]!;
    const rssBefore = rssKiB(vmhost);
    process.kill(engine, 'SIGSTOP');
    try {
      await sleep(15_000); // the engine reads nothing: no console, no API
      const rssStopped = rssKiB(vmhost);
      // What the vmhost holds for the engine is bounded (8 MiB in flight), not the 15 s of output.
      expect(rssStopped - rssBefore).toBeLessThan(64 * 1024);
    } finally {
      process.kill(engine, 'SIGCONT');
    }
    // Only a device that went on taking the guest's output while nobody read writes this marker.
    const marker = await eventually(
      'the output to say what was dropped while the engine was stopped',
      async () => live.markers.find((m) => m.endsWith("the console's reader fell behind]")),
      120_000,
    );
    expect(Number(/\d+/.exec(marker)![0])).toBeGreaterThan(0);
    const resumed = live.bytes;
    await eventually('more output after the marker', async () => (live.bytes > resumed + 2 ** 20 ? true : undefined));
    expect((await smol.vm(vm)).state).toBe('running');
    live.close();
    await smol.removeVm(vm);
  });
});
