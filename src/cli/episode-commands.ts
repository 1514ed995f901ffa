// `smol up|ls|checkpoint|fork|restore|snapshots|stop|start|pause|resume|reset|rm`: episodes and their VMs through
// the engine (docs/engine.md). Each prints for people by default and JSON with --json.
import { MAX_FORK_COUNT, type Snapshot, type Vm } from '../api/schema.js';
import { age, bytes, EXIT, helpOr, JSON_FLAG, parseCommand, printJson, printTable, withEngine } from './engine-cli.js';
import { formatLabels } from './label-command.js';
import { CommandError } from './errors.js';
import { buildImageFirst, chooseSmolfile } from './image.js';
import { withProgress } from './machine-commands.js';
import { portsColumn } from './network-commands.js';

type Run = (argv: string[]) => Promise<number>;

export const runUp: Run = async (argv) => {
  const HELP = `Usage: smol up [-f Smolfile | --image REF | --from FILE.smolmachine] [--name NAME] [--json]

Starts a new episode from a Smolfile (default ./Smolfile; with none there, the builtin image), or from an image
alone (--image python:3.12-slim: builtin, debian:<suite> or an OCI reference, docs/images.md), and prints its id
and name. The first VM boots from the Smolfile's base snapshot (baked on the first up: boot, then init) and is
running when this returns. With --from, the episode's first VM continues the state packed by smol pack
(docs/smolmachine.md); the file is checked whole before anything of it is kept.
`;
  const { flags, help } = parseCommand(
    'up',
    argv,
    {
      ...JSON_FLAG,
      file: { type: 'string', short: 'f' },
      image: { type: 'string' },
      from: { type: 'string' },
      name: { type: 'string' },
    },
    { min: 0, max: 0, names: '' },
  );
  if (helpOr(help, HELP)) return 0;
  const options = flags.name === undefined ? {} : { name: flags.name };
  let result;
  if (flags.from !== undefined) {
    if (flags.file !== undefined || flags.image !== undefined) {
      throw new CommandError(
        'up: --from takes the Smolfile from the machine file; leave out -f and --image',
        EXIT.usage,
      );
    }
    const from = flags.from;
    result = await withEngine((smol) =>
      withProgress(smol, 'open', 'open', (requestId) => smol.upFrom(from, { ...options, requestId })),
    );
  } else {
    const file = chooseSmolfile('up', flags);
    await buildImageFirst(file);
    result = await withEngine((smol) => smol.up(file, options));
  }
  if (flags.json) printJson({ id: result.episode.id, name: result.episode.name, vm: pick(result.vm) });
  else
    process.stdout.write(
      `${result.episode.id} ${result.episode.name}\n${result.vm.id} ${result.vm.name} ${result.vm.state}\n`,
    );
  return 0;
};

const pick = (vm: Vm) => ({ id: vm.id, name: vm.name, state: vm.state });

export const runLs: Run = async (argv) => {
  const HELP = `Usage: smol ls [--json]

Lists every VM of every episode: id, name, episode, state, uptime, the snapshot it is at, for a running VM
with a network its forwarded ports (127.0.0.1:41235->80/tcp; smol port VM has them one a line), and its labels
(smol label). Episodes with no VM are listed too.
`;
  const { flags, help } = parseCommand('ls', argv, JSON_FLAG, { min: 0, max: 0, names: '' });
  if (helpOr(help, HELP)) return 0;
  const episodes = await withEngine((smol) => smol.episodes());
  if (flags.json) {
    printJson({ episodes });
    return 0;
  }
  const rows: string[][] = [];
  for (const episode of episodes) {
    if (episode.vms.length === 0) rows.push(['-', '-', episode.name, episode.state, '-', '-', '-', '-']);
    for (const vm of episode.vms) {
      const state = vm.state === 'stopped' && vm.exit ? `stopped (${vm.exit.reason})` : vm.state;
      const at = vm.snapshot ?? '-';
      rows.push([
        vm.id,
        vm.name,
        episode.name,
        state,
        age(vm.runningSince),
        at,
        portsColumn(vm.ports),
        formatLabels(vm.labels),
      ]);
    }
  }
  printTable(['VM', 'NAME', 'EPISODE', 'STATE', 'UPTIME', 'AT SNAPSHOT', 'PORTS', 'LABELS'], rows);
  return 0;
};

