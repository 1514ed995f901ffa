// Console output from a vmhost to its engine, bounded (docs/engine.md, "Console back-pressure"): the vmhost counts
// the bytes it has sent and the engine has not yet said it took (its `consoleTaken` calls). Past `limit` bytes in
// flight the vmhost stops reading its VMs' console output (Vm.holdConsole) until the engine has taken enough that
// half the limit is free. While it is held, the VMM's ring fills and the VMM's slow-reader policy applies: a guest
// waits for room a moment (lossless while the engine is merely slow), then its output is dropped and later marked
// (the engine stopped). So an engine that stops reading costs a vmhost at most `limit` bytes and never stalls a guest.

export const CONSOLE_IN_FLIGHT_LIMIT = 8 * 2 ** 20;

export class ConsoleCredit {
  #inFlight = 0;
  #held = false;

  constructor(
    private readonly send: (vm: string, data: Buffer) => void,
    /** Stops (true) or resumes (false) reading every VM's console output. */
    private readonly hold: (held: boolean) => void,
    readonly limit = CONSOLE_IN_FLIGHT_LIMIT,
  ) {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`the console's in-flight limit ${limit} (SMOL_CONSOLE_IN_FLIGHT) is not a positive integer`);
    }
  }

  /** Bytes sent and not yet taken by the engine. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Whether console output is held (not read) for now. */
  get held(): boolean {
    return this.#held;
  }

  /** Output of `vm`, read already: sent; past the limit, reading stops. */
  output(vm: string, data: Buffer): void {
    this.#inFlight += data.length;
    this.send(vm, data);
    if (!this.#held && this.#inFlight > this.limit) {
      this.#held = true;
      this.hold(true);
    }
  }

  /** The engine took `bytes` of what was sent; with half the limit free, reading resumes. */
  taken(bytes: number): void {
    this.#inFlight = Math.max(0, this.#inFlight - bytes);
    if (this.#held && this.#inFlight <= this.limit / 2) {
      this.#held = false;
      this.hold(false);
    }
  }
}
