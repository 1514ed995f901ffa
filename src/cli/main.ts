// `smol`: the command-line entry. Each command lives in its own module; this one dispatches and reports errors.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../package-root.js';
import { CommandError, EXIT_USAGE, UsageError } from './errors.js';

type Run = (argv: string[]) => Promise<number>;

// Each command's module is loaded only when that command runs: the engine's commands pull in zod, ws and a
// headless terminal, and a command such as `smol ls` should not pay for all of them.
const COMMANDS: Record<string, { summary: string; run: () => Promise<Run> }> = {
  boot: {
    summary: 'boot a kernel with its serial console on this terminal',
    run: async () => (await import('./boot.js')).runBoot,
  },
  doctor: {
    summary: 'check that this machine can run VMs, and say how to fix it',
    run: async () => (await import('./doctor.js')).runDoctor,
  },
  bench: {
    summary: 'run a benchmark and print medians and p90',
    run: async () => (await import('./bench.js')).runBench,
  },
  guest: {
    summary: 'build or inspect the Linux guest kernel and initramfs',
    run: async () => (await import('./guest.js')).runGuest,
  },
  image: {
    summary: 'pull, build, list and remove the root disk images Smolfiles ask for (OCI, debian:<suite>)',
    run: async () => (await import('./image.js')).runImage,
  },
  validate: {
    summary: 'check a Smolfile and print its problems with their lines',
    run: async () => (await import('./validate.js')).runValidate,
  },
  up: {
    summary: 'start a new episode from a Smolfile',
    run: async () => (await import('./episode-commands.js')).runUp,
  },
  ls: { summary: 'list episodes and their VMs', run: async () => (await import('./episode-commands.js')).runLs },
  events: {
    summary: "print the engine's events as they happen (--type vm.network.refused: refused connections)",
    run: async () => (await import('./events-command.js')).runEvents,
  },
  port: {
    summary: "list a VM's forwarded ports (80/tcp -> 127.0.0.1:41235), as docker port",
    run: async () => (await import('./network-commands.js')).runPort,
  },
  logs: {
    summary: "print a VM's recent console output (--network: its refused connections)",
    run: async () => (await import('./console-commands.js')).runLogs,
  },
  console: {
    summary: "attach this terminal to a VM's console (or --send TEXT)",
    run: async () => (await import('./console-commands.js')).runConsole,
  },
  checkpoint: {
    summary: 'snapshot a running VM',
    run: async () => (await import('./episode-commands.js')).runCheckpoint,
  },
  fork: {
    summary: 'start new VMs from a running VM or a snapshot',
    run: async () => (await import('./episode-commands.js')).runFork,
  },
  restore: {
    summary: 'move a VM to a snapshot (where it was is saved first)',
    run: async () => (await import('./episode-commands.js')).runRestore,
  },
  diff: {
    summary: 'what changed between two snapshots: files on each disk, text diffs, console output',
    run: async () => (await import('./diff-command.js')).runDiff,
  },
  label: {
    summary: 'set or remove labels on a VM or snapshot (reward=0.83 task=fix-1234, key- removes)',
    run: async () => (await import('./label-command.js')).runLabel,
  },
  snapshots: {
    summary: "list an episode's snapshots (--tree for the tree)",
    run: async () => (await import('./episode-commands.js')).runSnapshots,
  },
  stop: { summary: 'suspend a VM to a snapshot', run: async () => (await import('./episode-commands.js')).runStop },
  start: { summary: 'continue a suspended VM', run: async () => (await import('./episode-commands.js')).runStart },
  pause: { summary: "stop a VM's vCPUs", run: async () => (await import('./episode-commands.js')).runPause },
  resume: { summary: 'let a paused VM run', run: async () => (await import('./episode-commands.js')).runResume },
  reset: {
    summary: "put a VM back on its Smolfile's base snapshot",
    run: async () => (await import('./episode-commands.js')).runReset,
  },
  exec: {
    summary: "run a command in a VM's guest, relaying its output and exit status",
    run: async () => (await import('./exec-commands.js')).runExec,
  },
  run: {
    summary: 'run a command in a fresh episode from a Smolfile, then delete it',
    run: async () => (await import('./exec-commands.js')).runRun,
  },
  cp: {
    summary: "copy files and directories into or out of a VM's guest (VM:/path, as docker cp)",
    run: async () => (await import('./cp.js')).runCp,
  },
  pack: {
    summary: 'pack a VM or snapshot into a portable .smolmachine file',
    run: async () => (await import('./machine-commands.js')).runPack,
  },
  inspect: {
    summary: 'check a .smolmachine file and print its manifest',
    run: async () => (await import('./machine-commands.js')).runInspect,
  },
  rm: { summary: 'remove VMs or episodes', run: async () => (await import('./episode-commands.js')).runRm },
  serve: {
    summary: 'open the engine API on a TCP port with a token (prints the URL)',
    run: async () => (await import('./serve-command.js')).runServe,
  },
  token: {
    summary: 'create, list or revoke named tokens for smol serve (--read-only: look, not change)',
    run: async () => (await import('./token-command.js')).runToken,
  },
  store: {
    summary: "check the data dir's snapshots, layers and records (--repair quarantines what is broken)",
    run: async () => (await import('./store-command.js')).runStore,
  },
  engine: {
    summary: 'run, inspect or stop the engine of a data dir',
    run: async () => (await import('./engine-command.js')).runEngineCommand,
  },
};

