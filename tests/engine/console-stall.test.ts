// Tier 2, end to end: a stalled console reader never stalls a guest (docs/engine.md, "Console back-pressure"). The
// flood guest (lines=0 console=hvc0) prints through its virtio-console without end and answers every byte typed with
// "flood: echo C at N". A WebSocket viewer that stops reading, and an engine stopped with SIGSTOP, leave the guest
// printing and answering, the engine serving its other viewers, and each stalled reader gets a marker saying what it
// missed once it reads again.
import path from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome, eventually, sleep } from './engine-home.js';

/** The vmhost's bound on console bytes sent to the engine and not yet taken (SMOL_CONSOLE_IN_FLIGHT), kept small. */
const IN_FLIGHT = 2 ** 20;
/** The VMM's console ring (native/vmm/console.h, CONSOLE_OUT_LIMIT plus its reserve). */
const VMM_RING = 2 ** 20 + 4096;

const home = new EngineHome();
afterAll(() => home.destroy(), 120_000);
let smol: Smol;

interface Marker {
  text: string;
  count: number;
  /** Where it starts in the viewer's stream. */
  offset: number;
}

/** A live viewer (the SDK's console stream): everything it got, the guest's answers and the markers in it. */
class LiveViewer {
  bytes = 0;
  readonly chunks: Buffer[] = [];
  readonly echoes = new Map<string, number>();
  readonly markers: Marker[] = [];
  #tail = '';
  close: () => void = () => undefined;

