// `smol port VM [PORT]` and `smol logs --network VM`: a VM's network as the engine sees it (docs/network.md, "Seen
// from the host"): its forwarded ports, as `docker port` prints them, and the connections its policy refused.
import type { PortForward, VmNetwork } from '../api/schema.js';
import { EXIT, helpOr, JSON_FLAG, parseCommand, printJson, printTable, withEngine } from './engine-cli.js';
import { CommandError } from './errors.js';
import { parseIntegerFlag } from './args.js';

export const PORT_HELP = `Usage: smol port VM [PORT[/tcp]] [--json]

Prints the VM's forwarded ports (its Smolfile's \`ports\`), one a line, as docker port does:
  80/tcp -> 127.0.0.1:41235
With PORT, only where that guest port is forwarded to. Forwards listen on 127.0.0.1 only, while the VM runs; a
lone guest port in the Smolfile gets a free host port at each boot, restore and fork. A VM without a network, one
that is not running, or a PORT it does not forward is an error (exit status 1, 4 when it is not running).
`;

/** `127.0.0.1:41235->80/tcp`, comma-separated: what `smol ls` shows in its PORTS column. */
export function portsColumn(ports: readonly PortForward[]): string {
  return ports.length === 0 ? '-' : ports.map((p) => `127.0.0.1:${p.host}->${p.guest}/tcp`).join(', ');
}

function requireNetwork(command: string, ref: string, network: VmNetwork): void {
  if (!network.enabled)
    throw new CommandError(`${command}: ${ref} has no network (its Smolfile does not say net = true)`, EXIT.failed);
}

/** The guest port a `smol port` argument names: `80` or `80/tcp`. */
function guestPort(text: string): number {
  const match = /^(\d+)(?:\/(\w+))?$/.exec(text);
  if (match?.[2] !== undefined && match[2] !== 'tcp')
    throw new CommandError(`port: ${text}: only TCP ports are forwarded (80 or 80/tcp)`, EXIT.usage);
  if (!match) throw new CommandError(`port: ${text}: expected a port such as 80 or 80/tcp`, EXIT.usage);
  return parseIntegerFlag('port', 'PORT', match[1]!, { min: 1, max: 65535, default: 0 });
}

export async function runPort(argv: string[]): Promise<number> {
  const { flags, args, help } = parseCommand('port', argv, JSON_FLAG, { min: 1, max: 2, names: 'a VM' });
  if (helpOr(help, PORT_HELP)) return 0;
  const [ref, wanted] = [args[0]!, args[1] === undefined ? undefined : guestPort(args[1])];
  const [vm, network] = await withEngine((smol) => Promise.all([smol.vm(ref), smol.network(ref)]));
  requireNetwork('port', ref, network);
  if (vm.state !== 'running' && vm.state !== 'paused')
    throw new CommandError(`port: ${ref} is ${vm.state}: its ports are forwarded only while it runs`, EXIT.conflict);
  const ports = wanted === undefined ? network.ports : network.ports.filter((p) => p.guest === wanted);
  if (wanted !== undefined && ports.length === 0) {
    const forwarded = network.ports.map((p) => p.guest).join(', ') || 'none';
    throw new CommandError(`port: ${ref} forwards no guest port ${wanted} (it forwards ${forwarded})`, EXIT.failed);
  }
  if (flags.json) printJson({ vm: network.vm, ports });
  else for (const p of ports) process.stdout.write(`${p.guest}/tcp -> 127.0.0.1:${p.host}\n`);
  return 0;
}

export const NETWORK_LOGS_HELP = `Usage: smol logs --network VM [--after SEQ] [--json]

Lists the connections and packets the VM's network policy refused (docs/network.md, "Refusals"): when the engine
saw each (it reads every networked VM each second), its destination and port, the protocol, the rule that refused
it, and the DNS name for dns-name. The engine keeps the last 256 per VM; the total counts them all. --after SEQ
lists only refusals after that one (the JSON's seq).
`;

/** `smol logs --network VM`: the VM's refusals, oldest first. */
export async function printRefusals(ref: string, options: { after?: string; json: boolean }): Promise<number> {
  const after =
    options.after === undefined
      ? undefined
      : parseIntegerFlag('logs', '--after', options.after, { min: 0, max: Number.MAX_SAFE_INTEGER, default: 0 });
  const network = await withEngine((smol) => smol.network(ref, { after }));
  requireNetwork('logs', ref, network);
  if (options.json) {
    printJson({ vm: network.vm, refused: network.refused, rules: network.rules, events: network.events });
    return 0;
  }
  if (network.events.length === 0) {
    process.stdout.write(`no refused connections${after === undefined ? '' : ` after ${after}`}\n`);
    return 0;
  }
  printTable(
    ['TIME', 'DESTINATION', 'PROTOCOL', 'RULE', 'NAME'],
    network.events.map((e) => [
      e.at,
      e.port ? `${e.destination}:${e.port}` : e.destination,
      e.protocol,
      e.rule,
      e.name ?? '',
    ]),
  );
  const shown = network.events.length;
  if (network.refused > shown && after === undefined)
    process.stdout.write(`(${network.refused} refused in all; the engine keeps the last ${shown})\n`);
  return 0;
}
