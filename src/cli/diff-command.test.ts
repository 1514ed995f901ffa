// `smol diff`'s human output (docs/diff.md): names and link targets from a guest's disk reach the terminal with their
// control characters escaped, JSON-style; --json prints them as they are.
import { describe, expect, it, vi } from 'vitest';
import type { DiffResponse } from '../api/diff-schema.js';
import { escapeForTerminal, formatDiff } from './diff-command.js';
import { printJson } from './engine-cli.js';

const meta = { type: 'symlink' as const, mode: '0777', uid: 0, gid: 0, size: 3 };

function response(): DiffResponse {
  return {
    from: { id: 's1', name: 'one', vm: 'vm' },
    to: { id: 's2', name: 'two', vm: 'vm' },
    disks: [
      {
        device: 'virtio-blk',
        error: null,
        added: 1,
        removed: 0,
        changed: 1,
        truncated: false,
        problems: ['/bad\x1b[2J: a directory seen before (a loop), not followed'],
        files: [
          {
            path: '/evil\x1b]0;owned\x07\nname',
            change: 'added',
            before: null,
            after: { ...meta, target: '/etc\x1b[31m\r\u009b' },
            fields: [],
          },
          {
            path: '/notes\n.txt',
            change: 'changed',
            before: { ...meta, type: 'file' },
            after: { ...meta, type: 'file', size: 4 },
            fields: ['size'],
            diff: '--- a/notes\n.txt\n+++ b/notes\n.txt\n@@ -1 +1 @@\n-a\x1b[1m\n+b\tc\x7f\n',
          },
        ],
      },
    ],
    console: { text: null, note: 'none' },
    timings: { exportMs: 0, readMs: 0 },
  };
}

describe('smol diff output', () => {
  it('escapes C0, DEL, C1 and ESC in guest names, targets, problems and diff lines', () => {
    const text = formatDiff(response());
    expect(text).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/); // eslint-disable-line no-control-regex
    expect(text.split('\n')).toEqual([
      'one (s1) -> two (s2)',
      'virtio-blk: 1 added, 0 removed, 1 changed',
      '  ! /bad\\u001b[2J: a directory seen before (a loop), not followed',
      '  + /evil\\u001b]0;owned\\u0007\\nname  symlink 0777 0:0 3  -> /etc\\u001b[31m\\r\\u009b',
      '  ~ /notes\\n.txt  size 3->4',
      '    --- a/notes\\n.txt',
      '    +++ b/notes\\n.txt',
      '    @@ -1 +1 @@',
      '    -a\\u001b[1m',
      '    +b\tc\\u007f',
      'console: none',
      '',
    ]);
  });

  it('escapes the backslash too, so an escape seen was made here', () => {
    expect(escapeForTerminal('a\\nb\n')).toBe('a\\\\nb\\n');
    expect(escapeForTerminal('plain/é')).toBe('plain/é');
  });

  it('--json keeps the strings as they are', () => {
    let printed = '';
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      printed += String(chunk);
      return true;
    });
    try {
      printJson(response());
    } finally {
      write.mockRestore();
    }
    expect(JSON.parse(printed)).toEqual(response());
  });
});
