// Progress of a guest build: builders report steps to a callback; the display turns them into one live line on a
// terminal, or into plain lines (a line per step, then one per 10% or per minute) when the output is a file or pipe.

export interface BuildProgress {
  /** What is being done, e.g. `kernel compile`; a new value starts a new step. */
  step: string;
  /** The latest detail: the file being compiled, the package being installed. */
  detail: string;
  /** 0…1 when the builder can estimate it. */
  fraction?: number;
}

export type ProgressCallback = (progress: BuildProgress) => void;

export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

const TTY_REFRESH_MS = 100;
const PLAIN_QUIET_MS = 60_000;

export function formatElapsed(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, '0')}`;
}

function percent(fraction: number | undefined): string {
  return fraction === undefined ? '' : ` ${Math.floor(Math.min(1, Math.max(0, fraction)) * 100)}%`;
}

export class ProgressDisplay {
  private step: string | undefined;
  private stepStarted = 0;
  private last: BuildProgress | undefined;
  private lastDraw = 0;
  private lastPlainDecile = -1;
  private lastPlainAt = 0;
  private liveLine = false;

  constructor(
    private readonly out: ProgressStream,
    private readonly now: () => number = Date.now,
  ) {}

  /** The callback to hand to the builders. */
  readonly report: ProgressCallback = (progress) => this.update(progress);

  update(progress: BuildProgress): void {
    const now = this.now();
    const newStep = progress.step !== this.step;
    if (newStep) {
      this.endStep(now);
      this.step = progress.step;
      this.stepStarted = now;
      this.lastPlainDecile = -1;
    }
    this.last = progress;
    if (this.out.isTTY) {
      if (newStep || now - this.lastDraw >= TTY_REFRESH_MS) this.drawLive(now);
      return;
    }
    const decile = progress.fraction === undefined ? -1 : Math.floor(progress.fraction * 10);
    if (newStep || decile > this.lastPlainDecile || now - this.lastPlainAt >= PLAIN_QUIET_MS) {
      this.lastPlainDecile = Math.max(decile, this.lastPlainDecile);
      this.lastPlainAt = now;
      this.out.write(`${this.describe(progress, now)}\n`);
    }
  }

  /** Ends the current step's line; on a terminal it stays on screen as the step last reported it. */
  finish(): void {
    this.endStep(this.now());
    this.step = undefined;
  }

  private describe(progress: BuildProgress, now: number): string {
    const detail = progress.detail ? `: ${progress.detail}` : '';
    return `${progress.step}${percent(progress.fraction)} (${formatElapsed(now - this.stepStarted)})${detail}`;
  }

  private drawLive(now: number): void {
    if (!this.last) return;
    const width = Math.max(20, (this.out.columns || 80) - 1); // 0 when the terminal did not say
    let line = this.describe(this.last, now);
    if (line.length > width) line = `${line.slice(0, width - 1)}…`;
    this.out.write(`\r\x1b[K${line}`);
    this.liveLine = true;
    this.lastDraw = now;
  }

  private endStep(now: number): void {
    if (!this.out.isTTY || !this.liveLine) return;
    this.drawLive(now);
    this.out.write('\n');
    this.liveLine = false;
  }
}
