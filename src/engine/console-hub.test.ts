import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import xtermHeadless from '@xterm/headless';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ConsoleViewer } from '../api/engine-api.js';
import { ConsoleHub, type ConsoleHubOptions } from './console-hub.js';

const { Terminal } = xtermHeadless;

const T0 = 1_700_000_000_000;
let dir: string;
const hubs: ConsoleHub[] = [];

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-console-'));
});

afterEach(async () => {
  await Promise.all(hubs.splice(0).map((hub) => hub.close('test over')));
  fs.rmSync(dir, { recursive: true, force: true });
});

function makeHub(options: Partial<ConsoleHubOptions> = {}): ConsoleHub {
  const hub = new ConsoleHub({ vmId: 'vm-test', castPath: path.join(dir, 'vm-test.cast'), ...options });
  hubs.push(hub);
  return hub;
}

class Viewer implements ConsoleViewer {
  readonly screens: { serialized: string; reason: string }[] = [];
  readonly outputs: Buffer[] = [];
  readonly closes: string[] = [];
  lag = 0;
  screen(serialized: string, reason: 'attach' | 'resync'): void {
    this.screens.push({ serialized, reason });
    this.outputs.length = 0; // what a terminal shows from here on: the screen, then the output after it
  }
  output(chunk: Buffer): void {
    this.outputs.push(chunk);
  }
  backlog(): number {
    return this.lag;
  }
  closed(reason: string): void {
    this.closes.push(reason);
  }
  /** Everything this viewer would show: its latest screen, then the output after it. */
  shown(): (string | Buffer)[] {
    return [this.screens.at(-1)?.serialized ?? '', ...this.outputs];
  }
}

/** What a fresh terminal of the hub's default size shows after `data`. */
async function terminalText(data: (string | Buffer)[], cols = 120, rows = 40): Promise<string> {
  const terminal = new Terminal({ cols, rows, scrollback: 100, allowProposedApi: true });
  for (const part of data) terminal.write(part);
  await new Promise<void>((resolve) => terminal.write('', resolve));
  const buffer = terminal.buffer.active;
  const lines: string[] = [];
  for (let y = 0; y < rows; y++)
    lines.push((buffer.getLine(buffer.baseY + y)?.translateToString(true) ?? '').replace(/ +$/, ''));
  terminal.dispose();
  return lines.join('\n').replace(/\n+$/, '');
}

function numberedLines(from: number, to: number): Buffer[] {
  return Array.from({ length: to - from }, (_, i) => Buffer.from(`line ${from + i}\r\n`));
}

type Event = [number, string, string];
function readCast(file: string): { header: Record<string, unknown>; events: Event[] } {
  const [header, ...events] = fs.readFileSync(file, 'utf8').trimEnd().split('\n');
  return { header: JSON.parse(header!) as Record<string, unknown>, events: events.map((line) => JSON.parse(line)) };
}

