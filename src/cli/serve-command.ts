// `smol serve`: the engine's API (and, with the UI, its pages) on a TCP port, behind a random token that the
// printed URL carries (docs/engine.md, "API"). It runs until Ctrl-C, then closes that listener; the engine and its
// VMs keep running.
import type { Listener } from '../api/schema.js';
import { parseIntegerFlag } from './args.js';
import { helpOr, parseCommand, printJson, withEngine } from './engine-cli.js';

export const SERVE_HELP = `Usage: smol serve [--port P] [--host H] [--json]

Opens the engine's API on a TCP port (default: any free port on 127.0.0.1) and prints its URL, which carries a
random token: requests without it get 401, and requests from pages of another origin get 403. Runs until
Ctrl-C, which closes the listener; the engine and its VMs keep running. Listening beyond 127.0.0.1 (--host 0.0.0.0)
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
    const listener = await smol.api.request<Listener>('POST', '/api/v1/engine/listeners', { host: flags.host, port });
    if (flags.json) printJson(listener);
    else process.stdout.write(`Smol Studio engine API at ${listener.url}\n(Ctrl-C stops serving)\n`);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
      process.once('SIGHUP', resolve); // its terminal closed
    });
    await smol.api.request('DELETE', `/api/v1/engine/listeners?port=${listener.port}`).catch(() => undefined);
    return 0;
  });
}
