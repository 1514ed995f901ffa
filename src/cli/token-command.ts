// `smol token create NAME [--read-only] | ls | rm NAME`: the data dir's named tokens, which open its `smol serve`
// listeners beside the serve-token (docs/remote.md, "Tokens"). The engine keeps only each token's SHA-256, so a new
// token is printed once, by create.
import { EXIT, age, helpOr, JSON_FLAG, parseCommand, printJson, printTable, withEngine } from './engine-cli.js';
import { CommandError } from './errors.js';

export const TOKEN_HELP = `Usage: smol token create NAME [--read-only] [--json]
       smol token ls [--json]
       smol token rm NAME

create makes a token that opens this data dir's TCP listeners (smol serve) and prints it once: the engine
keeps only its SHA-256. --read-only limits it to looking: GET requests, the event stream and consoles
without typing; anything else is refused with 403. ls lists the tokens (name, scope, created, last used;
never the secrets). rm revokes one at once: its next request gets 401 and its open streams are closed.
A remote client uses one with smol engine add NAME URL --token T. With --engine, these manage a remote
engine's tokens (a full token only).
`;

export async function runToken(argv: string[]): Promise<number> {
  const { flags, args, help } = parseCommand(
    'token',
    argv,
    { ...JSON_FLAG, 'read-only': { type: 'boolean', default: false } },
    { min: 1, max: 2, names: 'create NAME, ls or rm NAME' },
  );
  if (helpOr(help, TOKEN_HELP)) return 0;
  const [action, name] = args as [string, string | undefined];
  const needsName = action === 'create' || action === 'rm';
  if (!['create', 'ls', 'rm'].includes(action)) {
    throw new CommandError(`token: unknown action ${action} (create, ls or rm)`, EXIT.usage);
  }
  if (needsName !== (name !== undefined)) {
    throw new CommandError(`token: ${action} ${needsName ? 'needs a NAME' : 'takes no NAME'}`, EXIT.usage);
  }
  if (flags['read-only'] && action !== 'create') {
    throw new CommandError('token: --read-only is an option of create only', EXIT.usage);
  }
  return withEngine(async (smol) => {
    if (action === 'create') {
      const scope = flags['read-only'] ? 'read-only' : 'full';
      const created = await smol.api.call('createToken', { body: { name: name!, scope } });
      if (flags.json) printJson(created);
      else {
        process.stdout.write(`${created.token}\n`);
        process.stderr.write(`token ${created.name} (${created.scope}): shown this once; the engine keeps its hash\n`);
      }
    } else if (action === 'rm') {
      await smol.api.call('removeToken', { params: { token: name! } });
      process.stdout.write(`token ${name} revoked\n`);
    } else {
      const { tokens } = await smol.api.call('listTokens');
      if (flags.json) printJson(tokens);
      else
        printTable(
          ['NAME', 'SCOPE', 'CREATED', 'LAST USED'],
          tokens.map((t) => [
            t.name,
            t.scope,
            `${age(t.created)} ago`,
            t.lastUsed ? `${age(t.lastUsed)} ago` : 'never',
          ]),
        );
    }
    return 0;
  });
}
