// `smol diff A B [--json]`: what changed between two snapshots of an episode (docs/diff.md): each disk's files
// added, removed and changed, with unified diffs of changed text files, and the console output between the points.
import type { DiffResponse, FileChange } from '../api/diff-schema.js';
import { helpOr, JSON_FLAG, parseCommand, printJson, withEngine } from './engine-cli.js';

export const DIFF_HELP = `Usage: smol diff FROM TO [--json]

Compares two snapshots (checkpoints) of one episode: for each disk, the files added (+), removed (-) and changed
(~, with what changed: mode, owner, size, target, content), a unified diff of each changed text file of at most
64 KiB (SMOL_DIFF_TEXT_BYTES in the engine's environment), and the console output recorded between the two points.
The disks are read by e2fsprogs' debugfs in a sandbox, never mounted (docs/diff.md).

  smol diff checkpoint-1 checkpoint-2
  smol diff checkpoint-1 checkpoint-2 --json
`;

const JSON_ESCAPES: Record<string, string> = { '\b': '\\b', '\t': '\\t', '\n': '\\n', '\f': '\\f', '\r': '\\r' };

/** One control character (C0, DEL, C1) as JSON writes it: \n, \t, \u001b. */
function escapeControl(c: string): string {
  return JSON_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/**
 * A guest's name, link target or message for one line of a terminal: every control character (C0, DEL, C1: ESC,
 * CSI, newlines) and the backslash written JSON-style, so a disk cannot move the cursor, recolour the terminal or
 * forge lines. --json prints the strings as they are (JSON escapes them itself).
 */
export function escapeForTerminal(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\\\u0000-\u001f\u007f-\u009f]/g, (c) => (c === '\\' ? '\\\\' : escapeControl(c)));
}

/** A text diff's body: its newlines and tabs kept, its other control characters escaped. */
function escapeLines(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, escapeControl);
}

function describe(file: FileChange): string {
  const sign = { added: '+', removed: '-', changed: '~' }[file.change];
  const meta = file.after ?? file.before!;
  const parts = [`${sign} ${escapeForTerminal(file.path)}`];
  if (file.change !== 'changed') parts.push(`${meta.type} ${meta.mode} ${meta.uid}:${meta.gid} ${meta.size}`);
  else {
    const b = file.before!;
    const a = file.after!;
    const what = file.fields.map((field) => {
      if (field === 'mode') return `mode ${b.mode}->${a.mode}`;
      if (field === 'owner') return `owner ${b.uid}:${b.gid}->${a.uid}:${a.gid}`;
      if (field === 'size') return `size ${b.size}->${a.size}`;
      if (field === 'type') return `type ${b.type}->${a.type}`;
      if (field === 'target')
        return `target ${b.target === undefined ? '?' : escapeForTerminal(b.target)} -> ${
          a.target === undefined ? '?' : escapeForTerminal(a.target)
        }`;
      return field;
    });
    parts.push(what.join(', '));
  }
  if (file.change !== 'changed' && meta.target !== undefined) parts.push(`-> ${escapeForTerminal(meta.target)}`);
  if (file.diffNote) parts.push(`(no text diff: ${escapeForTerminal(file.diffNote)})`);
  return parts.join('  ');
}

/** A text diff's lines: its head names the guest's path (which may hold a newline), escaped like the path. */
function diffLines(where: string, diff: string): string[] {
  const head = `--- a${where}\n+++ b${where}\n`;
  const body = diff.startsWith(head) ? diff.slice(head.length) : diff;
  const lines = escapeLines(body).replace(/\n$/, '').split('\n');
  if (body === diff) return lines;
  const shown = escapeForTerminal(where);
  return [`--- a${shown}`, `+++ b${shown}`, ...(body ? lines : [])];
}

export function formatDiff(diff: DiffResponse): string {
  const out: string[] = [`${diff.from.name} (${diff.from.id}) -> ${diff.to.name} (${diff.to.id})`];
  for (const disk of diff.disks) {
    if (disk.error) {
      out.push(`${escapeForTerminal(disk.device)}: cannot be read: ${escapeForTerminal(disk.error)}`);
      continue;
    }
    out.push(
      `${escapeForTerminal(disk.device)}: ${disk.added} added, ${disk.removed} removed, ${disk.changed} changed`,
    );
    for (const problem of disk.problems) out.push(`  ! ${escapeForTerminal(problem)}`);
    for (const file of disk.files) {
      out.push(`  ${describe(file)}`);
      if (file.diff) out.push(...diffLines(file.path, file.diff).map((line) => `    ${line}`));
    }
    if (disk.truncated) out.push('  … more changes than the answer holds');
  }
  if (diff.disks.length === 0) out.push('no disks at these points');
  out.push(diff.console.text === null ? `console: ${diff.console.note}` : `console between the two points:`);
  if (diff.console.text !== null) {
    // The console as `smol logs` prints it (ANSI kept: the guest's own terminal output, not a disk's names).
    out.push(diff.console.text.replace(/\r\n/g, '\n').replace(/\n$/, ''));
    if (diff.console.note) out.push(`(${diff.console.note})`);
  }
  return out.join('\n') + '\n';
}

export async function runDiff(argv: string[]): Promise<number> {
  const { flags, args, help } = parseCommand('diff', argv, JSON_FLAG, { min: 2, max: 2, names: 'two snapshots' });
  if (helpOr(help, DIFF_HELP)) return 0;
  const [from, to] = args as [string, string];
  const diff = await withEngine((smol) => smol.diff(from, to));
  if (flags.json) printJson(diff);
  else process.stdout.write(formatDiff(diff));
  return 0;
}