export const runCheckpoint: Run = async (argv) => {
  const HELP = `Usage: smol checkpoint VM [-m NOTE] [--name NAME] [--json]

Takes a snapshot of a running or paused VM (it keeps running) and prints the snapshot's id and name.
`;
  const { flags, args, help } = parseCommand(
    'checkpoint',
    argv,
    { ...JSON_FLAG, message: { type: 'string', short: 'm' }, name: { type: 'string' } },
    { min: 1, max: 1, names: 'a VM' },
  );
  if (helpOr(help, HELP)) return 0;
  const snapshot = await withEngine((smol) =>
    smol.checkpoint(args[0]!, {
      ...(flags.message === undefined ? {} : { note: flags.message }),
      ...(flags.name === undefined ? {} : { name: flags.name }),
    }),
  );
  if (flags.json) printJson({ id: snapshot.id, name: snapshot.name, snapshot });
  else process.stdout.write(`${snapshot.id} ${snapshot.name}\n`);
  return 0;
};

export const runFork: Run = async (argv) => {
  const HELP = `Usage: smol fork VM|SNAPSHOT [-n N] [--json]

Starts N (default 1, at most 1024) new VMs: from a running VM's current state (the VM keeps running; the fork
point is checkpointed), or from a snapshot. Children are started in waves as the host can take them (at most 32
per wave, within its file descriptors and memory); the command ends when all run. Prints each child's id and name.
`;
  const { flags, args, help } = parseCommand(
    'fork',
    argv,
    { ...JSON_FLAG, count: { type: 'string', short: 'n', default: '1' } },
    { min: 1, max: 1, names: 'a VM or a snapshot' },
  );
  if (helpOr(help, HELP)) return 0;
  const count = Number(flags.count);
  if (!/^\d+$/.test(flags.count) || count < 1 || count > MAX_FORK_COUNT) {
    throw new CommandError(
      `fork: -n must be a whole number from 1 to ${MAX_FORK_COUNT} (got ${flags.count})`,
      EXIT.usage,
    );
  }
  const result = await withEngine(async (smol) => {
    const ref = args[0]!;
    const isSnapshot =
      ref.startsWith('sn-') ||
      !(await smol.vms()).some((vm) => vm.id === ref || vm.name === ref || vm.id.startsWith(ref));
    return smol.fork(ref, count, isSnapshot ? 'snapshot' : 'vm');
  });
  if (flags.json) printJson({ children: result.children.map(pick), snapshot: result.snapshot });
  else for (const child of result.children) process.stdout.write(`${child.id} ${child.name}\n`);
  return 0;
};

export const runRestore: Run = async (argv) => {
  const HELP = `Usage: smol restore VM SNAPSHOT [--json]

Moves a VM back (or forward) to a snapshot of its episode. Where it was is checkpointed first, so nothing is
lost; that snapshot's id is printed.
`;
  const { flags, args, help } = parseCommand('restore', argv, JSON_FLAG, {
    min: 2,
    max: 2,
    names: 'a VM and a snapshot',
  });
  if (helpOr(help, HELP)) return 0;
  const result = await withEngine((smol) => smol.restore(args[0]!, args[1]!));
  if (flags.json) printJson(result);
  else {
    const saved = result.savedAs ? ` (where it was is saved as ${result.savedAs.id} ${result.savedAs.name})` : '';
    process.stdout.write(`${result.vm.id} ${result.vm.name} is at ${result.vm.snapshot}${saved}\n`);
  }
  return 0;
};

export const runSnapshots: Run = async (argv) => {
  const HELP = `Usage: smol snapshots EPISODE [--tree] [--json]

Lists an episode's snapshots in the order they were taken (the timeline), or as the tree they form (--tree),
with size on disk, labels (smol label) and note.
`;
  const { flags, args, help } = parseCommand(
    'snapshots',
    argv,
    { ...JSON_FLAG, tree: { type: 'boolean', default: false } },
    { min: 1, max: 1, names: 'an episode' },
  );
  if (helpOr(help, HELP)) return 0;
  const [snapshots, episode] = await withEngine((smol) =>
    Promise.all([smol.snapshots(args[0]!), smol.episode(args[0]!)]),
  );
  if (flags.json) {
    printJson({ snapshots });
    return 0;
  }
  const here = new Map<string, string[]>();
  for (const vm of episode.vms) if (vm.snapshot) here.set(vm.snapshot, [...(here.get(vm.snapshot) ?? []), vm.name]);
  const label = (s: Snapshot) => {
    const vms = here.get(s.id);
    const labels = Object.keys(s.labels ?? {}).length ? ` {${formatLabels(s.labels)}}` : '';
    return `${s.id} ${s.name} [${s.kind}] ${bytes(s.diskBytes)}${labels}${s.note ? ` "${s.note.split('\n')[0]}"` : ''}${vms ? `  <- ${vms.join(', ')}` : ''}`;
  };
  if (!flags.tree) {
    printTable(
      ['SNAPSHOT', 'NAME', 'KIND', 'PARENT', 'TAKEN', 'SIZE', 'LABELS', 'NOTE'],
      snapshots.map((s) => [
        s.id,
        s.name,
        s.kind,
        s.parent ?? '-',
        s.created,
        bytes(s.diskBytes),
        formatLabels(s.labels),
        s.note.split('\n')[0] ?? '',
      ]),
    );
    return 0;
  }
  const ids = new Set(snapshots.map((s) => s.id));
  const children = new Map<string | null, Snapshot[]>();
  for (const s of snapshots) {
    const parent = s.parent && ids.has(s.parent) ? s.parent : null;
    children.set(parent, [...(children.get(parent) ?? []), s]);
  }
  const lines: string[] = [];
  const walk = (parent: string | null, prefix: string) => {
    const list = children.get(parent) ?? [];
    list.forEach((s, i) => {
      const last = i === list.length - 1;
      lines.push(`${prefix}${parent === null ? '' : last ? '└─ ' : '├─ '}${label(s)}`);
      walk(s.id, parent === null ? '' : `${prefix}${last ? '   ' : '│  '}`);
    });
  };
  walk(null, '');
  process.stdout.write(`${lines.join('\n')}\n`);
  return 0;
};

