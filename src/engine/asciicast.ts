// The asciicast v2 recording of one VM's console (docs/engine.md, "Consoles"; the format:
// https://docs.asciinema.org/manual/asciicast/v2/): a header line, then one JSON array per event, output "o", input
// "i", marker "m" and resize "r", timed in seconds since the header's timestamp. A recording that exists is continued
// (an engine restart appends to it). Events are queued and written in the background, never synchronously per chunk.
import fs from 'node:fs';
import path from 'node:path';

/** Output arriving within this long becomes one event, so byte-at-a-time serial output is not an event per byte. */
const GATHER_MS = 10;
/** An output event is written once its text is this long. */
const GATHER_CHARS = 16 * 1024;
/** Events waiting for the disk beyond this are dropped (a marker says how much), so a slow disk costs no memory. */
const QUEUE_BYTES = 8 * 1024 * 1024;
/** Room kept under the size cap for the marker that says the recording stopped. */
const STOP_MARKER_ROOM = 256;

export interface AsciicastOptions {
  path: string;
  width: number;
  height: number;
  title: string;
  /** The file stops growing here: output and input are no longer recorded, markers still are. */
  maxBytes: number;
  /** Milliseconds since the Unix epoch. */
  now: () => number;
  log: (line: string) => void;
}

interface Existing {
  timestamp: number;
  width: number;
  height: number;
  /** Bytes of complete lines. */
  size: number;
  lastTime: number;
}

export class AsciicastRecording {
  readonly #options: AsciicastOptions;
  #fd: number | null = null;
  /** Unix seconds: event times count from here. */
  readonly #timestamp: number = 0;
  #lastTime = 0;
  /** Bytes of the file that are written; #queue holds the lines after them. */
  #written = 0;
  #queue: string[] = [];
  #queuedBytes = 0;
  #writing: Promise<void> | null = null;
  #gathered = '';
  #gatheredTime = 0;
  #gatherTimer: NodeJS.Timeout | null = null;
  readonly #outputText = new TextDecoder();
  readonly #inputText = new TextDecoder();
  #full = false;
  #droppedBytes = 0;
  #closed = false;

  constructor(options: AsciicastOptions) {
    this.#options = options;
    try {
      fs.mkdirSync(path.dirname(options.path), { recursive: true });
      const existing = this.#readExisting();
      if (existing) {
        this.#timestamp = existing.timestamp;
        this.#lastTime = existing.lastTime;
        this.#written = existing.size;
        this.#fd = fs.openSync(options.path, 'a');
        if (existing.width !== options.width || existing.height !== options.height) {
          this.#event('r', `${options.width}x${options.height}`);
        }
      } else {
        this.#timestamp = Math.floor(options.now() / 1000);
        this.#fd = fs.openSync(options.path, 'w');
        const { width, height, title } = options;
        this.#append(JSON.stringify({ version: 2, width, height, timestamp: this.#timestamp, title }) + '\n');
      }
    } catch (error) {
      options.log(`console: cannot record to ${options.path} (${(error as Error).message}); not recording`);
      this.#fd = null;
      this.#queue = [];
      this.#queuedBytes = 0;
    }
  }

