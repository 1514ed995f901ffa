// Output on its way into a console's terminal. xterm.js parses what it is written in time slices of about 12 ms, but
// never splits a write, and keeps everything it is given in its own queue (discarding past 50 MB). So output waits
// here instead and is handed over one chunk at a time, the next when xterm.js has parsed the last (its write
// callback: the "flow control" of xterm.js's guide). xterm.js holds one chunk at most: what waits here is the page's
// whole backlog, and when it no longer matters (a new screen came, or the page fell too far behind) it is dropped at
// once instead of being parsed first.

export type Output = string | Uint8Array;

/** What output is fed to: a terminal's write, whose callback runs once the data is parsed. */
export interface FeedTarget {
  write(data: Output, parsed: () => void): void;
}

export class OutputFeed {
  readonly #waiting: Output[] = [];
  /** Index in #waiting of the first output not yet handed over in full, and how much of it was. */
  #first = 0;
  #offset = 0;
  #waitingLength = 0;
  /** Length of the chunk xterm.js is parsing; 0 when it has nothing of ours. */
  #handed = 0;

  /** `chunk`: the most handed over in one write (UTF-16 units of a string, bytes of an array). */
  constructor(
    readonly target: FeedTarget,
    readonly chunk: number,
  ) {}

  /** Output given and not parsed yet: what waits here and the chunk xterm.js is parsing. */
  get backlog(): number {
    return this.#waitingLength + this.#handed;
  }

  push(data: Output): void {
    if (data.length === 0) return;
    this.#waiting.push(data);
    this.#waitingLength += data.length;
    if (this.#handed === 0) this.#handOver();
  }

  /** Drops what waits here; the chunk xterm.js has is parsed, and output pushed from now on follows it. */
  drop(): void {
    this.#waiting.length = 0;
    this.#first = 0;
    this.#offset = 0;
    this.#waitingLength = 0;
  }

  #handOver(): void {
    const data = this.#waiting[this.#first];
    if (data === undefined) return;
    const end = Math.min(data.length, this.#offset + this.chunk);
    let piece: Output = data;
    if (this.#offset > 0 || end < data.length) {
      piece = typeof data === 'string' ? data.slice(this.#offset, end) : data.subarray(this.#offset, end);
    }
    if (end < data.length) {
      this.#offset = end;
    } else {
      this.#offset = 0;
      this.#first++;
      // Handed-over entries are cut off now and then, not shifted one by one (a long queue of small messages).
      if (this.#first === this.#waiting.length) {
        this.#waiting.length = 0;
        this.#first = 0;
      } else if (this.#first >= 1024) {
        this.#waiting.splice(0, this.#first);
        this.#first = 0;
      }
    }
    this.#waitingLength -= piece.length;
    this.#handed = piece.length;
    this.target.write(piece, () => {
      this.#handed = 0;
      this.#handOver();
    });
  }
}
