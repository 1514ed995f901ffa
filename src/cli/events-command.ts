// `smol events`: the engine's event stream (docs/engine.md, "API": the WebSocket /api/v1/events) on this terminal,
// one line an event, or one JSON object a line with --json, until Ctrl-C or the engine goes away.
import type { EngineEvent } from '../api/schema.js';
import { parseIntegerFlag } from './args.js';
import { helpOr, parseCommand, withEngine } from './engine-cli.js';

export const EVENTS_HELP = `Usage: smol events [--type PREFIX] [--vm VM] [-n N] [--json]

Prints every engine event from now on, one a line (the time, the type, then what it is about), or one JSON
EngineEvent a line with --json, until Ctrl-C or the engine stops (then exit status 1). --type keeps only types
that start with PREFIX (vm.network.refused: refused connections; snapshot.: snapshots); metrics samples (every
2 s per running VM) are shown only when --type names them. --vm keeps only events about that VM id. -n N exits
after N events.
`;

/** What one event is about, for a line of text. */
export function describeEvent(event: EngineEvent): string {
  switch (event.type) {
    case 'episode.created':
    case 'episode.updated':
      return `${event.episode.id} ${event.episode.name} ${event.episode.state}`;
    case 'episode.deleted':
      return event.id;
    case 'vm.updated':
      return `${event.vm.id} ${event.vm.name} ${event.vm.state}`;
    case 'vm.removed':
      return `${event.id} (episode ${event.episode})`;
    case 'snapshot.created':
    case 'snapshot.updated':
      return `${event.snapshot.id} ${event.snapshot.name} ${event.snapshot.kind}`;
    case 'snapshot.deleted':
      return event.id;
    case 'progress':
      return `${event.operation} ${event.vm ?? '-'} ${event.done}/${event.total}`;
    case 'image.pull':
      return event.layer
        ? `${event.reference} layer ${event.layer.index + 1} ${event.layer.digest.slice(7, 19)} ${event.layer.status} ${event.layer.received}/${event.layer.total}`
        : `${event.reference} ${event.step ?? ''} ${event.detail ?? ''}`.trimEnd();
    case 'metrics':
      return `${event.vm} cpu ${event.cpuPercent.toFixed(1)}% resident ${event.memory.residentBytes}`;
    case 'vm.network.refused': {
      const { destination, port, protocol, rule, name } = event.refusal;
      const to = port ? `${destination}:${port}` : destination;
      return `${event.vm} ${to} ${protocol} ${rule}${name ? ` ${name}` : ''} (refused ${event.refused})`;
    }
  }
}

/** The VM an event is about, if any. */
function vmOf(event: EngineEvent): string | null {
  switch (event.type) {
    case 'vm.updated':
      return event.vm.id;
    case 'vm.removed':
      return event.id;
    case 'snapshot.created':
    case 'snapshot.updated':
      return event.snapshot.vm;
    case 'progress':
    case 'metrics':
    case 'vm.network.refused':
      return event.vm;
    default:
      return null;
  }
}

export async function runEvents(argv: string[]): Promise<number> {
  const { flags, help } = parseCommand(
    'events',
    argv,
    {
      type: { type: 'string' },
      vm: { type: 'string' },
      count: { type: 'string', short: 'n' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
    { min: 0, max: 0, names: '' },
  );
  if (helpOr(help, EVENTS_HELP)) return 0;
  const limit = parseIntegerFlag('events', '-n', flags.count, { min: 1, max: Number.MAX_SAFE_INTEGER, default: 0 });
  const type = flags.type;
  const wanted = (event: EngineEvent) =>
    (type === undefined ? event.type !== 'metrics' : event.type.startsWith(type)) &&
    (flags.vm === undefined || vmOf(event) === flags.vm);
  return withEngine(async (smol) => {
    let shown = 0;
    const ended = await new Promise<'done' | 'signal' | string>((resolve) => {
      const stream = smol.api.events(
        (event) => {
          if (!wanted(event)) return;
          process.stdout.write(
            flags.json
              ? `${JSON.stringify(event)}\n`
              : `${new Date().toISOString()} ${event.type} ${describeEvent(event)}\n`,
          );
          if (limit && ++shown >= limit) {
            stream.close();
            resolve('done');
          }
        },
        { onClose: (why) => resolve(why) },
      );
      const stop = () => (stream.close(), resolve('signal'));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      process.once('SIGHUP', stop);
    });
    if (ended === 'done' || ended === 'signal') return 0;
    process.stderr.write(`smol: the engine's event stream ended (${ended})\n`);
    return 1;
  });
}