  output(chunk: Buffer): void {
    if (this.#closed) return;
    this.#gather(this.#outputText.decode(chunk, { stream: true }));
  }

  input(chunk: Buffer): void {
    if (this.#closed) return;
    const text = this.#inputText.decode(chunk, { stream: true });
    this.#flushGathered();
    if (text) this.#event('i', text);
  }

  marker(label: string): void {
    if (this.#closed) return;
    this.#flushGathered();
    this.#event('m', label);
  }

  /** The recording so far, as a player reads it: newline-delimited JSON. */
  text(): string {
    this.#flushGathered();
    const written = this.#fd === null ? '' : fs.readFileSync(this.#options.path).subarray(0, this.#written);
    return written.toString() + this.#queue.join('');
  }

  /** Writes everything queued and closes the file; later calls record nothing. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#gather(this.#outputText.decode());
    this.#flushGathered();
    this.#closed = true;
    while (this.#writing) await this.#writing;
    const fd = this.#fd;
    if (fd !== null) await new Promise<void>((resolve) => fs.close(fd, () => resolve()));
  }

  #gather(text: string): void {
    if (!text) return;
    if (!this.#gathered) {
      this.#gatheredTime = this.#time();
      this.#gatherTimer = setTimeout(() => this.#flushGathered(), GATHER_MS);
      this.#gatherTimer.unref();
    }
    this.#gathered += text;
    if (this.#gathered.length >= GATHER_CHARS) this.#flushGathered();
  }

  #flushGathered(): void {
    if (this.#gatherTimer) clearTimeout(this.#gatherTimer);
    this.#gatherTimer = null;
    const text = this.#gathered;
    this.#gathered = '';
    if (text) this.#event('o', text, this.#gatheredTime);
  }

  /** Seconds since the header's timestamp, never less than the last event's (the wall clock may step back). */
  #time(): number {
    const seconds = Math.round((this.#options.now() - this.#timestamp * 1000) * 1000) / 1e6;
    this.#lastTime = Math.max(this.#lastTime, seconds);
    return this.#lastTime;
  }

  #event(type: 'o' | 'i' | 'm' | 'r', text: string, time = this.#time()): void {
    const line = JSON.stringify([time, type, text]) + '\n';
    if (type === 'o' || type === 'i') {
      if (this.#full) return;
      const bytes = Buffer.byteLength(line);
      if (this.#written + this.#queuedBytes + bytes > this.#options.maxBytes - STOP_MARKER_ROOM) {
        this.#full = true;
        const max = this.#options.maxBytes;
        const limit = max >= 2 ** 20 ? `${Math.round(max / 2 ** 20)} MiB` : `${max} bytes`;
        this.#append(JSON.stringify([time, 'm', `recording stopped: it reached its ${limit} limit`]) + '\n');
        return;
      }
      if (this.#queuedBytes > QUEUE_BYTES) {
        this.#droppedBytes += bytes;
        return;
      }
      if (this.#droppedBytes > 0) {
        const note = `recording skipped ${this.#droppedBytes} bytes of events: the disk fell behind`;
        this.#append(JSON.stringify([time, 'm', note]) + '\n');
        this.#droppedBytes = 0;
      }
    }
    this.#append(line);
  }

  #append(line: string): void {
    this.#queue.push(line);
    this.#queuedBytes += Buffer.byteLength(line);
    if (!this.#writing && this.#fd !== null) this.#writing = this.#drain(this.#fd);
  }

  async #drain(fd: number): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const lines = this.#queue.length;
        const data = Buffer.from(this.#queue.join(''));
        for (let done = 0; done < data.length;) done += await writeSome(fd, data.subarray(done));
        this.#queue.splice(0, lines);
        this.#queuedBytes -= data.length;
        this.#written += data.length;
      }
    } catch (error) {
      this.#options.log(`console: writing ${this.#options.path} failed (${(error as Error).message}); not recording`);
      this.#full = true;
      this.#queue = [];
      this.#queuedBytes = 0;
    } finally {
      this.#writing = null;
    }
  }

  /**
   * The recording already at the path, with a cut-off last line (the engine died mid-write) removed; null when there
   * is none. One whose header is not asciicast v2 is moved aside to `.corrupt`.
   */
  #readExisting(): Existing | null {
    const file = this.#options.path;
    let fd: number;
    try {
      fd = fs.openSync(file, 'r+');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
    try {
      const size = fs.fstatSync(fd).size;
      if (size === 0) return null;
      const headerEnd = firstNewline(fd, size);
      const header = headerEnd < 0 ? null : parseHeader(readRange(fd, 0, headerEnd));
      if (!header) {
        fs.renameSync(file, `${file}.corrupt`);
        this.#options.log(`console: ${file} is not an asciicast v2 recording; moved it to ${file}.corrupt`);
        return null;
      }
      const lastEnd = lastNewlineBefore(fd, size, headerEnd);
      if (lastEnd + 1 < size) {
        fs.ftruncateSync(fd, lastEnd + 1);
        this.#options.log(`console: ${file} ended in a cut-off line; removed it`);
      }
      const previous = lastNewlineBefore(fd, lastEnd, headerEnd);
      return { ...header, size: lastEnd + 1, lastTime: eventTime(readRange(fd, previous + 1, lastEnd)) };
    } finally {
      fs.closeSync(fd);
    }
  }
}

function writeSome(fd: number, data: Buffer): Promise<number> {
  return new Promise((resolve, reject) =>
    fs.write(fd, data, (error, written) => (error ? reject(error) : resolve(written))),
  );
}

function readRange(fd: number, start: number, end: number): string {
  const buffer = Buffer.alloc(end - start);
  fs.readSync(fd, buffer, 0, buffer.length, start);
  return buffer.toString();
}

/** The offset of the header's newline (a header is short); -1 when there is none. */
function firstNewline(fd: number, size: number): number {
  const head = Buffer.alloc(Math.min(size, 64 * 1024));
  fs.readSync(fd, head, 0, head.length, 0);
  return head.indexOf(10);
}

/** The offset of the last newline before `end` and at or after `floor`; -1 when there is none. */
function lastNewlineBefore(fd: number, end: number, floor: number): number {
  const window = Buffer.alloc(64 * 1024);
  for (let stop = end; stop > floor;) {
    const start = Math.max(floor, stop - window.length);
    const read = fs.readSync(fd, window, 0, stop - start, start);
    const at = window.subarray(0, read).lastIndexOf(10);
    if (at >= 0) return start + at;
    stop = start;
  }
  return -1;
}

function parseHeader(line: string): Omit<Existing, 'size' | 'lastTime'> | null {
  try {
    const header = JSON.parse(line) as Record<string, unknown>;
    const { version, timestamp, width, height } = header;
    if (version !== 2 || typeof timestamp !== 'number' || !Number.isFinite(timestamp)) return null;
    if (typeof width !== 'number' || typeof height !== 'number') return null;
    return { timestamp, width, height };
  } catch {
    return null;
  }
}

/** The time of an event line; 0 for the header or a line that is not an event. */
function eventTime(line: string): number {
  try {
    const event = JSON.parse(line) as unknown;
    return Array.isArray(event) && typeof event[0] === 'number' ? event[0] : 0;
  } catch {
    return 0;
  }
}