function vmAction(name: 'stop' | 'start' | 'pause' | 'resume' | 'reset', summary: string): Run {
  return async (argv) => {
    const HELP = `Usage: smol ${name} VM [--json]\n\n${summary}\n`;
    const { flags, args, help } = parseCommand(name, argv, JSON_FLAG, { min: 1, max: 1, names: 'a VM' });
    if (helpOr(help, HELP)) return 0;
    const vm = await withEngine((smol) => smol[name](args[0]!));
    if (flags.json) printJson(vm);
    else process.stdout.write(`${vm.id} ${vm.name} ${vm.state}\n`);
    return 0;
  };
}

export const runStop = vmAction(
  'stop',
  'Suspends a VM to a snapshot and ends its process; `smol start` continues it where it was.',
);
export const runStart = vmAction(
  'start',
  'Continues a suspended VM; a VM whose guest ended starts again from the base snapshot.',
);
export const runPause = vmAction('pause', 'Stops the vCPUs of a running VM (it stays in memory).');
export const runResume = vmAction('resume', 'Lets a paused VM run again.');
export const runReset = vmAction(
  'reset',
  "Puts a VM back on the Smolfile's base snapshot: a clean machine, in the time of a restore.",
);

export const runRm: Run = async (argv) => {
  const HELP = `Usage: smol rm VM|EPISODE... [--force] [--json]
       smol rm --all --force

Removes VMs (their snapshots stay with the episode) or whole episodes (with their snapshots). A name is looked up
among VMs first (an episode's first VM has the episode's name); give an episode's id (ep-…) to remove the episode.
A running VM, or an episode with one, needs --force. --all removes every episode.
`;
  const { flags, args, help } = parseCommand(
    'rm',
    argv,
    { ...JSON_FLAG, force: { type: 'boolean', short: 'f', default: false }, all: { type: 'boolean', default: false } },
    { min: 0, max: 1000, names: 'a VM or an episode' },
  );
  if (helpOr(help, HELP)) return 0;
  if (flags.all && !flags.force) throw new CommandError('rm --all needs --force', EXIT.usage);
  if (!flags.all && args.length === 0)
    throw new CommandError('rm: expected a VM or an episode (or --all --force)', EXIT.usage);
  const removed = await withEngine(async (smol) => {
    const gone: string[] = [];
    const episodes = await smol.episodes();
    const vms = episodes.flatMap((ep) => ep.vms);
    const targets = flags.all ? episodes.map((ep) => ep.id) : args;
    for (const ref of targets) {
      // A VM first (an episode's first VM shares its name); an episode by its id, or by a name no VM has.
      const isVm = !ref.startsWith('ep-') && vms.some((vm) => vm.id === ref || vm.name === ref);
      const episode = isVm ? undefined : episodes.find((ep) => ep.id === ref || ep.name === ref);
      const query = { force: flags.force ? ('true' as const) : undefined };
      // An `ep-` prefix is resolved by the engine, like every other id prefix.
      const target = episode?.id ?? (!isVm && ref.startsWith('ep-') ? ref : null);
      if (target) await smol.api.call('deleteEpisode', { params: { episode: target }, query });
      else await smol.api.call('removeVm', { params: { vm: ref }, query });
      gone.push(target ?? ref);
    }
    return gone;
  });
  if (flags.json) printJson({ removed });
  else for (const ref of removed) process.stdout.write(`${ref} removed\n`);
  return 0;
};
