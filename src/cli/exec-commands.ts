// `smol exec VM -- CMD` and `smol run [-f Smolfile | --image REF] [-- CMD]`: commands in a guest through its agent
// (docs/agent.md), with stdout and stderr relayed as they come and the command's exit status as smol's own; with -t
// on a terminal of the guest's (`smol exec -it VM -- sh`), ours in raw mode and its size followed.
import os from 'node:os';
import type { ExecExit } from '../api/api-client.js';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EXIT, helpOr, parseCommand, withEngine } from './engine-cli.js';
import { CommandError, UsageError } from './errors.js';
import { runArgv } from '../guest-build/oci-run.js';
import { buildImageFirst, chooseSmolfile, workloadFor } from './image.js';

type Run = (argv: string[]) => Promise<number>;

const EXEC_FLAGS = {
  help: { type: 'boolean', short: 'h' },
  env: { type: 'string', short: 'e', multiple: true },
  workdir: { type: 'string', short: 'w' },
  user: { type: 'string', short: 'u' },
  interactive: { type: 'boolean', short: 'i', default: false },
  tty: { type: 'boolean', short: 't', default: false },
  timeout: { type: 'string' },
} as const;

const EXEC_OPTIONS = `  -e, --env K=V       set an environment variable (repeatable)
  -w, --workdir DIR   run in DIR (default: the Smolfile's workdir, else the image's WorkingDir)
  -u, --user USER     run as USER: name, uid, name:group or uid:gid, from the guest's /etc/passwd and
                      /etc/group (default: the Smolfile's user, else the image's User, else root; -u 0 is root)
  -i, --interactive   pass this command's stdin to it (else it reads /dev/null)
  -t, --tty           run it on a terminal in the guest (a pseudo-terminal: job control, Ctrl-C reaches its
                      foreground job, resized with this one); -it for a shell: smol exec -it VM -- sh
  --timeout SECONDS   kill it after this long (exit status 124, as timeout(1))`;

/** The argv after `--`, and smol's own arguments before it. */
function splitCommand(command: string, argv: string[]): { own: string[]; cmd: string[] } {
  const at = argv.indexOf('--');
  if (at < 0) {
    if (argv.includes('-h') || argv.includes('--help')) return { own: argv, cmd: [] };
    throw new UsageError(command, 'expected -- and the command to run (smol exec VM -- ls -l)');
  }
  const cmd = argv.slice(at + 1);
  if (cmd.length === 0) throw new UsageError(command, 'expected a command after --');
  return { own: argv.slice(0, at), cmd };
}

interface ExecFlags {
  env?: string[];
  workdir?: string;
  user?: string;
  interactive: boolean;
  tty: boolean;
  timeout?: string;
}

