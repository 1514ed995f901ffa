// Forwards the terminal's input to a VM's serial console: raw mode on a TTY (restored on every exit path), the
// Ctrl-A escapes, and backpressure (input the VM cannot take yet is retried later while stdin is paused).
import type { Readable, Writable } from 'node:stream';
import { ConsoleEscape, ESCAPE_HELP } from './console-escape.js';

/** Where typed bytes go; returns how many it accepted (a Vm's `write`). */
export interface ConsoleSink {
  write(data: Buffer): number;
}

export type TerminalInput = Readable & { isTTY?: boolean; setRawMode?(mode: boolean): unknown };

export interface ConsoleInputOptions {
  input: TerminalInput;
  /** Where escape help goes (stderr), so it never mixes with guest output on stdout. */
  notices: Writable;
  /** How long to wait before offering the VM input it refused; 10 ms when omitted. */
  retryMs?: number;
}

export class ConsoleInput {
  /** Settles when the user typed Ctrl-A x. */
  readonly quit: Promise<void>;
  #sink: ConsoleSink;
  #input: TerminalInput;
  #notices: Writable;
  #retryMs: number;
  #escape = new ConsoleEscape();
  #queue: Buffer[] = [];
  #retry: NodeJS.Timeout | undefined;
  #pausedForSink = false;
  #attached = false;
  #raw = false;
  #onQuit!: () => void;
  #restoreAtExit = () => this.#leaveRawMode();
  #onData = (chunk: Buffer | string) => this.#receive(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);

  constructor(sink: ConsoleSink, options: ConsoleInputOptions) {
    this.#sink = sink;
    this.#input = options.input;
    this.#notices = options.notices;
    this.#retryMs = options.retryMs ?? 10;
    this.quit = new Promise((resolve) => (this.#onQuit = resolve));
  }

  /** Starts forwarding. End of input is not a quit: the guest decides when the VM ends. */
  attach(): void {
    if (this.#attached) return;
    this.#attached = true;
    if (this.#input.isTTY && this.#input.setRawMode) {
      this.#input.setRawMode(true);
      this.#raw = true;
      process.once('exit', this.#restoreAtExit);
    }
    this.#input.on('data', this.#onData);
    this.#input.resume();
  }

  /** Stops forwarding, drops input the VM has not taken, and gives the terminal back as it was. */
  detach(): void {
    if (!this.#attached) return;
    this.#attached = false;
    clearTimeout(this.#retry);
    this.#queue = [];
    this.#input.off('data', this.#onData);
    this.#input.pause();
    this.#leaveRawMode();
    process.off('exit', this.#restoreAtExit);
  }

  #leaveRawMode(): void {
    if (!this.#raw) return;
    this.#raw = false;
    this.#input.setRawMode?.(false);
  }

  #receive(chunk: Buffer): void {
    for (const action of this.#escape.feed(chunk)) {
      if (action.kind === 'send') this.#queue.push(action.data);
      else if (action.kind === 'help') this.#notices.write(ESCAPE_HELP.map((line) => `${line}\n`).join(''));
      else this.#onQuit();
    }
    this.#pump();
  }

  #pump(): void {
    clearTimeout(this.#retry);
    this.#retry = undefined;
    while (this.#attached && this.#queue.length > 0) {
      const head = this.#queue[0]!;
      let accepted: number;
      try {
        accepted = this.#sink.write(head);
      } catch (err) {
        // The VM ended between the keystroke and now; what it did not take is dropped, and boot reports the exit.
        this.#queue = [];
        this.#notices.write(`smol: console input dropped: ${(err as Error).message}\n`);
        return;
      }
      if (accepted < head.length) {
        this.#queue[0] = head.subarray(accepted);
        this.#pausedForSink = true;
        this.#input.pause();
        this.#retry = setTimeout(() => this.#pump(), this.#retryMs);
        return;
      }
      this.#queue.shift();
    }
    if (this.#attached && this.#pausedForSink) {
      this.#pausedForSink = false;
      this.#input.resume();
    }
  }
}
