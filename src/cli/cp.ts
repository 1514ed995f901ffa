// `smol cp SRC DST`: files and directories into or out of a VM's guest, with docker cp's syntax (`VM:/path` on one
// side), streamed through the agent (sdk/typescript/copy.ts).
import { EXIT, helpOr, parseCommand, withEngine } from './engine-cli.js';
import { CommandError, UsageError } from './errors.js';

const HELP = `Usage: smol cp [--json] SRC DST

Copies a file or a directory (recursively) between this machine and a running VM's guest, as docker cp does:
one side is VM:/absolute/path (the VM's id, a unique prefix or its name), the other a local path. Into an existing
directory it lands as DIR/<name>, else as DST itself. Owners (numeric), modes, times, symbolic and hard links are
kept (owners on this side when smol runs as root). Nothing is written outside DST's directory.

  smol cp ./src main:/app          # ./src becomes /app (or /app/src when /app is a directory)
  smol cp main:/app/results ./out
`;

/** `VM:/path` as docker reads it: a colon before any slash. */
export function guestSide(arg: string): { vm: string; path: string } | null {
  const colon = arg.indexOf(':');
  if (colon <= 0 || arg.slice(0, colon).includes('/')) return null;
  return { vm: arg.slice(0, colon), path: arg.slice(colon + 1) };
}

export async function runCp(argv: string[]): Promise<number> {
  const { flags, args, help } = parseCommand(
    'cp',
    argv,
    { json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } },
    { min: 2, max: 2, names: 'SRC and DST' },
  );
  if (helpOr(help, HELP)) return 0;
  const [src, dst] = [args[0]!, args[1]!];
  const from = guestSide(src);
  const to = guestSide(dst);
  if ((from === null) === (to === null)) {
    throw new UsageError('cp', 'one of SRC and DST is VM:/path, the other a local path (smol cp ./dir main:/app)');
  }
  const guest = (from ?? to)!;
  if (!guest.path.startsWith('/'))
    throw new UsageError('cp', `${guest.vm}:${guest.path}: the guest path must be absolute`);
  const result = await withEngine(async (smol) => {
    try {
      return from ? await smol.copyOut(from.vm, from.path, dst) : await smol.copyIn(to!.vm, src, to!.path);
    } catch (error) {
      throw new CommandError(`cp: ${(error as Error).message}`, EXIT.failed);
    }
  });
  process.stdout.write(
    flags.json
      ? JSON.stringify(result) + '\n'
      : `${result.entries} entries, ${(result.bytes / 2 ** 20).toFixed(1)} MiB\n`,
  );
  return 0;
}
