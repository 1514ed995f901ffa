// `smol label VM|SNAPSHOT key=value … key-`: sets and removes labels on a VM or a snapshot (docs/labels.md), and how
// `smol ls` and `smol snapshots` show them.
import type { Labels, LabelsChange } from '../api/schema.js';
import { ApiClientError } from '../api/api-client.js';
import { CommandError } from './errors.js';
import { EXIT, helpOr, JSON_FLAG, parseCommand, printJson, withEngine } from './engine-cli.js';
import { UsageError } from './errors.js';

export const LABEL_HELP = `Usage: smol label VM|SNAPSHOT key=value … [key-] [--json]

Sets labels on a VM or a snapshot (a checkpoint): key=value sets one, key- removes one, the others stay. A value
that reads as a number (0.83, -2, 1e3) is stored as a number, so the app can colour the tree by it; anything else
is a string (quote it as "0.83" in JSON through the API to keep a number-like string). Keys take letters, digits,
"_", ".", ":" and "-" and start with a letter or "_". Prints the labels it now has. smol ls and smol snapshots
show them.

  smol label vm-3kq reward=0.83 task=fix-1234
  smol label checkpoint-2 reward=1 note-
`;

const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

/** `key=value` and `key-` arguments as a change; a malformed one is a usage error naming it. */
export function parseLabelArgs(args: string[]): LabelsChange {
  const change: LabelsChange = {};
  for (const arg of args) {
    const eq = arg.indexOf('=');
    if (eq > 0) {
      const value = arg.slice(eq + 1);
      change[arg.slice(0, eq)] = NUMBER.test(value) && Number.isFinite(Number(value)) ? Number(value) : value;
    } else if (arg.endsWith('-') && arg.length > 1 && eq === -1) {
      change[arg.slice(0, -1)] = null;
    } else {
      throw new UsageError('label', `${arg}: expected key=value (set) or key- (remove)`);
    }
  }
  return change;
}

/** Labels as `key=value` pairs in key order, for a table column; `-` when there are none. */
export function formatLabels(labels: Labels | undefined): string {
  const pairs = Object.entries(labels ?? {}).sort(([a], [b]) => a.localeCompare(b));
  return pairs.length === 0 ? '-' : pairs.map(([key, value]) => `${key}=${value}`).join(',');
}

export async function runLabel(argv: string[]): Promise<number> {
  const { flags, args, help } = parseCommand('label', argv, JSON_FLAG, {
    min: 2,
    max: Infinity,
    names: 'a VM or snapshot and key=value labels',
  });
  if (helpOr(help, LABEL_HELP)) return 0;
  const [ref, ...pairs] = args as [string, ...string[]];
  const labels = parseLabelArgs(pairs);
  const result = await withEngine(async (smol) => {
    // A VM first, then a snapshot; a name both have is refused rather than guessed.
    const vm = await smol.vm(ref).catch((error: unknown) => notFound(error));
    const snapshot = await smol.snapshot(ref).catch((error: unknown) => notFound(error));
    if (vm && snapshot) {
      throw new CommandError(`${ref} names VM ${vm.id} and snapshot ${snapshot.id}: give the id`, EXIT.usage);
    }
    if (vm) return { vm: await smol.api.call('updateVm', { params: { vm: vm.id }, body: { labels } }) };
    if (snapshot) {
      return {
        snapshot: await smol.api.call('updateSnapshot', { params: { snapshot: snapshot.id }, body: { labels } }),
      };
    }
    throw new CommandError(`no VM or snapshot ${ref}`, EXIT.notFound);
  });
  const target = result.vm ?? result.snapshot!;
  if (flags.json) printJson(result);
  else process.stdout.write(`${target.id} ${target.name}: ${formatLabels(target.labels)}\n`);
  return 0;
}

function notFound(error: unknown): null {
  if (error instanceof ApiClientError && error.status === 404) return null;
  throw error;
}
