// One VM's console in the engine (docs/engine.md, "Consoles"): the guest's output goes to a ring buffer (logs), a
// headless xterm (the screen a viewer gets first), the asciicast recording and every attached viewer, in that order.
// A viewer that falls behind is skipped and later sent the screen again, then a marker line saying how many bytes it
// missed, so no viewer holds up the guest or the others.
import addonSerialize from '@xterm/addon-serialize';
import xtermHeadless from '@xterm/headless';
import type { ConsoleAttachment, ConsoleViewer } from '../api/engine-api.js';
import type { Logs, Screen } from '../api/schema.js';
import { AsciicastRecording } from './asciicast.js';

// Both packages are CommonJS whose exports Node cannot name statically: take them from the module object.
const { Terminal } = xtermHeadless;
const { SerializeAddon } = addonSerialize;

const SCROLLBACK_ROWS = 100;
/** While a viewer lags, this often its backlog is checked even when the guest prints nothing. */
const LAG_CHECK_MS = 100;

export interface ConsoleHubOptions {
  vmId: string;
  /** The asciicast recording; continued when it exists. */
  castPath: string;
  cols?: number;
  rows?: number;
  /** How much recent output `logs` keeps (1 MiB). */
  ringBytes?: number;
  /** A viewer whose backlog passes this is skipped until it drains, then sent the screen again (4 MiB). */
  lagBytes?: number;
  /** The recording stops growing here (256 MiB). */
  recordingBytes?: number;
  /** How far the headless terminal may fall behind the output before it skips to the recent output (8 MiB). */
  screenBacklogBytes?: number;
  /**
   * Take every LF as CR LF on the screen (xterm's convertEol): for a bare serial guest, which prints bare LFs
   * (`bootsBareKernel`, src/api/schema.ts). The recording and the viewers get the bytes as they came.
   */
  implicitCr?: boolean;
  /** The recording's clock, in milliseconds since the Unix epoch. */
  now?: () => number;
  log?: (line: string) => void;
}

/** The last `size` bytes of output. */
class OutputRing {
  readonly #bytes: Buffer;
  #total = 0;

  constructor(size: number) {
    this.#bytes = Buffer.alloc(size);
  }

  /** Whether output older than what the ring holds was dropped. */
  get truncated(): boolean {
    return this.#total > this.#bytes.length;
  }

