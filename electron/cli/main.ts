// `smol`: the command-line entry. Each command lives in its own module; this one dispatches and reports errors.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../package-root.js';
import { runBench } from './bench.js';
import { runBoot } from './boot.js';
import { runDoctor } from './doctor.js';
import { CommandError, EXIT_USAGE, UsageError } from './errors.js';
import { runGuest } from './guest.js';
import { runValidate } from './validate.js';

const COMMANDS: Record<string, { summary: string; run: (argv: string[]) => Promise<number> }> = {
  boot: { summary: 'boot a kernel with its serial console on this terminal', run: runBoot },
  doctor: { summary: 'check that this machine can run VMs, and say how to fix it', run: runDoctor },
  bench: { summary: 'run a benchmark and print medians and p90', run: runBench },
  guest: { summary: 'build or inspect the Linux guest kernel and initramfs', run: runGuest },
  validate: { summary: 'check a Smolfile and print its problems with their lines', run: runValidate },
};

const NAME_WIDTH = Math.max(...Object.keys(COMMANDS).map((name) => name.length)) + 2;

export const MAIN_HELP = `Usage: smol <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, { summary }]) => `  ${name.padEnd(NAME_WIDTH)}${summary}`)
  .join('\n')}

Run smol <command> --help for a command's options. smol --version prints the version.
`;

function version(): string {
  const manifest = JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string };
  return manifest.version;
}

/** Runs one command line; returns the exit status. Errors become one `smol: …` line on stderr. */
export async function main(argv: string[]): Promise<number> {
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
    return await entry.run(rest);
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
