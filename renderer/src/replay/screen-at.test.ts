// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';
import { parseAsciicast } from './asciicast.js';
import { screenAt } from './screen-at.js';

describe('the screen when a snapshot was taken', () => {
  it('is what the terminal showed at its marker: later output and cleared lines are not on it', async () => {
    const recording = parseAsciicast(
      [
        '{"version":2,"width":20,"height":3}',
        '[0.1,"o","one\\r\\ntwo\\r\\n"]',
        '[0.2,"o","three\\r\\nfour"]',
        '[0.3,"m","checkpoint step-1"]',
        '[0.4,"o","\\u001b[2J\\u001b[Hafter"]',
      ].join('\n'),
    );
    expect(await screenAt(recording, 0.3)).toBe('two\nthree\nfour');
    expect(await screenAt(recording, 1)).toBe('after');
    expect(await screenAt(recording, 0)).toBe('');
  });
});
