// The Ctrl-A escape of `smol boot`'s console, as in QEMU's -nographic: Ctrl-A x quits, Ctrl-A Ctrl-A sends a
// literal Ctrl-A, Ctrl-A h prints help; any other key after Ctrl-A is dropped.

export const CTRL_A = 0x01;

export type EscapeAction = { kind: 'send'; data: Buffer } | { kind: 'quit' } | { kind: 'help' };

export const ESCAPE_HELP = [
  'Ctrl-A x       quit (kills the VM)',
  'Ctrl-A Ctrl-A  send Ctrl-A to the guest',
  'Ctrl-A h       this help',
];

export class ConsoleEscape {
  #afterCtrlA = false;
  #quit = false;

  /** Splits typed input into bytes for the guest and escape commands. After a quit everything is dropped. */
  feed(chunk: Buffer): EscapeAction[] {
    const actions: EscapeAction[] = [];
    let segment: number[] = [];
    const flush = () => {
      if (segment.length > 0) actions.push({ kind: 'send', data: Buffer.from(segment) });
      segment = [];
    };
    for (const byte of chunk) {
      if (this.#quit) break;
      if (!this.#afterCtrlA) {
        if (byte === CTRL_A) this.#afterCtrlA = true;
        else segment.push(byte);
        continue;
      }
      this.#afterCtrlA = false;
      const key = String.fromCharCode(byte);
      if (byte === CTRL_A) {
        segment.push(CTRL_A);
      } else if (key === 'x' || key === 'X') {
        flush();
        this.#quit = true;
        actions.push({ kind: 'quit' });
      } else if (key === 'h' || key === 'H' || key === '?') {
        flush();
        actions.push({ kind: 'help' });
      }
    }
    flush();
    return actions;
  }
}
