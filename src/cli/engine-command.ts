// `smol engine [run|status|stop]`: the data dir's engine process (docs/engine.md, "Processes"). Clients start it
// on their own; this is for running it in the foreground, asking about it, and stopping it.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runEngine } from '../engine/engine-process.js';
import { packageRoot } from '../package-root.js';
import { connectEngine } from '../../sdk/typescript/engine-connection.js';
import { smolHomeDir } from '../smol-dirs.js';
import { EXIT, helpOr, JSON_FLAG, parseCommand, printJson } from './engine-cli.js';
import { CommandError } from './errors.js';

export const ENGINE_HELP = `Usage: smol engine [run] [--home DIR]
       smol engine status [--json]
       smol engine stop [--force]
       smol engine add|ls|rm|trust …   (remote engines: smol engine add --help)

run (the default) runs the engine of a data dir in the foreground (clients such as smol up start it in the
background when none runs). stop suspends every running VM to a snapshot and ends it; the next engine resumes
them. When a VM cannot be suspended (no space left for its snapshot) the engine stays, that VM goes on running,
and stop says why and exits 1; --force ends the engine anyway, losing those VMs' running state. The data dir is
--home, else $SMOL_HOME, else $XDG_DATA_HOME/smol-studio (~/.local/share/smol-studio).
`;

function version(): string {
  return (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;
}

export async function runEngineCommand(argv: string[]): Promise<number> {
  if (['add', 'ls', 'rm', 'trust'].includes(argv[0] ?? '')) {
    return (await import('./remote-engine-commands.js')).runRemoteEngines(argv);
  }
  const { flags, args, help } = parseCommand(
    'engine',
    argv,
    { ...JSON_FLAG, home: { type: 'string' }, force: { type: 'boolean' } },
    { min: 0, max: 1, names: 'run, status or stop' },
  );
  if (helpOr(help, ENGINE_HELP)) return 0;
  const home = path.resolve(flags.home ?? smolHomeDir());
  const action = args[0] ?? 'run';
  if (flags.force && action !== 'stop') throw new CommandError('engine: --force is an option of stop only', EXIT.usage);
  if (action === 'run') return runEngine({ home, version: version() });
  if (action !== 'status' && action !== 'stop') {
    throw new CommandError(`engine: unknown action ${action} (run, status or stop)`, EXIT.usage);
  }
  let client;
  try {
    client = await connectEngine({ home, start: false });
  } catch (error) {
    if (action === 'stop') {
      process.stdout.write(`no engine is running for ${home}\n`);
      return 0;
    }
    throw new CommandError((error as Error).message, EXIT.noEngine);
  }
  const health = await client.call('health');
  if (action === 'status') {
    if (flags.json) printJson(health);
    else
      process.stdout.write(
        `engine ${health.version} (pid ${health.pid}) serves ${health.home} since ${health.started}\n`,
      );
    return 0;
  }
  await client.call('shutdown', flags.force ? { query: { force: 'true' } } : {});
  // The engine suspends its VMs, then exits: wait for it to be gone.
  const { pidAlive } = await import('../engine/engine-process.js');
  for (let i = 0; i < 600; i++) {
    if (!pidAlive(health.pid)) {
      process.stdout.write(`engine (pid ${health.pid}) stopped\n`);
      return 0;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new CommandError(`the engine (pid ${health.pid}) is still running after 60 s`);
}
