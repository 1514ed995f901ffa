// Costly requests any token may make, taken a few at a time (docs/diff.md, "Cost"): a diff exports each disk twice as
// raw images under SMOL_HOME/run and runs a sandboxed reader over them, so a read-only token sending diffs in a loop
// must not fill the disk nor take every core. Past `atOnce` a request waits its turn; past `maxWaiting` waiting it is
// refused at once with a 503 that says how many run and wait, so the caller can try again.
import { ApiFailure } from '../api/engine-api.js';

export class WorkGate {
  #running = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(
    readonly what: string,
    readonly atOnce: number,
    readonly maxWaiting: number,
  ) {}

  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#running < this.atOnce) this.#running++;
    else if (this.#waiting.length >= this.maxWaiting) {
      throw new ApiFailure(
        503,
        `${this.#running} ${this.what} are running and ${this.#waiting.length} waiting, the most this engine takes ` +
          `(${this.atOnce} at once, ${this.maxWaiting} waiting): try again when one ends`,
        'EBUSY',
      );
    } else await new Promise<void>((resolve) => this.#waiting.push(resolve)); // its slot is handed over, not freed
    try {
      return await work();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    }
  }
}
