import { describe, expect, it } from 'vitest';
import { chunkedWriter } from './paste.js';
import { safeLink } from './links.js';

describe('links in console output', () => {
  it('opens only plain http(s) addresses', () => {
    expect(safeLink('https://example.com/a?b=c')?.href).toBe('https://example.com/a?b=c');
    expect(safeLink('http://10.0.2.2:8080/')?.host).toBe('10.0.2.2:8080');
    for (const bad of [
      'javascript:alert(1)',
      'file:///etc/passwd',
      'data:text/html,<script>',
      'https://user:pw@example.com/',
      'https://exa\u202emple.com/',
      'not a url',
    ]) {
      expect(safeLink(bad), bad).toBeNull();
    }
  });
});

describe('pasting into a serial console', () => {
  it('sends a long paste in order, chunk by chunk, without splitting a character', async () => {
    const sent: string[] = [];
    const writer = chunkedWriter((data) => sent.push(data), 4, 1);
    writer.write('ab');
    expect(sent).toEqual(['ab']);
    writer.write('0123456789😀x');
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(sent).toEqual(['ab', '0123', '4567', '89😀x']);
  });

  it('drops what is still queued when cancelled', async () => {
    const sent: string[] = [];
    const writer = chunkedWriter((data) => sent.push(data), 2, 5);
    writer.write('aabbcc');
    writer.cancel();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sent).toEqual(['aa']);
  });
});