describe('what a viewer sees', () => {
  it('a viewer attaching after output sees the current screen at once', async () => {
    const hub = makeHub();
    for (const chunk of numberedLines(0, 80)) hub.push(chunk);
    hub.push(Buffer.from('\x1b[H\x1b[2Jafter clear 1\r\n\x1b[32mgreen\x1b[0m\r\n$ '));
    await hub.settled();
    const viewer = new Viewer();
    hub.attach(viewer);
    expect(viewer.screens).toEqual([{ serialized: expect.any(String), reason: 'attach' }]);
    expect(hub.screen().text).toBe('after clear 1\ngreen\n$');
    expect(await terminalText(viewer.shown())).toBe('after clear 1\ngreen\n$');
  });

  it("a bare guest's bare LFs start each line at the left on the screen a viewer gets; the recording keeps them", async () => {
    const bare = makeHub({ implicitCr: true });
    const tty = makeHub({ castPath: path.join(dir, 'tty.cast') });
    for (const hub of [bare, tty]) {
      hub.push(Buffer.from('count: start\ncount=1\n'));
      await hub.settled();
    }
    expect(bare.screen().text).toBe('count: start\ncount=1');
    const viewer = new Viewer();
    bare.attach(viewer);
    expect(await terminalText(viewer.shown())).toBe('count: start\ncount=1');
    expect(bare.recordingText()).toContain(JSON.stringify('count: start\ncount=1\n'));
    // Without it (a Linux tty sends CR LF itself) a bare LF only moves down: the stairs the option prevents.
    expect(tty.screen().text).toBe(`count: start\n${' '.repeat(12)}count=1`);
  });

  it('viewers attaching mid-stream get every later byte exactly once, after a screen of the bytes before', async () => {
    const hub = makeHub();
    const chunks = numberedLines(0, 300);
    const viewers = new Map<number, Viewer>();
    chunks.forEach((chunk, i) => {
      if (i % 100 === 50) {
        const viewer = new Viewer();
        hub.attach(viewer);
        expect(viewer.screens).toHaveLength(0); // the terminal has not parsed the earlier output yet
        viewers.set(i, viewer);
      }
      hub.push(chunk);
    });
    await hub.settled();
    const final = hub.screen().text;
    expect(final).toBe(await terminalText(chunks));
    for (const [at, viewer] of viewers) {
      expect(viewer.screens).toHaveLength(1);
      expect(await terminalText([viewer.screens[0]!.serialized])).toBe(await terminalText(chunks.slice(0, at)));
      expect(Buffer.concat(viewer.outputs).toString()).toBe(Buffer.concat(chunks.slice(at)).toString());
      expect(await terminalText(viewer.shown())).toBe(final);
    }
  });

  it('a detached viewer gets nothing more', () => {
    const hub = makeHub();
    const viewer = new Viewer();
    const attachment = hub.attach(viewer);
    hub.push(Buffer.from('one'));
    attachment.detach();
    hub.push(Buffer.from('two'));
    expect(Buffer.concat(viewer.outputs).toString()).toBe('one');
  });

  it("typing in a viewer goes to the guest through the attachment's writer", () => {
    const hub = makeHub();
    const typed: string[] = [];
    hub.attach(new Viewer(), (data) => typed.push(data.toString())).write('ls\n');
    expect(typed).toEqual(['ls\n']);
    expect(() => hub.attach(new Viewer()).write('x')).toThrow(/read-only/);
  });

  it('a viewer that throws is detached and the others keep getting output', () => {
    const hub = makeHub({ log: () => undefined });
    const broken = new Viewer();
    broken.output = () => {
      throw new Error('socket gone');
    };
    const good = new Viewer();
    hub.attach(broken);
    hub.attach(good);
    hub.push(Buffer.from('a'));
    hub.push(Buffer.from('b'));
    expect(Buffer.concat(good.outputs).toString()).toBe('ab');
  });

  it('closing tells every viewer why and ignores later output', async () => {
    const hub = makeHub();
    const [first, second] = [new Viewer(), new Viewer()];
    hub.attach(first);
    hub.attach(second);
    hub.push(Buffer.from('bye\r\n'));
    await hub.close('the VM was removed');
    hub.push(Buffer.from('late'));
    expect(first.closes).toEqual(['the VM was removed']);
    expect(second.closes).toEqual(['the VM was removed']);
    expect(Buffer.concat(first.outputs).toString()).toBe('bye\r\n');
    const late = new Viewer();
    hub.attach(late);
    expect(late.closes).toEqual(['the VM was removed']);
    expect(fs.readFileSync(path.join(dir, 'vm-test.cast'), 'utf8')).toMatch(/"bye\\r\\n"\]\n$/);
  });
});

