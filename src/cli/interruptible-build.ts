// A build run from the command line (`smol guest build`, `smol image build`): its progress on stderr, and Ctrl-C
// (or SIGTERM, SIGHUP) aborting it, so that the builder removes what it started, before exiting with 128 + N.
import { constants as os } from 'node:os';
import { ProgressDisplay } from '../guest-build/build-progress.js';
import type { ProgressCallback } from '../guest-build/build-progress.js';
import { CommandError } from './errors.js';

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Runs `build`; a failure becomes a CommandError `<what> failed: <why>`, an interruption one with 128 + N. `display` is
 * handed over for a builder that draws lines of its own (`smol image pull`'s layers): it ends the step's line first.
 */
export async function runInterruptibleBuild<T>(
  what: string,
  build: (onProgress: ProgressCallback, signal: AbortSignal, display: ProgressDisplay) => Promise<T>,
): Promise<T> {
  const display = new ProgressDisplay(process.stderr);
  const abort = new AbortController();
  let stoppedBy: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    stoppedBy ??= signal;
    abort.abort();
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  try {
    const result = await build(display.report, abort.signal, display);
    display.finish();
    return result;
  } catch (err) {
    display.finish();
    if (stoppedBy) throw new CommandError('interrupted; the partial build was removed', 128 + os.signals[stoppedBy]);
    throw new CommandError(`${what} failed: ${(err as Error).message}`);
  } finally {
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
  }
}
