// `smol engine add NAME URL --token T | ls | rm NAME | trust NAME|HOST:PORT`: the remote engines this client knows
// (docs/remote.md, "Connecting"), kept in its engines file (client-config.ts, mode 0600) with the certificate
// fingerprints pinned on first use. Any command then reaches one with `smol --engine NAME …` or SMOL_ENGINE=NAME.
import { ClientConfig, pinKey } from '../api/client-config.js';
import { normalFingerprint } from '../api/pinned-tls.js';
import { connectEngine } from '../../sdk/typescript/engine-connection.js';
import { EXIT, JSON_FLAG, age, helpOr, parseCommand, printJson, printTable } from './engine-cli.js';
import { CommandError } from './errors.js';

export const REMOTE_ENGINE_HELP = `Usage: smol engine add NAME URL [--token T] [--fingerprint SHA256]
       smol engine ls [--json]
       smol engine rm NAME
       smol engine trust NAME|HOST:PORT [--fingerprint SHA256]

add names a remote engine (a URL that smol serve printed there; its ?token= is the token unless --token
gives one) and connects once: a TLS engine's certificate fingerprint is pinned then (trust on first use,
as SSH does), or --fingerprint says which one to accept. From then on smol --engine NAME COMMAND (or
SMOL_ENGINE=NAME) runs COMMAND against it, and a changed certificate is refused naming both fingerprints.
trust replaces a pin with the certificate the engine presents now (sending no token): give the new
fingerprint, checked on the engine's host, as --fingerprint so that only that one is accepted.
The file is $SMOL_CLIENT_CONFIG, else ~/.config/smol-studio/engines.json.
`;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export async function runRemoteEngines(argv: string[]): Promise<number> {
  const { flags, args, help } = parseCommand(
    'engine',
    argv,
    { ...JSON_FLAG, token: { type: 'string' }, fingerprint: { type: 'string' } },
    { min: 1, max: 3, names: 'add NAME URL, ls, rm NAME or trust NAME' },
  );
  if (helpOr(help, REMOTE_ENGINE_HELP)) return 0;
  const [action, name, url] = args as [string, string?, string?];
  const config = ClientConfig.load();
  const wanted = { add: 3, ls: 1, rm: 2, trust: 2 }[action as 'add' | 'ls' | 'rm' | 'trust'];
  if (args.length !== wanted) throw new CommandError(`engine: ${REMOTE_ENGINE_HELP.split('\n')[0]}`, EXIT.usage);
  if (action === 'add') {
    if (!NAME.test(name!)) throw new CommandError(`engine add: ${name}: letters, digits, ".", "_", "-"`, EXIT.usage);
    let parsed: URL;
    try {
      parsed = new URL(url!);
    } catch {
      throw new CommandError(`engine add: ${url} is not a URL (such as https://10.0.0.2:7443)`, EXIT.usage);
    }
    if (!/^https?:$/.test(parsed.protocol)) throw new CommandError(`engine add: ${url}: http or https`, EXIT.usage);
    const token = flags.token ?? parsed.searchParams.get('token');
    if (!token) throw new CommandError('engine add: no token (--token T, or ?token= in the URL)', EXIT.usage);
    parsed.search = '';
    const base = parsed.origin;
    let fingerprint: string | undefined;
    try {
      fingerprint = flags.fingerprint === undefined ? undefined : normalFingerprint(flags.fingerprint);
    } catch (error) {
      throw new CommandError(`engine add: --fingerprint ${(error as Error).message}`, EXIT.usage);
    }
    if (fingerprint) config.forget(pinKey(base));
    const client = await connectEngine({ engine: base, token, fingerprint, pins: config });
    const health = await client.call('health');
    client.close();
    // Kept as the certificate spells it (AB:CD:…), however it was typed, so later pin checks compare like with like.
    if (fingerprint) config.set(pinKey(base), config.get(pinKey(base))?.fingerprint ?? fingerprint);
    config.addEngine(name!, base, token);
    const pin = config.get(pinKey(base));
    process.stdout.write(`engine ${name}: ${base}, engine ${health.version} serving ${health.home}\n`);
    if (pin) process.stdout.write(`certificate SHA-256 fingerprint ${pin.fingerprint} (pinned)\n`);
    return 0;
  }
  if (action === 'rm') {
    if (!config.removeEngine(name!)) throw new CommandError(`engine rm: no engine named ${name}`, EXIT.notFound);
    process.stdout.write(`engine ${name} removed\n`);
    return 0;
  }
  if (action === 'trust') {
    const added = config.engines[name!];
    const where = added ? pinKey(added.url) : name!;
    let wanted: string | undefined;
    try {
      wanted = flags.fingerprint === undefined ? undefined : normalFingerprint(flags.fingerprint);
    } catch (error) {
      throw new CommandError(`engine trust: --fingerprint ${(error as Error).message}`, EXIT.usage);
    }
    const before = config.get(where);
    config.forget(where);
    // Learning the certificate needs only the handshake: no token of the user's goes to a certificate not yet checked
    // (a placeholder is sent, and its 401 is expected).
    try {
      const client = await connectEngine({ engine: added ? added.url : `https://${where}`, token: '-', pins: config });
      client.close();
    } catch (error) {
      if (!config.get(where)) {
        if (before) config.set(where, before.fingerprint);
        throw new CommandError(`engine trust: ${(error as Error).message}`);
      }
    }
    const now = config.get(where)!;
    if (wanted && now.fingerprint !== wanted) {
      if (before) config.set(where, before.fingerprint);
      else config.forget(where);
      throw new CommandError(
        `engine trust: ${where} presented a certificate with SHA-256 fingerprint ${now.fingerprint}, not the ` +
          `${wanted} given: refused, the pin stays as it was (someone may be in between)`,
        EXIT.failed,
      );
    }
    process.stdout.write(
      `${where}: now trusting SHA-256 ${now.fingerprint}${before ? ` (was ${before.fingerprint})` : ''}\n`,
    );
    return 0;
  }
  const rows = Object.entries(config.engines).map(([engineName, e]) => ({
    name: engineName,
    url: e.url,
    fingerprint: config.get(pinKey(e.url))?.fingerprint ?? null,
    added: e.added,
  }));
  if (flags.json) printJson(rows);
  else
    printTable(
      ['NAME', 'URL', 'ADDED', 'PINNED CERTIFICATE (SHA-256)'],
      rows.map((r) => [
        r.name,
        r.url,
        `${age(r.added)} ago`,
        r.fingerprint ?? (r.url.startsWith('https:') ? 'not yet' : '-'),
      ]),
    );
  return 0;
}
