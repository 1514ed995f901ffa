import { describe, expect, it } from 'vitest';
import { ConsoleEscape, CTRL_A, type EscapeAction } from './console-escape.js';

const bytes = (text: string) => Buffer.from(text, 'latin1');
const sent = (actions: EscapeAction[]) =>
  Buffer.concat(actions.flatMap((a) => (a.kind === 'send' ? [a.data] : []))).toString('latin1');
const kinds = (actions: EscapeAction[]) => actions.map((a) => a.kind);

describe('console Ctrl-A escape', () => {
  it('passes ordinary typing through untouched, control characters included', () => {
    const escape = new ConsoleEscape();
    expect(escape.feed(bytes('ls -l\r\x03\x1b[A'))).toEqual([{ kind: 'send', data: bytes('ls -l\r\x03\x1b[A') }]);
  });

  it('Ctrl-A x quits', () => {
    expect(new ConsoleEscape().feed(bytes('\x01x'))).toEqual([{ kind: 'quit' }]);
  });

  it('sends what was typed before Ctrl-A x, and nothing after it', () => {
    const escape = new ConsoleEscape();
    const actions = escape.feed(bytes('abc\x01xdef'));
    expect(actions).toEqual([{ kind: 'send', data: bytes('abc') }, { kind: 'quit' }]);
    expect(escape.feed(bytes('more'))).toEqual([]);
  });

  it('Ctrl-A Ctrl-A sends one literal Ctrl-A', () => {
    expect(sent(new ConsoleEscape().feed(bytes('a\x01\x01b')))).toBe('a\x01b');
  });

  it('recognizes an escape split across two reads', () => {
    const escape = new ConsoleEscape();
    expect(sent(escape.feed(bytes('abc\x01')))).toBe('abc');
    expect(escape.feed(bytes('x'))).toEqual([{ kind: 'quit' }]);

    const literal = new ConsoleEscape();
    literal.feed(Buffer.from([CTRL_A]));
    expect(sent(literal.feed(Buffer.from([CTRL_A, 0x41])))).toBe('\x01A');
  });

  it('Ctrl-A h asks for help and keeps going', () => {
    const escape = new ConsoleEscape();
    expect(kinds(escape.feed(bytes('a\x01hb')))).toEqual(['send', 'help', 'send']);
  });

  it('drops an unknown key after Ctrl-A, as QEMU does', () => {
    expect(sent(new ConsoleEscape().feed(bytes('a\x01qb')))).toBe('ab');
  });

  it('Ctrl-A alone sends nothing until the next key', () => {
    expect(new ConsoleEscape().feed(bytes('\x01'))).toEqual([]);
  });
});
