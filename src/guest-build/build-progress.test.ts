import { describe, expect, it } from 'vitest';
import { ProgressDisplay, formatElapsed } from './build-progress.js';

function fakeStream(isTTY: boolean, columns = 80) {
  const writes: string[] = [];
  return { writes, stream: { isTTY, columns, write: (text: string) => writes.push(text) } };
}

describe('guest build progress', () => {
  it('elapsed time reads as minutes:seconds', () => {
    expect(formatElapsed(0)).toBe('0:00');
    expect(formatElapsed(199_900)).toBe('3:19');
  });

  it('without a terminal: a line per step, then one per 10% rather than one per file', () => {
    const { writes, stream } = fakeStream(false);
    let now = 0;
    const display = new ProgressDisplay(stream, () => now);
    display.report({ step: 'kernel configure', detail: 'make tinyconfig' });
    display.report({ step: 'kernel compile', detail: 'make -j3', fraction: 0 });
    for (let i = 1; i <= 100; i++) {
      now += 1000;
      display.report({ step: 'kernel compile', detail: `file${i}.o`, fraction: i / 100 });
    }
    display.finish();
    expect(writes).toHaveLength(2 + 10);
    expect(writes[0]).toBe('kernel configure (0:00): make tinyconfig\n');
    expect(writes[2]).toBe('kernel compile 10% (0:10): file10.o\n');
    expect(writes.every((line) => !line.includes('\r'))).toBe(true);
  });

  it('on a terminal: one line redrawn in place, kept when the step ends, cut to the width', () => {
    const { writes, stream } = fakeStream(true, 40);
    let now = 0;
    const display = new ProgressDisplay(stream, () => now);
    display.report({ step: 'kernel compile', detail: 'a/very/long/path/to/some/file/in/the/kernel.o', fraction: 0.5 });
    now += 10; // too soon to redraw
    display.report({ step: 'kernel compile', detail: 'skipped.o', fraction: 0.5 });
    now += 200;
    display.report({ step: 'kernel compile', detail: 'mm/memory.o', fraction: 0.51 });
    display.report({ step: 'kernel install', detail: 'kernel-aaaa' });
    display.finish();
    expect(writes[0]).toBe('\r\x1b[Kkernel compile 50% (0:00): a/very/long…'); // 39 columns: the last stays free
    expect(writes.join('')).not.toContain('skipped.o');
    expect(writes).toContain('\r\x1b[Kkernel compile 51% (0:00): mm/memory.o');
    expect(writes.join('').split('\n')).toHaveLength(3); // two finished steps, each on its own line
  });
});