function execRequest(
  command: string,
  argv: string[],
  flags: ExecFlags,
): {
  argv: string[];
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
  timeoutMs?: number;
  tty?: { rows: number; cols: number };
} {
  const env: Record<string, string> = {};
  for (const pair of flags.env ?? []) {
    const eq = pair.indexOf('=');
    if (eq < 1) throw new UsageError(command, `--env ${pair}: expected NAME=VALUE`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  // A terminal's programs need to know what it is: ours, as ssh and docker exec pass it.
  if (flags.tty && env.TERM === undefined) env.TERM = process.env.TERM ?? 'xterm-256color';
  let timeoutMs: number | undefined;
  if (flags.timeout !== undefined) {
    const seconds = Number(flags.timeout);
    if (!Number.isFinite(seconds) || seconds <= 0) throw new UsageError(command, '--timeout: expected seconds > 0');
    timeoutMs = Math.ceil(seconds * 1000);
  }
  if (flags.user !== undefined && !/^[^:\0]+(:[^:\0]+)?$/.test(flags.user)) {
    throw new UsageError(command, `--user ${flags.user}: expected a name, uid, name:group or uid:gid`);
  }
  return {
    argv,
    ...(Object.keys(env).length > 0 && { env }),
    ...(flags.workdir !== undefined && { cwd: flags.workdir }),
    ...(flags.user !== undefined && { user: flags.user }),
    ...(timeoutMs !== undefined && { timeoutMs }),
    ...(flags.tty && { tty: terminalSize() }),
  };
}

/** Our terminal's size (24 by 80 when stdout is not one), within what the agent takes. */
function terminalSize(): { rows: number; cols: number } {
  const clamp = (n: number | undefined, fallback: number) => Math.min(1000, Math.max(1, n || fallback));
  return { rows: clamp(process.stdout.rows, 24), cols: clamp(process.stdout.columns, 80) };
}

/**
 * Runs `request` on a terminal in the guest: our terminal in raw mode (so Ctrl-C, Ctrl-Z and the rest are bytes
 * for the guest's terminal, which signals its foreground job), its size followed on SIGWINCH; resolves with the
 * command's exit status. A SIGINT or SIGTERM sent to smol itself is passed on.
 */
async function relayTerminal(smol: Smol, vm: string, request: ReturnType<typeof execRequest>, interactive: boolean) {
  const raw = interactive && process.stdin.isTTY;
  const running = smol.api.exec(vm, request, {
    onStdout: (chunk) => void process.stdout.write(chunk),
    onStderr: (chunk) => void process.stderr.write(chunk),
    ...(interactive && { stdin: process.stdin }),
  });
  const resize = () => running.resize(terminalSize());
  const forward = (signal: NodeJS.Signals) => () => running.signal(signal);
  const onInt = forward('SIGINT');
  const onTerm = forward('SIGTERM');
  process.on('SIGWINCH', resize);
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  if (raw) process.stdin.setRawMode(true);
  try {
    const exit = await running.exit;
    await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
    return exitStatus(exit);
  } catch (error) {
    throw new CommandError((error as Error).message, EXIT.failed);
  } finally {
    if (raw) process.stdin.setRawMode(false);
    process.off('SIGWINCH', resize);
    process.off('SIGINT', onInt);
    process.off('SIGTERM', onTerm);
    if (interactive) process.stdin.destroy();
  }
}

/** The shell's convention: the command's status, 128+N for a signal, 124 when it timed out. */
export function exitStatus(exit: ExecExit): number {
  if (exit.timedOut) return 124;
  if (exit.exitCode !== null) return exit.exitCode;
  const number = exit.signal ? (os.constants.signals as Record<string, number>)[exit.signal] : undefined;
  return 128 + (number ?? 0);
}

/**
 * Runs `request` in `vm`, relaying its output to ours (and our stdin to it with -i), forwarding Ctrl-C to it as
 * SIGINT; resolves with its exit status. Ctrl-C before the command started (while the agent is being reached) gives
 * up on it and exits 130, as a shell does.
 */
async function relay(smol: Smol, vm: string, request: ReturnType<typeof execRequest>, interactive: boolean) {
  const write = (stream: NodeJS.WriteStream) => (chunk: Buffer) => void stream.write(chunk);
  const running = smol.api.exec(vm, request, {
    onStdout: write(process.stdout),
    onStderr: write(process.stderr),
    ...(interactive && { stdin: process.stdin }),
  });
  let abandoned = false;
  const interrupt = () => {
    if (running.started()) return running.signal('SIGINT');
    abandoned = true;
    running.close();
  };
  process.on('SIGINT', interrupt);
  try {
    const exit = await running.exit;
    await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
    return exitStatus(exit);
  } catch (error) {
    if (abandoned) return 128 + os.constants.signals.SIGINT;
    throw new CommandError((error as Error).message, EXIT.failed);
  } finally {
    process.off('SIGINT', interrupt);
    if (interactive) process.stdin.destroy();
  }
}

export const runExec: Run = async (argv) => {
  const HELP = `Usage: smol exec [options] VM -- COMMAND [ARG...]

Runs a command in a running VM's guest through its agent (no shell: smol exec VM -- sh -c '...' for one), relays
its stdout and stderr as they come, and exits with its status (128+N for signal N, 124 for --timeout). As docker
exec, it gets the episode's env (the image's Env, then the Smolfile's env; -e over both), workdir and user.

${EXEC_OPTIONS}
`;
  const { own, cmd } = splitCommand('exec', argv);
  const { flags, args, help } = parseCommand('exec', own, EXEC_FLAGS, { min: 1, max: 1, names: 'a VM' });
  if (helpOr(help, HELP)) return 0;
  const request = execRequest('exec', cmd, flags);
  const go = flags.tty ? relayTerminal : relay;
  return await withEngine((smol) => go(smol, args[0]!, request, flags.interactive));
};

export const runRun: Run = async (argv) => {
  const HELP = `Usage: smol run [-f Smolfile | --image REF] [options] [-- COMMAND [ARG...]]

Starts a fresh episode from a Smolfile (default ./Smolfile; with none there, the builtin image) or from an image
alone (--image python:3.12-slim, as docker run), waits for its agent, runs the command in it with its output
relayed, then deletes the episode and exits with the command's status. A clean machine every time. The command
goes after the image's or Smolfile's entrypoint; without one, their cmd runs. Their env, workdir and user apply
(-e, -w and -u add to and override them).

  -f, --file FILE     the Smolfile
  --image REF         an image instead of a Smolfile: builtin, debian:<suite>, an OCI reference (docs/images.md)
  --keep              keep the episode afterwards (its id is printed on stderr)
${EXEC_OPTIONS}
`;
  const { own, cmd } = argv.includes('--') ? splitCommand('run', argv) : { own: argv, cmd: [] };
  const { flags, help } = parseCommand(
    'run',
    own,
    { ...EXEC_FLAGS, file: { type: 'string', short: 'f' }, image: { type: 'string' }, keep: { type: 'boolean' } },
    { min: 0, max: 0, names: '' },
  );
  if (helpOr(help, HELP)) return 0;
  const file = chooseSmolfile('run', flags);
  await buildImageFirst(file);
  const workload = await workloadFor(file);
  const command = workload ? runArgv(workload, cmd) : cmd;
  if (command.length === 0) {
    throw new UsageError('run', 'expected -- and the command to run: neither the image nor the Smolfile has one');
  }
  // The engine gives it the workload's env, workdir and user, as it does every exec (src/engine/exec-workload.ts).
  const request = execRequest('run', command, flags);
  return await withEngine(async (smol) => {
    const { episode, vm } = await smol.up(file);
    try {
      return await (flags.tty ? relayTerminal : relay)(smol, vm.id, request, flags.interactive);
    } finally {
      if (flags.keep) process.stderr.write(`smol: kept episode ${episode.id} ${episode.name}\n`);
      else await smol.destroy(episode.id).catch(() => undefined);
    }
  });
};