  write(chunk: Buffer): void {
    const size = this.#bytes.length;
    const kept = chunk.subarray(Math.max(0, chunk.length - size));
    const at = (this.#total + chunk.length - kept.length) % size;
    const first = Math.min(kept.length, size - at);
    kept.copy(this.#bytes, at, 0, first);
    kept.copy(this.#bytes, 0, first);
    this.#total += chunk.length;
  }

  /** A copy of the last `count` bytes (all it holds when count is larger). */
  tail(count = Infinity): Buffer {
    const size = this.#bytes.length;
    const length = Math.min(count, this.#total, size);
    const start = (this.#total - length) % size;
    if (start + length <= size) return Buffer.from(this.#bytes.subarray(start, start + length));
    return Buffer.concat([this.#bytes.subarray(start), this.#bytes.subarray(0, start + length - size)]);
  }

  /** What it holds as text, less a character its start cut in half or the guest has not finished writing. */
  text(): string {
    const bytes = this.tail();
    let start = 0;
    while (this.truncated && start < 3 && ((bytes[start] ?? 0) & 0xc0) === 0x80) start++; // UTF-8 continuation bytes
    return new TextDecoder().decode(bytes.subarray(start), { stream: true });
  }
}

/**
 * The headless terminal, fed the output in order. Its writes are parsed later (xterm parses on a timer), so it keeps
 * the chunks given to it and not yet parsed: a screen taken when the parser reaches offset N plus those chunks is
 * exactly the output. When the parser falls more than `maxBehind` bytes behind, later output is skipped and, once it
 * has caught up, it is given the recent output from the ring instead, so memory stays bounded under a flood.
 */
class ScreenMirror {
  readonly #terminal: InstanceType<typeof Terminal>;
  readonly #serializer = new SerializeAddon();
  #pushed = 0;
  #written = 0;
  #parsed = 0;
  #skipped = 0;
  readonly #unparsed: { end: number; chunk: Buffer }[] = [];
  readonly #waiters: { offset: number; ready: (after: Buffer[]) => void }[] = [];
  #closed = false;

  constructor(
    cols: number,
    rows: number,
    private readonly maxBehind: number,
    private readonly ring: OutputRing,
    convertEol: boolean,
  ) {
    this.#terminal = new Terminal({ cols, rows, scrollback: SCROLLBACK_ROWS, allowProposedApi: true, convertEol });
    this.#terminal.loadAddon(this.#serializer);
  }

  write(chunk: Buffer): void {
    this.#pushed += chunk.length;
    const behind = this.#written - this.#parsed;
    if (this.#skipped > 0 || (behind > 0 && behind + chunk.length > this.maxBehind)) this.#skipped += chunk.length;
    else this.#feed(chunk);
  }

  /** The screen as of the output parsed so far (behind `write` by at most a timer tick, unless flooded). */
  screen(): Screen {
    const buffer = this.#terminal.buffer.active;
    const rows = Array.from({ length: this.#terminal.rows }, (_, y) => buffer.getLine(buffer.baseY + y));
    const text = rows.map((row) => (row?.translateToString(true) ?? '').replace(/ +$/, '')).join('\n');
    return { text: text.replace(/\n+$/, ''), serialized: this.#serializer.serialize() };
  }

  /**
   * Calls `ready` once the screen reflects every byte written so far, at a moment when it reflects exactly the bytes
   * before the chunks `ready` gets: the screen plus those chunks is the output. Synchronous when nothing is pending.
   */
  whenCurrent(ready: (after: Buffer[]) => void): void {
    if (this.#closed || this.#parsed === this.#pushed) ready([]);
    else this.#waiters.push({ offset: this.#pushed, ready });
  }

  close(): void {
    this.#closed = true;
    this.#waiters.length = 0;
  }

  #feed(chunk: Buffer): void {
    const end = (this.#written = this.#pushed);
    this.#unparsed.push({ end, chunk });
    this.#terminal.write(chunk, () => this.#onParsed(end));
  }

  // Runs inside xterm's parse loop, before it parses the next chunk: the screen is exactly the output up to `end`.
  #onParsed(end: number): void {
    if (this.#closed) return;
    this.#parsed = end;
    this.#unparsed.shift();
    if (this.#skipped > 0 && this.#written === end) {
      const skipped = this.#skipped;
      this.#skipped = 0;
      this.#feed(this.ring.tail(skipped));
    }
    // A waiter whose output was partly skipped waits for the catch-up, which covers it.
    while (this.#skipped === 0 && this.#waiters[0] && this.#waiters[0].offset <= end) {
      this.#waiters.shift()!.ready(this.#unparsed.map((entry) => entry.chunk));
    }
  }
}

interface Attached {
  viewer: ConsoleViewer;
  /** `syncing`: waiting for its screen; `lagging`: skipped until its backlog drains. */
  state: 'syncing' | 'live' | 'lagging';
  /** The output offset it had been sent everything before, when it began to lag (null: it is not behind). */
  lagFrom: number | null;
}

/** The line a viewer gets after its resync: how much output it missed (docs/engine.md, "Console back-pressure"). */
export function viewerDropMarker(count: number): Buffer {
  return Buffer.from(`\r\n[smol: ${count} bytes dropped: this viewer fell behind]\r\n`);
}

export class ConsoleHub {
  readonly vmId: string;
  readonly #lagBytes: number;
  readonly #log: (line: string) => void;
  readonly #ring: OutputRing;
  readonly #mirror: ScreenMirror;
  readonly #recording: AsciicastRecording;
  readonly #viewers = new Set<Attached>();
  #lagTimer: NodeJS.Timeout | null = null;
  /** Output bytes pushed so far. */
  #pushed = 0;
  #closing: Promise<void> | null = null;
  #closedReason = '';

  constructor(options: ConsoleHubOptions) {
    const { vmId, castPath, cols = 120, rows = 40, ringBytes = 2 ** 20, lagBytes = 4 * 2 ** 20 } = options;
    const now = options.now ?? Date.now;
    this.vmId = vmId;
    this.#lagBytes = lagBytes;
    this.#log = options.log ?? ((line) => process.stderr.write(`${line}\n`));
    this.#ring = new OutputRing(ringBytes);
    const backlog = options.screenBacklogBytes ?? 8 * 2 ** 20;
    this.#mirror = new ScreenMirror(cols, rows, backlog, this.#ring, options.implicitCr ?? false);
    const maxBytes = options.recordingBytes ?? 256 * 2 ** 20;
    const recording = { path: castPath, width: cols, height: rows, title: vmId, maxBytes, now, log: this.#log };
    this.#recording = new AsciicastRecording(recording);
  }

  /** Guest output: kept for logs and the screen, recorded, and passed to every viewer that keeps up. */
  push(chunk: Buffer): void {
    if (this.#closing || chunk.length === 0) return;
    this.#pushed += chunk.length;
    this.#ring.write(chunk);
    this.#recording.output(chunk);
    this.#mirror.write(chunk);
    for (const attached of [...this.#viewers]) {
      if (attached.state === 'live') {
        const backlog = this.#call(attached, (viewer) => viewer.backlog());
        if (backlog !== undefined && backlog > this.#lagBytes) {
          attached.lagFrom = this.#pushed - chunk.length;
          this.#lag(attached);
        } else if (backlog !== undefined) this.#call(attached, (viewer) => viewer.output(chunk));
      } else if (attached.state === 'lagging') {
        this.#resyncIfDrained(attached);
      }
    }
  }

  /** An asciicast marker, e.g. `checkpoint sn-… note`, `fork ×2 at …`, `restore …`. */
  marker(label: string): void {
    if (!this.#closing) this.#recording.marker(label);
  }

  /** Input typed to the guest, recorded as asciicast input events. */
  input(data: Buffer): void {
    if (!this.#closing) this.#recording.input(data);
  }

  /** The recent output (the ring) as text; with `tailLines`, its last lines. `truncated`: earlier output is left out. */
  logs(tailLines?: number): Logs {
    let truncated = this.#ring.truncated;
    let text = this.#ring.text();
    if (tailLines !== undefined) {
      const ended = text.endsWith('\n');
      const lines = (ended ? text.slice(0, -1) : text).split('\n');
      if (text && lines.length > tailLines) {
        truncated = true;
        text = tailLines === 0 ? '' : lines.slice(-tailLines).join('\n') + (ended ? '\n' : '');
      }
    }
    return { text, truncated };
  }

  /**
   * The visible screen as text, and serialized (escape sequences that redraw it, with its scrollback, in a fresh
   * terminal of the same size). It reflects the output parsed so far; `settled()` first to include every push.
   */
  screen(): Screen {
    return this.#mirror.screen();
  }

  /** Resolves once the screen reflects every byte pushed before the call. */
  settled(): Promise<void> {
    return new Promise((resolve) => this.#mirror.whenCurrent(() => resolve()));
  }

  /** The asciicast recording so far (newline-delimited JSON). */
  recordingText(): string {
    return this.#recording.text();
  }

  /**
   * Sends `viewer` the screen (`screen(serialized, 'attach')`) and then every later output in order: the screen
   * reflects exactly the output before the attach. `write` takes what the viewer types (recording it is the caller's
   * part, with `input`); without it the attachment is read-only.
   */
  attach(viewer: ConsoleViewer, write?: (data: Buffer) => void): ConsoleAttachment {
    if (this.#closing) {
      viewer.closed(this.#closedReason);
      return { write: () => undefined, detach: () => undefined };
    }
    const attached: Attached = { viewer, state: 'syncing', lagFrom: null };
    this.#viewers.add(attached);
    this.#sync(attached, 'attach');
    return {
      write: (data) => {
        if (!write) throw new Error(`the console of ${this.vmId} was attached read-only`);
        write(typeof data === 'string' ? Buffer.from(data) : data);
      },
      detach: () => this.#viewers.delete(attached),
    };
  }

  /** Tells every viewer `closed(reason)`, then writes out and closes the recording. Later output is ignored. */
  close(reason: string): Promise<void> {
    if (this.#closing) return this.#closing;
    this.#closedReason = reason;
    this.#stopLagTimer();
    this.#mirror.close();
    const viewers = [...this.#viewers];
    this.#viewers.clear();
    for (const attached of viewers) this.#call(attached, (viewer) => viewer.closed(reason));
    this.#closing = this.#recording.close();
    return this.#closing;
  }

  #sync(attached: Attached, reason: 'attach' | 'resync'): void {
    attached.state = 'syncing';
    this.#mirror.whenCurrent((after) => {
      if (!this.#viewers.has(attached)) return;
      attached.state = 'live';
      const { serialized } = this.#mirror.screen();
      // The screen stands for the output up to the chunks after it; what it covers past lagFrom the viewer missed.
      const shownUpTo = this.#pushed - after.reduce((sum, chunk) => sum + chunk.length, 0);
      const missed = attached.lagFrom === null ? 0 : Math.max(0, shownUpTo - attached.lagFrom);
      attached.lagFrom = null;
      this.#call(attached, (viewer) => {
        viewer.screen(serialized, reason);
        if (missed > 0) viewer.output(viewerDropMarker(missed));
        for (const chunk of after) viewer.output(chunk);
      });
    });
  }

  #lag(attached: Attached): void {
    attached.state = 'lagging';
    if (this.#lagTimer) return;
    this.#lagTimer = setInterval(() => {
      for (const other of this.#viewers) if (other.state === 'lagging') this.#resyncIfDrained(other);
      if (![...this.#viewers].some((other) => other.state === 'lagging')) this.#stopLagTimer();
    }, LAG_CHECK_MS);
    this.#lagTimer.unref();
  }

  #stopLagTimer(): void {
    if (this.#lagTimer) clearInterval(this.#lagTimer);
    this.#lagTimer = null;
  }

  #resyncIfDrained(attached: Attached): void {
    const backlog = this.#call(attached, (viewer) => viewer.backlog());
    if (backlog !== undefined && backlog < this.#lagBytes / 4) this.#sync(attached, 'resync');
  }

  /** Calls into a viewer; one that throws is detached, so it cannot break the hub or the others. */
  #call<T>(attached: Attached, call: (viewer: ConsoleViewer) => T): T | undefined {
    try {
      return call(attached.viewer);
    } catch (error) {
      this.#viewers.delete(attached);
      this.#log(`console ${this.vmId}: a viewer failed (${(error as Error).message}); detached it`);
      return undefined;
    }
  }
}