describe('slow viewers', () => {
  it('a lagging viewer is skipped, then sent the screen again, while a fast viewer gets every byte', async () => {
    const hub = makeHub({ lagBytes: 1000 });
    const [fast, slow] = [new Viewer(), new Viewer()];
    hub.attach(fast);
    hub.attach(slow);
    const chunks = numberedLines(0, 40);
    chunks.slice(0, 10).forEach((chunk) => hub.push(chunk));
    slow.lag = 5000;
    chunks.slice(10, 20).forEach((chunk) => hub.push(chunk));
    expect(Buffer.concat(slow.outputs).toString()).toBe(Buffer.concat(chunks.slice(0, 10)).toString());
    slow.lag = 200; // under a quarter of lagBytes: the next output resyncs it
    chunks.slice(20).forEach((chunk) => hub.push(chunk));
    await hub.settled();
    expect(slow.screens.map((screen) => screen.reason)).toEqual(['attach', 'resync']);
    expect(Buffer.concat(fast.outputs).toString()).toBe(Buffer.concat(chunks).toString());
    // After its screen, the slow viewer is told what it missed: the chunks it was not sent, the one that came with
    // its resync included (the screen shows it).
    const missed = Buffer.concat(chunks.slice(10, 21)).length;
    expect(slow.outputs[0]!.toString()).toBe(`\r\n[smol: ${missed} bytes dropped: this viewer fell behind]\r\n`);
    const final = await terminalText(chunks);
    expect(await terminalText([slow.screens[1]!.serialized, ...slow.outputs.slice(1)])).toBe(final);
    expect(await terminalText(fast.shown())).toBe(final);
  });

  it('a lagging viewer is resynced once it drains even when the guest prints nothing more', async () => {
    const hub = makeHub({ lagBytes: 1000 });
    const slow = new Viewer();
    hub.attach(slow);
    slow.lag = 5000;
    hub.push(Buffer.from('missed\r\n'));
    hub.push(Buffer.from('$ '));
    expect(slow.outputs).toHaveLength(0);
    slow.lag = 0;
    await vi.waitFor(() => expect(slow.screens).toHaveLength(2), { timeout: 2000, interval: 20 });
    expect(slow.screens[1]!.reason).toBe('resync');
    expect(slow.outputs.map(String)).toEqual(['\r\n[smol: 10 bytes dropped: this viewer fell behind]\r\n']);
    expect(await terminalText([slow.screens[1]!.serialized])).toBe('missed\n$');
  });

  it('a flood faster than the screen parses still ends on the right screen for the hub and every viewer', async () => {
    const hub = makeHub({ screenBacklogBytes: 4096, ringBytes: 8192 });
    const early = new Viewer();
    hub.attach(early);
    const chunks = numberedLines(0, 3000);
    const later = [new Viewer(), new Viewer()]; // attached before and after the terminal starts skipping
    chunks.forEach((chunk, i) => {
      if (i === 100) hub.attach(later[0]!);
      if (i === 1500) hub.attach(later[1]!);
      hub.push(chunk);
    });
    await hub.settled();
    const final = await terminalText(chunks);
    expect(hub.screen().text).toBe(final);
    expect(Buffer.concat(early.outputs).toString()).toBe(Buffer.concat(chunks).toString());
    for (const viewer of later) expect(await terminalText(viewer.shown())).toBe(final);
  });
});

describe('logs', () => {
  it('keep the last bytes of output and give its last lines', () => {
    const hub = makeHub({ ringBytes: 64 });
    hub.push(Buffer.from('short\n'));
    expect(hub.logs()).toEqual({ text: 'short\n', truncated: false });
    expect(hub.logs(5)).toEqual({ text: 'short\n', truncated: false });
    const text = Array.from({ length: 20 }, (_, i) => `line ${i + 1}\n`).join('');
    hub.push(Buffer.from(text));
    expect(hub.logs()).toEqual({ text: ('short\n' + text).slice(-64), truncated: true });
    expect(hub.logs(3)).toEqual({ text: 'line 18\nline 19\nline 20\n', truncated: true });
    hub.push(Buffer.from('$ '));
    expect(hub.logs(2).text).toBe('line 20\n$ ');
    expect(hub.logs(0).text).toBe('');
  });

  it('drop a character the ring cut in half instead of showing garbage', () => {
    const hub = makeHub({ ringBytes: 8 });
    hub.push(Buffer.from('ab€€€')); // 11 bytes: the ring keeps the last two bytes of the first €, then €€
    expect(hub.logs()).toEqual({ text: '€€', truncated: true });
  });
});

describe('a character split across chunks', () => {
  it('reads whole in logs, on the screen and in the recording', async () => {
    const hub = makeHub();
    const euro = Buffer.from('€');
    hub.push(Buffer.concat([Buffer.from('price: '), euro.subarray(0, 1)]));
    expect(hub.logs().text).toBe('price: ');
    hub.push(Buffer.concat([euro.subarray(1), Buffer.from(' 5\r\n')]));
    expect(hub.logs().text).toBe('price: € 5\r\n');
    await hub.settled();
    expect(hub.screen().text).toBe('price: € 5');
    await hub.close('done');
    const output = readCast(path.join(dir, 'vm-test.cast')).events.map(([, , text]) => text);
    expect(output.join('')).toBe('price: € 5\r\n');
  });
});

