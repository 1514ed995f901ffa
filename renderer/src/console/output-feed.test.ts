import xtermHeadless from '@xterm/headless';
import { describe, expect, it } from 'vitest';
import { OutputFeed, type Output } from './output-feed.js';

const { Terminal } = xtermHeadless;

/** Numbered lines like the flood guest's: "NNNNNN " then letters that depend on the number. */
function line(n: number): string {
  let text = `${String(n).padStart(6, '0')} `;
  for (let i = 7; i < 60; i++) text += String.fromCharCode(97 + ((n + i) % 26));
  return text;
}

/** A real terminal (xterm.js's parser, headless) fed by an OutputFeed, with what it was handed counted. */
function fedTerminal(chunk: number) {
  const terminal = new Terminal({ cols: 80, rows: 24, scrollback: 100_000, allowProposedApi: true });
  const seen = { writes: 0, largest: 0, mostAtOnce: 0, pending: 0 };
  let drained: (() => void) | null = null;
  const feed = new OutputFeed(
    {
      write(data: Output, parsed: () => void) {
        seen.writes++;
        seen.largest = Math.max(seen.largest, data.length);
        seen.mostAtOnce = Math.max(seen.mostAtOnce, ++seen.pending);
        terminal.write(data, () => {
          seen.pending--;
          parsed();
          if (feed.backlog === 0) drained?.();
        });
      },
    },
    chunk,
  );
  const parsedAll = () => new Promise<void>((resolve) => (drained = resolve));
  const text = () => {
    const buffer = terminal.buffer.active;
    const lines: string[] = [];
    for (let y = 0; y < buffer.length; y++) lines.push(buffer.getLine(y)!.translateToString(true));
    while (lines.at(-1) === '') lines.pop();
    return lines;
  };
  return { terminal, feed, seen, parsedAll, text };
}

describe('console output on its way into the terminal', () => {
  it('a flood arrives whole and in order, one chunk at a time in the parser', async () => {
    const { feed, seen, parsedAll, text } = fedTerminal(16 << 10);
    const encoder = new TextEncoder();
    const lines = 20_000; // 1.2 MiB, in messages of 64 KiB as the engine's WebSocket sends them
    let message = '';
    for (let n = 1; n <= lines; n++) {
      message += `${line(n)}\r\n`;
      if (message.length >= 64 << 10 || n === lines) {
        feed.push(encoder.encode(message));
        message = '';
      }
    }
    expect(feed.backlog).toBeGreaterThan(1 << 20);
    await parsedAll();
    expect(text()).toEqual(Array.from({ length: lines }, (_, i) => line(i + 1)));
    expect(seen.mostAtOnce).toBe(1);
    expect(seen.largest).toBe(16 << 10);
    expect(feed.backlog).toBe(0);
  });

  it('characters cut between two chunks arrive whole', async () => {
    const { feed, parsedAll, text } = fedTerminal(1001); // odd: every cut falls inside a character
    const row = 'é€😀'.repeat(10); // 2, 3 and 4 bytes in UTF-8; the emoji is 2 UTF-16 units in a string
    feed.push(new TextEncoder().encode(`${row}\r\n`.repeat(300)));
    feed.push(`${row}\r\n`.repeat(300));
    await parsedAll();
    expect(text()).toEqual(Array.from({ length: 600 }, () => row));
  });

  it('output dropped while the parser is busy is gone, and what comes next follows what it was parsing', async () => {
    const { feed, seen, parsedAll, text } = fedTerminal(64);
    feed.push(Array.from({ length: 100 }, (_, i) => `${line(i + 1)}\r\n`).join(''));
    expect(seen.writes).toBe(1); // the first chunk is in the parser, the rest waits
    feed.drop();
    expect(feed.backlog).toBe(64);
    feed.push('\x1bcthe new screen\r\n'); // what a console does when the engine sends its screen again
    await parsedAll();
    expect(text()).toEqual(['the new screen']);
    expect(seen.writes).toBe(2);
  });
});