  constructor(vm: string) {
    this.close = smol.console(vm, {
      onData: (data) => {
        const start = this.bytes - this.#tail.length; // the stream offset of `text`
        this.chunks.push(data);
        this.bytes += data.length;
        const text = this.#tail + data.toString('latin1');
        for (const [, byte, line] of text.matchAll(/flood: echo (.) at (\d+)\r\n/g))
          this.echoes.set(byte!, Number(line));
        for (const match of text.matchAll(/\[smol: (\d+) bytes dropped: [^\]]+\]/g)) {
          const offset = start + match.index;
          if (this.markers.every((m) => m.offset !== offset))
            this.markers.push({ text: match[0], count: Number(match[1]), offset });
        }
        this.#tail = text.slice(-120);
      },
    }).close;
  }

  stream(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

/** Types one byte and waits for the guest's answer on `viewer`; the line number the guest had reached. */
async function roundTrip(vm: string, viewer: LiveViewer, byte: string): Promise<number> {
  await smol.write(vm, byte);
  return eventually(`the guest to answer ${JSON.stringify(byte)}`, async () => viewer.echoes.get(byte), 60_000);
}

/** A guest that floods its virtio-console from the first byte typed, without end. */
async function floodingVm(name: string): Promise<string> {
  const smolfile = home.smolfile(
    name,
    `kernel = "@guests@/flood.elf"\ncmdline = "lines=0 console=hvc0"\nmemory = 16\n`,
  );
  const episode = await home.json<{ vm: { id: string } }>(['up', '-f', smolfile, '--name', name]);
  const vm = episode.vm.id;
  await eventually(`${name} to be ready`, async () =>
    (await smol.logs(vm)).text.includes('flood: ready') ? true : undefined,
  );
  return vm;
}

describe('a stalled console reader never stalls a guest', { timeout: 300_000 }, () => {
  beforeAll(async () => {
    // The engine (and so its vmhosts) starts with this environment; 1 MiB in flight keeps the engine's backlog
    // after a SIGCONT well under a viewer's lag limit (4 MiB), so the live viewer below sees every byte.
    process.env.SMOL_CONSOLE_IN_FLIGHT = String(IN_FLIGHT);
    try {
      smol = await home.client();
    } finally {
      delete process.env.SMOL_CONSOLE_IN_FLIGHT;
    }
  });

  it('a WebSocket viewer that stops reading: the guest floods and answers, others are served, it gets a marker', async () => {
    const vm = await floodingVm('flood-stalled-viewer');
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

    // Attached before the flood starts, as the stalled viewer is: both streams begin at the same byte.
    const live = new LiveViewer(vm);
    await smol.write(vm, 'g'); // the flood starts
    // Far past the viewer's lag limit (4 MiB unsent, beyond what the sockets hold): 6 MiB.
    await eventually('6 MiB of output', async () => (live.bytes > 6 * 2 ** 20 ? true : undefined), 180_000);
    const lines: number[] = [];
    for (const byte of 'abc') lines.push(await roundTrip(vm, live, byte));
    expect(lines[1]!).toBeGreaterThan(lines[0]!); // it kept printing between the answers
    expect(lines[2]!).toBeGreaterThan(lines[1]!);
    expect((await smol.vm(vm)).state).toBe('running');

    raw.resume();
    // What it got before it fell behind, the marker after its resync screen, and the output after the marker.
    const { before, marker, after } = await eventually(
      'the stalled viewer to be told what it missed',
      async () => {
        const resync = received.findIndex((m) => m.text?.type === 'screen' && m.text.reason === 'resync');
        if (resync < 0) return undefined;
        const binary = (from: number, to: number) =>
          Buffer.concat(received.slice(from, to).flatMap((m) => (m.binary ? [m.binary] : [])));
        const rest = binary(resync + 1, received.length);
        const found = /\[smol: (\d+) bytes dropped: this viewer fell behind\]\r\n/.exec(rest.toString('latin1'));
        if (!found || rest.length < found.index + found[0].length + 256) return undefined;
        return {
          before: binary(0, resync),
          marker: Number(found[1]),
          after: rest.subarray(found.index + found[0].length),
        };
      },
      60_000,
    );
    // The live viewer kept up (it was never resynced), so its stream is the whole output: the stalled one's is
    // the same up to where it fell behind, and picks up again exactly as many bytes later as its marker says.
    expect(live.markers.filter((m) => m.text.includes('this viewer'))).toEqual([]);
    const whole = await eventually('the live viewer to have the output after the marker', async () => {
      const stream = live.stream();
      return stream.indexOf(after.subarray(0, 256), before.length) > 0 ? stream : undefined;
    });
    expect(Buffer.compare(whole.subarray(0, before.length), before)).toBe(0);
    const resumedAt = whole.indexOf(after.subarray(0, 256), before.length);
    expect(marker).toBeGreaterThan(0);
    expect(marker).toBe(resumedAt - before.length);
    stalled.close();
    live.close();
    await smol.removeVm(vm);
  });

  it('an engine stopped with SIGSTOP: the guest floods on through hvc0, the vmhost holds little, the output marks the gap', async () => {
    const vm = await floodingVm('flood-stopped-engine');
    const live = new LiveViewer(vm);
    await smol.write(vm, 'g');
    const started = Date.now();
    await eventually('2 MiB of output', async () => (live.bytes > 2 * 2 ** 20 ? true : undefined), 120_000);
    const rate = live.bytes / Math.max(1, Date.now() - started); // bytes a millisecond
    // Stopped long enough for the in-flight bound and the VMM's ring to fill twice over at the rate seen before (the
    // guest prints faster with the engine stopped).
    const stopMs = Math.min(30_000, Math.max(3_000, (2 * (IN_FLIGHT + VMM_RING)) / rate));

    const engine = home.enginePid()!;
    const stoppedAt = live.bytes;
    process.kill(engine, 'SIGSTOP');
    try {
      await sleep(stopMs); // the engine reads nothing: no console, no API
    } finally {
      process.kill(engine, 'SIGCONT');
    }
    // Only a device that went on taking the guest's output while nobody read writes this marker; what comes before
    // it from the stop on is what the vmhost had in flight and the VMM's ring held, not the whole stop's output.
    const marker = await eventually(
      'the output to say what was dropped while the engine was stopped',
      async () =>
        live.markers.find((m) => m.offset >= stoppedAt && m.text.endsWith("the console's reader fell behind]")),
      60_000,
    );
    expect(marker.count).toBeGreaterThan(0);
    expect(marker.offset - stoppedAt).toBeLessThan(IN_FLIGHT + VMM_RING + 2 ** 20);
    expect(live.markers.filter((m) => m.text.includes('this viewer'))).toEqual([]); // the live viewer saw it all
    // The guest still answers, and prints on.
    await roundTrip(vm, live, 'z');
    const resumed = live.bytes;
    await eventually('more output after the marker', async () => (live.bytes > resumed + 2 ** 20 ? true : undefined));
    expect((await smol.vm(vm)).state).toBe('running');
    live.close();
    await smol.removeVm(vm);
  });
});