const NAME_WIDTH = Math.max(...Object.keys(COMMANDS).map((name) => name.length)) + 2;

export const MAIN_HELP = `Usage: smol <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, { summary }]) => `  ${name.padEnd(NAME_WIDTH)}${summary}`)
  .join('\n')}

Run smol <command> --help for a command's options. smol --version prints the version.
--engine URL|NAME (or SMOL_ENGINE) before or after the command runs it against a remote engine (smol engine add).
`;

function version(): string {
  const manifest = JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string };
  return manifest.version;
}

/** Runs one command line; returns the exit status. Errors become one `smol: …` line on stderr. */
/**
 * `--engine URL|NAME` anywhere before a `--`: every command then talks to that remote engine (docs/remote.md), as
 * with SMOL_ENGINE. Taken out here, so no command needs an option of its own for it.
 */
function takeEngineFlag(argv: string[]): string[] {
  const end = argv.indexOf('--') === -1 ? argv.length : argv.indexOf('--');
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (i < end && arg === '--engine') {
      const value = argv[++i];
      if (value === undefined || i >= end) throw new UsageError('', '--engine needs a URL or an engine name');
      process.env.SMOL_ENGINE = value;
    } else if (i < end && arg.startsWith('--engine=')) process.env.SMOL_ENGINE = arg.slice('--engine='.length);
    else rest.push(arg);
  }
  return rest;
}

export async function main(argvIn: string[]): Promise<number> {
  let argv: string[];
  try {
    argv = takeEngineFlag(argvIn);
  } catch (err) {
    return reportError(err);
  }
  const [command, ...rest] = argv;
  try {
    if (command === undefined) {
      process.stderr.write(MAIN_HELP);
      return EXIT_USAGE;
    }
    if (command === '--help' || command === '-h' || command === 'help') {
      process.stdout.write(MAIN_HELP);
      return 0;
    }
    if (command === '--version' || command === '-v') {
      process.stdout.write(`${version()}\n`);
      return 0;
    }
    const entry = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
    if (!entry) throw new UsageError('', `unknown command ${command} (commands: ${Object.keys(COMMANDS).join(', ')})`);
    return await (
      await entry.run()
    )(rest);
  } catch (err) {
    return reportError(err);
  }
}

function reportError(err: unknown): number {
  if (err instanceof UsageError) {
    const help = err.command ? `smol ${err.command} --help` : 'smol --help';
    process.stderr.write(`smol: ${err.command ? `${err.command}: ` : ''}${err.message}; see ${help}\n`);
    return EXIT_USAGE;
  }
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`smol: ${message}\n`);
  return err instanceof CommandError ? err.exitStatus : 1;
}

/** The process entry used by bin/smol.js: runs, waits for stdout to flush, exits with the status. */
export async function run(argv: string[] = process.argv.slice(2)): Promise<never> {
  const status = await main(argv);
  await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
  process.exit(status);
}
