// `smol console VM` (interactive, or --send TEXT) and `smol logs VM`: a VM's console through the engine.
import { ConsoleInput } from './console-input.js';
import { helpOr, JSON_FLAG, parseCommand, printJson, withEngine } from './engine-cli.js';
import { parseIntegerFlag } from './args.js';
import { UsageError } from './errors.js';
import { NETWORK_LOGS_HELP, printRefusals } from './network-commands.js';

export const CONSOLE_HELP = `Usage: smol console VM [--send TEXT]

Attaches this terminal to a VM's serial console: the current screen first, then output as it comes; what you type
goes to the guest (raw mode on a terminal; Ctrl-A x detaches, Ctrl-A h lists the escapes). The VM keeps running
after you detach. With --send, writes TEXT (escapes such as \\n are not interpreted: use $'…' in bash) and exits.
`;

export async function runConsole(argv: string[]): Promise<number> {
  const { flags, args, help } = parseCommand(
    'console',
    argv,
    { send: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    { min: 1, max: 1, names: 'a VM' },
  );
  if (helpOr(help, CONSOLE_HELP)) return 0;
  const ref = args[0]!;
  return withEngine(async (smol) => {
    if (flags.send !== undefined) {
      await smol.write(ref, flags.send);
      return 0;
    }
    await smol.vm(ref); // a clear "no VM named …" before the terminal goes raw
    let closed!: (why: string) => void;
    const ended = new Promise<string>((resolve) => (closed = resolve));
    const stream = smol.console(ref, {
      onScreen: (screen) => process.stdout.write(screen),
      onData: (data) => process.stdout.write(data),
      onClose: (why) => closed(why),
    });
    const input = new ConsoleInput(
      {
        write: (data) => {
          stream.write(data);
          return data.length;
        },
      },
      { input: process.stdin, notices: process.stderr },
    );
    input.attach();
    try {
      const why = await Promise.race([ended, input.quit.then(() => null)]);
      if (why !== null) process.stderr.write(`\r\nsmol: the console closed: ${why}\r\n`);
    } finally {
      input.detach();
      stream.close();
    }
    return 0;
  });
}

export const LOGS_HELP = `Usage: smol logs VM [--tail N] [--json]
       smol logs --network VM [--after SEQ] [--json]

Prints a VM's recent console output (the engine keeps the last 1 MiB), or its last N lines.

With --network, ${NETWORK_LOGS_HELP.slice(NETWORK_LOGS_HELP.indexOf('\n\n') + 2).replace(/^Lists/, 'lists')}`;

export async function runLogs(argv: string[]): Promise<number> {
  const { flags, args, help } = parseCommand(
    'logs',
    argv,
    { ...JSON_FLAG, tail: { type: 'string' }, network: { type: 'boolean', default: false }, after: { type: 'string' } },
    { min: 1, max: 1, names: 'a VM' },
  );
  if (helpOr(help, LOGS_HELP)) return 0;
  if (flags.network) {
    if (flags.tail !== undefined) throw new UsageError('logs', '--tail is for console output, not with --network');
    return printRefusals(args[0]!, { after: flags.after, json: flags.json });
  }
  if (flags.after !== undefined) throw new UsageError('logs', '--after goes with --network');
  const tail =
    flags.tail === undefined
      ? undefined
      : parseIntegerFlag('logs', '--tail', flags.tail, { min: 1, max: 1_000_000, default: 0 });
  const logs = await withEngine((smol) => smol.logs(args[0]!, tail));
  if (flags.json) printJson(logs);
  else process.stdout.write(logs.text);
  return 0;
}
