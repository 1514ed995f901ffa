// `smol serve`: the engine's API (and, with the UI, its pages) on a TCP port, behind a random token that the
// printed URL carries (docs/engine.md, "API"). It runs until Ctrl-C, then closes that listener; the engine and its
// VMs keep running. When the engine goes away it waits for the next one and serves again on the same port.
import path from 'node:path';
import { parseIntegerFlag } from './args.js';
import { Smol } from '../../sdk/typescript/smol.js';
import { EXIT, helpOr, parseCommand, printJson, withEngine } from './engine-cli.js';
import { CommandError } from './errors.js';

export const SERVE_HELP = `Usage: smol serve [--listen ADDR:PORT | --host H --port P] [--tls [--cert FILE --key FILE]]
                  [--rotate-token] [--json]

Opens the engine's API on a TCP port and prints its URL, which carries the data dir's token: requests
without it get 401, and requests from pages of another origin get 403. The token is kept in
SMOL_HOME/serve-token (mode 0600) and stays the same across engines and serves until --rotate-token
replaces it (the old token then opens nothing). Without --port it takes the port this host address was
served on last, when that is free (else any free port, and it says so). Runs until Ctrl-C (or SIGTERM,
or its terminal closing), which closes the listener and exits 0; the engine and its VMs keep running.
If the engine stops first, it waits for the next engine of the data dir and serves again on the same
port with the same token, so an open page reconnects.

--tls serves HTTPS: with --cert and --key, that certificate; else the data dir's own self-signed one
(SMOL_HOME/tls/, made on first use). Its SHA-256 fingerprint is printed: clients pin it on first use
(smol engine add). --listen 0.0.0.0:7443 (or any address beyond 127.0.0.1) needs --tls and exposes the
engine to the network: anyone with a full token controls your VMs (docs/remote.md). Named tokens
(smol token create) open the listener too.
`;

/** `10.0.0.2:7443`, `[::]:7443`, `0.0.0.0:0`: an address and a port. */
function parseListen(value: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d+)$/.exec(value);
  if (!match) throw new CommandError(`serve: --listen ${value}: expected ADDR:PORT (such as 0.0.0.0:7443)`, EXIT.usage);
  const port = parseIntegerFlag('serve', '--listen', match[3], { min: 0, max: 65535, default: 0 });
  return { host: match[1] ?? match[2]!, port };
}

/** How often a serve whose engine went away looks for the next one. */
const FOLLOW_MS = 500;

export async function runServe(argv: string[]): Promise<number> {
  const { flags, help } = parseCommand(
    'serve',
    argv,
    {
      port: { type: 'string' },
      host: { type: 'string' },
      listen: { type: 'string' },
      tls: { type: 'boolean', default: false },
      cert: { type: 'string' },
      key: { type: 'string' },
      'rotate-token': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
    { min: 0, max: 0, names: '' },
  );
  if (helpOr(help, SERVE_HELP)) return 0;
  if (flags.listen !== undefined && (flags.host !== undefined || flags.port !== undefined)) {
    throw new CommandError('serve: --listen ADDR:PORT replaces --host and --port', EXIT.usage);
  }
  if ((flags.cert === undefined) !== (flags.key === undefined)) {
    throw new CommandError('serve: --cert and --key go together (a certificate and its private key)', EXIT.usage);
  }
  const listen = flags.listen !== undefined ? parseListen(flags.listen) : null;
  const host = listen?.host ?? flags.host ?? '127.0.0.1';
  let port = listen?.port ?? parseIntegerFlag('serve', '--port', flags.port, { min: 0, max: 65535, default: 0 });
  const files = flags.cert !== undefined ? { cert: path.resolve(flags.cert), key: path.resolve(flags.key!) } : {};
  const tls = { tls: flags.tls || flags.cert !== undefined, ...files };
  let signalled = false;
  let wake: () => void = () => undefined;
  const stop = () => ((signalled = true), wake());
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  process.once('SIGHUP', stop); // its terminal closed
  let rotateToken = flags['rotate-token'];
  let first = true;
  for (;;) {
    const served = await withEngine(async (smol) => {
      const listener = await smol.api.call('listen', { body: { host, port, rotateToken, ...tls } });
      rotateToken = false;
      if (flags.json) printJson(listener);
      else {
        const again = first ? '' : 'the engine is back: ';
        process.stdout.write(`${again}Smol Studio engine API at ${listener.url}\n`);
        if (listener.fingerprint) process.stdout.write(`certificate SHA-256 fingerprint ${listener.fingerprint}\n`);
        process.stdout.write('(Ctrl-C stops serving)\n');
        if (listener.movedFrom) {
          process.stdout.write(`(port ${listener.movedFrom}, where this data dir was served before, is taken)\n`);
        }
      }
      first = false;
      port = listener.port; // the next engine serves here too
      // Held open by the engine's event stream: a pending promise alone keeps no event loop alive (Node would exit
      // at once with status 13), and the stream also tells when the engine itself goes away.
      const ended = await new Promise<'signal' | string>((resolve) => {
        const stream = smol.api.events(() => undefined, { onClose: (why) => resolve(why) });
        wake = () => (stream.close(), resolve('signal'));
        if (signalled) wake();
      });
      if (ended === 'signal') {
        await smol.api.call('unlisten', { query: { port: listener.port } }).catch(() => undefined);
        smol.api.close();
        return 'stopped';
      }
      smol.api.close();
      process.stderr.write(
        `smol: the engine went away (${ended}); waiting for the next engine to serve ${listener.url} again ` +
          '(Ctrl-C stops)\n',
      );
      return 'lost';
    });
    if (served === 'stopped') return 0;
    // The next engine: started by whoever needs it (the app, the CLI, smol engine); this serve does not start one.
    while (!signalled && !(await engineAnswers())) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, FOLLOW_MS);
        wake = () => (clearTimeout(timer), resolve());
      });
    }
    if (signalled) return 0;
  }
}

async function engineAnswers(): Promise<boolean> {
  try {
    (await Smol.connect({ start: false })).api.close();
    return true;
  } catch {
    return false;
  }
}