describe('the recording', () => {
  it('is asciicast v2 with times that never go back, even when the clock does', async () => {
    const clock = [T0, T0 + 500, T0 + 1250, T0 + 900, T0 + 3000, T0 + 3000, T0 + 4000];
    let tick = 0;
    const hub = makeHub({ now: () => clock[Math.min(tick++, clock.length - 1)]! });
    hub.push(Buffer.from('boot\r\n'));
    hub.marker('checkpoint sn-1');
    hub.push(Buffer.from('\x1b[31mred\x1b[0m\r\n'));
    hub.input(Buffer.from('ls\r'));
    hub.marker('fork');
    await hub.close('done');
    const { header, events } = readCast(path.join(dir, 'vm-test.cast'));
    expect(header).toEqual({ version: 2, width: 120, height: 40, timestamp: T0 / 1000, title: 'vm-test' });
    const times = events.map(([time]) => time);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(times[0]).toBe(0.5);
    expect(events.every((event) => event.length === 3 && ['o', 'i', 'm'].includes(event[1]))).toBe(true);
  });

  it('puts markers and typed input in order between the output around them', async () => {
    const hub = makeHub();
    hub.push(Buffer.from('a'));
    hub.marker('checkpoint sn-abc: before the install');
    hub.push(Buffer.from('b'));
    hub.input(Buffer.from('ls\n'));
    hub.push(Buffer.from('c'));
    hub.marker('fork ×2 at sn-abc');
    await hub.close('done');
    const { events } = readCast(path.join(dir, 'vm-test.cast'));
    expect(events.map(([, type, text]) => [type, text])).toEqual([
      ['o', 'a'],
      ['m', 'checkpoint sn-abc: before the install'],
      ['o', 'b'],
      ['i', 'ls\n'],
      ['o', 'c'],
      ['m', 'fork ×2 at sn-abc'],
    ]);
  });

  it('continues across an engine restart, timed from the first header', async () => {
    let now = T0;
    const first = makeHub({ now: () => now });
    now = T0 + 1000;
    first.push(Buffer.from('before\r\n'));
    first.marker('suspend sn-1');
    await first.close('the engine stopped');
    now = T0 + 100_000;
    const second = makeHub({ now: () => now });
    second.marker('resume from sn-1');
    second.push(Buffer.from('after\r\n'));
    const file = path.join(dir, 'vm-test.cast');
    expect(second.recordingText()).toMatch(/"after\\r\\n"\]\n$/); // before it reached the disk
    await second.close('done');
    expect(second.recordingText()).toBe(fs.readFileSync(file, 'utf8'));
    const { header, events } = readCast(file);
    expect(header.timestamp).toBe(T0 / 1000);
    expect(events).toEqual([
      [1, 'o', 'before\r\n'],
      [1, 'm', 'suspend sn-1'],
      [100, 'm', 'resume from sn-1'],
      [100, 'o', 'after\r\n'],
    ]);
  });

  it('cut off mid-line by a crash is repaired when the engine reopens it', async () => {
    const file = path.join(dir, 'vm-test.cast');
    const header = { version: 2, width: 120, height: 40, timestamp: T0 / 1000, title: 'vm-test' };
    fs.writeFileSync(file, `${JSON.stringify(header)}\n[7.5,"o","kept"]\n[8.1,"o","unfini`);
    const hub = makeHub({ now: () => T0 + 2000, log: () => undefined });
    hub.push(Buffer.from('new'));
    await hub.close('done');
    expect(readCast(file).events).toEqual([
      [7.5, 'o', 'kept'],
      [7.5, 'o', 'new'],
    ]);
  });

  it('replaces a file that is not a recording, keeping the old one aside', async () => {
    const file = path.join(dir, 'vm-test.cast');
    fs.writeFileSync(file, 'not json\n');
    const hub = makeHub({ now: () => T0, log: () => undefined });
    hub.push(Buffer.from('x'));
    await hub.close('done');
    expect(fs.readFileSync(`${file}.corrupt`, 'utf8')).toBe('not json\n');
    expect(readCast(file).header.version).toBe(2);
  });

  it('records a size change when the console is reopened at another size', async () => {
    await makeHub({ cols: 80, rows: 24 }).close('done');
    const hub = makeHub({ cols: 100, rows: 30 });
    await hub.close('done');
    expect(readCast(path.join(dir, 'vm-test.cast')).events.map(([, type, text]) => [type, text])).toEqual([
      ['r', '100x30'],
    ]);
  });

  it('stops at its size limit, says so once, and keeps taking markers', async () => {
    const hub = makeHub({ recordingBytes: 4096 });
    for (let i = 0; i < 50; i++) {
      hub.push(Buffer.from(`${'x'.repeat(100)}\r\n`));
      await new Promise((resolve) => setTimeout(resolve, 1)); // separate output events
    }
    hub.marker('checkpoint sn-late');
    await hub.close('done');
    const file = path.join(dir, 'vm-test.cast');
    expect(fs.statSync(file).size).toBeLessThanOrEqual(4096);
    const markers = readCast(file).events.filter(([, type]) => type === 'm');
    expect(markers.map(([, , text]) => text)).toEqual([
      'recording stopped: it reached its 4096 bytes limit',
      'checkpoint sn-late',
    ]);
  });
});
