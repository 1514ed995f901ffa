// The plain text on a recording's screen at a moment: what a snapshot's details show as "the screen when taken".
import { Terminal } from '@xterm/xterm';
import { outputIndexAt, type Recording } from './asciicast.js';

/**
 * Replays the output up to `time` into a terminal that is never shown, and reads its screen; `implicitCr` as the
 * console of that VM (console/implicit-cr.ts).
 */
export function screenAt(recording: Recording, time: number, implicitCr = false): Promise<string> {
  const terminal = new Terminal({
    convertEol: implicitCr,
    cols: recording.width,
    rows: recording.height,
    scrollback: 0,
    allowProposedApi: true,
  });
  const data = recording.output
    .slice(0, outputIndexAt(recording, time))
    .map((o) => o.data)
    .join('');
  return new Promise((resolve) => {
    terminal.write(data, () => {
      const buffer = terminal.buffer.active;
      const lines: string[] = [];
      for (let y = 0; y < terminal.rows; y++) {
        lines.push(buffer.getLine(buffer.viewportY + y)?.translateToString(true) ?? '');
      }
      terminal.dispose();
      resolve(lines.join('\n').replace(/\n+$/, ''));
    });
  });
}
