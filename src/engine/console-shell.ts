// Drives the shell on a Linux guest's serial console: waits for text, runs a command and reads back its output and
// exit status. The engine uses it to bake base snapshots until the guest agent takes that over (docs/engine.md).

/** Keeps this much of the recent output to match against; enough for any marker plus a command's output. */
const WINDOW_CHARS = 256 * 1024;

export class ConsoleShell {
  #text = '';
  /** How many characters were dropped from the front of #text: offsets are absolute. */
  #dropped = 0;
  #waiters = new Set<() => void>();
  #marks = 0;
  /** Set once the guest ended: every wait fails at once with it (the engine's exit event says why). */
  #ended: string | null = null;

  constructor(private readonly write: (data: string) => void) {}

  /** Call with every chunk of console output. */
  feed(chunk: Buffer): void {
    this.#text += chunk.toString('latin1');
    if (this.#text.length > WINDOW_CHARS * 2) {
      this.#dropped += this.#text.length - WINDOW_CHARS;
      this.#text = this.#text.slice(-WINDOW_CHARS);
    }
    for (const wake of [...this.#waiters]) wake();
  }

  /**
   * The guest ended (its VM exited or its vmhost died): waits still pending, and any made later, fail now with `why`
   * and the console's last output, instead of running out their time (a guest whose KVM fails at once).
   */
  guestEnded(why: string): void {
    this.#ended ??= why;
    for (const wake of [...this.#waiters]) wake();
  }

  /** The output seen so far (its recent part). */
  get text(): string {
    return this.#text;
  }

  /** The absolute offset of the next output character. */
  get end(): number {
    return this.#dropped + this.#text.length;
  }

  /** Resolves with the first match in the output from `from` on; rejects after `timeoutMs`, quoting the output. */
  waitFor(pattern: RegExp, timeoutMs: number, from = 0): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(this.#text.slice(Math.max(0, from - this.#dropped)));
        if (!match && this.#ended === null) return false;
        done();
        if (match) resolve(match);
        else reject(new Error(`the guest ended before it printed ${pattern}: ${this.#ended}${this.#tail()}`));
        return true;
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`the guest did not print ${pattern} within ${timeoutMs / 1000} s${this.#tail()}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(wake);
      };
      const wake = () => void check();
      if (!check()) this.#waiters.add(wake);
    });
  }

  /** The console's last output for a message, or that it printed nothing (never an empty quote). */
  #tail(): string {
    const last = this.#text.slice(-600);
    return last.trim() === '' ? '; its console printed nothing' : `; its console ended with:\n${last}`;
  }

  /**
   * Types `command` wrapped in markers the shell computes (so the echo of the typed line never matches them) and
   * resolves with its output and exit status.
   */
  async run(command: string, timeoutMs: number): Promise<{ output: string; status: number }> {
    const n = ++this.#marks;
    const from = this.end;
    this.write(`echo "<<smol:$((${n})):begin>>"; ${command}\necho "<<smol:$((${n})):end:$?>>"\n`);
    const match = await this.waitFor(
      new RegExp(`<<smol:${n}:begin>>\\r?\\n([\\s\\S]*?)<<smol:${n}:end:(\\d+)>>`),
      timeoutMs,
      from,
    );
    return { output: match[1]!.replace(/\r\n/g, '\n'), status: Number(match[2]) };
  }
}
