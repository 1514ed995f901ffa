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

function describe(file: FileChange): string {
  const sign = { added: '+', removed: '-', changed: '~' }[file.change];
  const meta = file.after ?? file.before!;
  const parts = [`${sign} ${file.path}`];
  if (file.change !== 'changed') parts.push(`${meta.type} ${meta.mode} ${meta.uid}:${meta.gid} ${meta.size}`);
  else {
    const b = file.before!;
    const a = file.after!;
    const what = file.fields.map((field) => {
      if (field === 'mode') return `mode ${b.mode}->${a.mode}`;
      if (field === 'owner') return `owner ${b.uid}:${b.gid}->${a.uid}:${a.gid}`;
      if (field === 'size') return `size ${b.size}->${a.size}`;
      if (field === 'type') return `type ${b.type}->${a.type}`;
      if (field === 'target') return `target ${b.target ?? '?'} -> ${a.target ?? '?'}`;
      return field;
    });
    parts.push(what.join(', '));
  }
  if (file.change !== 'changed' && meta.target !== undefined) parts.push(`-> ${meta.target}`);
  if (file.diffNote) parts.push(`(no text diff: ${file.diffNote})`);
  return parts.join('  ');
}

export function formatDiff(diff: DiffResponse): string {
  const out: string[] = [`${diff.from.name} (${diff.from.id}) -> ${diff.to.name} (${diff.to.id})`];
  for (const disk of diff.disks) {
    if (disk.error) {
      out.push(`${disk.device}: cannot be read: ${disk.error}`);
      continue;
    }
    out.push(`${disk.device}: ${disk.added} added, ${disk.removed} removed, ${disk.changed} changed`);
    for (const problem of disk.problems) out.push(`  ! ${problem}`);
    for (const file of disk.files) {
      out.push(`  ${describe(file)}`);
      if (file.diff)
        out.push(
          ...file.diff
            .replace(/\n$/, '')
            .split('\n')
            .map((line) => `    ${line}`),
        );
    }
    if (disk.truncated) out.push('  … more changes than the answer holds');
  }
  if (diff.disks.length === 0) out.push('no disks at these points');
  out.push(diff.console.text === null ? `console: ${diff.console.note}` : `console between the two points:`);
  if (diff.console.text !== null) {
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
