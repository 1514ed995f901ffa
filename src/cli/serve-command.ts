// `smol serve`: the engine's API (and, with the UI, its pages) on a TCP port, behind a random token that the
// printed URL carries (docs/engine.md, "API"). It runs until Ctrl-C, then closes that listener; the engine and its
// VMs keep running.
import { parseIntegerFlag } from './args.js';
import { helpOr, parseCommand, printJson, withEngine } from './engine-cli.js';

export const SERVE_HELP = `Usage: smol serve [--port P] [--host H] [--json]

Opens the engine's API on a TCP port (default: any free port on 127.0.0.1) and prints its URL, which carries a
random token: requests without it get 401, and requests from pages of another origin get 403. Runs until
Ctrl-C (or SIGTERM, or its terminal closing), which closes the listener and exits 0; the engine and its VMs
keep running. If the engine stops first, it says so and exits 1. Listening beyond 127.0.0.1 (--host 0.0.0.0)
exposes the engine to the network: anyone with the URL controls your VMs.
`;

export async function runServe(argv: string[]): Promise<number> {
  const { flags, help } = parseCommand(
    'serve',
    argv,
    {
      port: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
    { min: 0, max: 0, names: '' },
  );
  if (helpOr(help, SERVE_HELP)) return 0;
  const port = parseIntegerFlag('serve', '--port', flags.port, { min: 0, max: 65535, default: 0 });
  return withEngine(async (smol) => {
    const listener = await smol.api.call('listen', { body: { host: flags.host, port } });
    if (flags.json) printJson(listener);
    else process.stdout.write(`Smol Studio engine API at ${listener.url}\n(Ctrl-C stops serving)\n`);
    // Held open by the engine's event stream: a pending promise alone keeps no event loop alive (Node would exit
    // at once with status 13), and the stream also tells when the engine itself goes away.
    const ended = await new Promise<'signal' | string>((resolve) => {
      const stream = smol.api.events(() => undefined, { onClose: (why) => resolve(why) });
      const stop = () => (stream.close(), resolve('signal'));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      process.once('SIGHUP', stop); // its terminal closed
    });
    if (ended !== 'signal') {
      process.stderr.write(`smol: the engine went away (${ended}); ${listener.url} is no longer served\n`);
      return 1;
    }
    await smol.api.call('unlisten', { query: { port: listener.port } }).catch(() => undefined);
    return 0;
  });
}
