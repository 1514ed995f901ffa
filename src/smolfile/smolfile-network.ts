// The network keys, as smolvm spells them: `net`, `ports` and `[network]` with `allow_hosts` and `allow_cidrs`
// (docs/smolfile.md, "Network"; docs/network.md for what they do). Entries are checked here as the VMM's policy
// (native/vmm/net_policy.c) reads them, so a Smolfile that passes never fails later in the VMM.
import { isIPv4, isIPv6 } from 'node:net';
import type { ProblemList } from './smolfile-problems.js';
import { expected, readStringArray, readTable, type TomlTable } from './toml-values.js';
import { formatKeyPath, type KeyPath } from './toml-locator.js';

/** One TCP forward from the host's 127.0.0.1 to the guest. */
export interface SmolfilePort {
  /** The host port; null: a free one, chosen when the VM starts (and fresh for each fork). */
  host: number | null;
  guest: number;
}

export interface SmolfileNetwork {
  /** `net = true`: the VM has a network device; false (the default): none at all, the guest sees only `lo`. */
  enabled: boolean;
  /** Every forward, ranges expanded, in file order. */
  ports: SmolfilePort[];
  /** `[network] allow_hosts`, as written. */
  allowHosts: string[];
  /** `[network] allow_cidrs`, as written. */
  allowCidrs: string[];
}

export const NETWORK_DEFAULTS: SmolfileNetwork = { enabled: false, ports: [], allowHosts: [], allowCidrs: [] };

/** The VMM's limits (net_slirp.h, net_policy.h). */
export const NETWORK_LIMITS = { ports: 64, allowHosts: 64, allowCidrs: 64 } as const;

export const NETWORK_KEYS = ['allow_hosts', 'allow_cidrs'] as const;

const PORT = /^(\d{1,5})(?:-(\d{1,5}))?$/;

/** "80" or "5173-5180": the first and last port, or a reason it is not one. */
function portRange(text: string): { first: number; last: number } | string {
  const match = PORT.exec(text);
  if (!match) return `"${text}" is not a port (1 to 65535) or a range of them ("5173-5180")`;
  const first = Number(match[1]);
  const last = match[2] === undefined ? first : Number(match[2]);
  for (const port of [first, last]) if (port < 1 || port > 65535) return `port ${port} is outside 1 to 65535`;
  if (last < first) return `the range ${text} ends before it starts`;
  return { first, last };
}

/** `"8080:80"`, `"3000"`, `"5173-5180:5173-5180"`: the forwards, or a reason. */
export function parsePortEntry(entry: string): SmolfilePort[] | string {
  const parts = entry.split(':');
  if (parts.length > 2) return 'expected "GUEST", "HOST:GUEST" or ranges "A-B:C-D" (ports bind on 127.0.0.1)';
  const guest = portRange(parts.at(-1) ?? '');
  if (typeof guest === 'string') return guest;
  if (parts.length === 1) {
    return Array.from({ length: guest.last - guest.first + 1 }, (_, i) => ({ host: null, guest: guest.first + i }));
  }
  const host = portRange(parts[0] ?? '');
  if (typeof host === 'string') return host;
  const count = guest.last - guest.first + 1;
  if (host.last - host.first + 1 !== count) {
    return `the host range has ${host.last - host.first + 1} ports and the guest range ${count}; they must match`;
  }
  return Array.from({ length: count }, (_, i) => ({ host: host.first + i, guest: guest.first + i }));
}

const LABEL = /^(?!-)[A-Za-z0-9_-]{1,63}$/;

/** An allow_hosts entry: "example.org", "*.example.com", either with ":PORT"; null when valid, else a reason. */
export function hostPatternProblem(entry: string): string | null {
  let name = entry;
  const colon = entry.lastIndexOf(':');
  if (colon >= 0) {
    const port = entry.slice(colon + 1);
    if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
      return `the port after ':' must be 1 to 65535, found "${port}"`;
    }
    name = entry.slice(0, colon);
  }
  if (name.startsWith('*.')) name = name.slice(2);
  if (name.endsWith('.')) name = name.slice(0, -1);
  if (name.length === 0 || name.length > 253 || !name.split('.').every((label) => LABEL.test(label))) {
    return 'expected a host name ("example.org"), a pattern ("*.example.org"), either with ":PORT"';
  }
  return null;
}

/** An IPv6 address's 16 bytes (with an embedded IPv4 tail), or null. */
function ipv6Bytes(text: string): number[] | null {
  if (!isIPv6(text)) return null;
  let groups = text;
  const tail: number[] = [];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1]) {
    tail.push(...v4[1].split('.').map(Number));
    groups = text.slice(0, -v4[1].length) + '0:0';
  }
  const [head = '', rest] = groups.split('::');
  const left = head ? head.split(':') : [];
  const right = rest === undefined ? [] : rest ? rest.split(':') : [];
  const fill = rest === undefined ? 0 : 8 - left.length - right.length;
  const words = [...left, ...Array<string>(fill).fill('0'), ...right].map((g) => parseInt(g, 16));
  const bytes = words.flatMap((w) => [w >> 8, w & 0xff]);
  if (tail.length) bytes.splice(12, 4, ...tail);
  return bytes.length === 16 ? bytes : null;
}

/** An allow_cidrs entry: "203.0.113.0/24", "2001:db8::/32" or a lone address; null when valid, else a reason. */
export function cidrProblem(entry: string): string | null {
  const slash = entry.indexOf('/');
  const address = slash < 0 ? entry : entry.slice(0, slash);
  const bytes = isIPv4(address) ? address.split('.').map(Number) : ipv6Bytes(address);
  if (!bytes) return 'expected an IPv4 or IPv6 address with an optional /PREFIX ("203.0.113.0/24")';
  const max = bytes.length * 8;
  if (slash < 0) return null;
  const prefixText = entry.slice(slash + 1);
  const prefix = Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText) || prefix > max) return `the prefix length must be 0 to ${max}`;
  for (let bit = prefix; bit < max; bit++) {
    if (((bytes[bit >> 3] ?? 0) >> (7 - (bit & 7))) & 1) return `the address has bits set past the /${prefix} prefix`;
  }
  return null;
}

/** `ports` at `at` (`['ports']` or `['dev', 'ports']`). */
function readPorts(problems: ProblemList, at: KeyPath, value: unknown): SmolfilePort[] | undefined {
  const entries = readStringArray(problems, at, value);
  const name = (index: number) => formatKeyPath([...at, index]);
  if (!entries) return undefined;
  const ports: SmolfilePort[] = [];
  const hostIndex = new Map<number, number>();
  let ok = true;
  entries.forEach((entry, index) => {
    const parsed = parsePortEntry(entry);
    if (typeof parsed === 'string') {
      problems.error([...at, index], `\`${name(index)}\` ${JSON.stringify(entry)}: ${parsed}`);
      ok = false;
      return;
    }
    for (const port of parsed) {
      const first = port.host === null ? undefined : hostIndex.get(port.host);
      if (first !== undefined) {
        problems.error(
          [...at, index],
          `\`${name(index)}\` ${JSON.stringify(entry)}: host port ${port.host} is forwarded already by ` +
            `\`${name(first)}\` (line ${problems.where([...at, first]).line})`,
        );
        ok = false;
        return;
      }
      if (port.host !== null) hostIndex.set(port.host, index);
    }
    ports.push(...parsed);
  });
  if (ok && ports.length > NETWORK_LIMITS.ports) {
    problems.error(
      at,
      `\`${formatKeyPath(at)}\`: at most ${NETWORK_LIMITS.ports} forwards, ranges counted port by port; found ${ports.length}`,
    );
    return undefined;
  }
  return ok ? ports : undefined;
}

function readList(
  problems: ProblemList,
  key: (typeof NETWORK_KEYS)[number],
  value: unknown,
  check: (entry: string) => string | null,
): string[] | undefined {
  const entries = readStringArray(problems, ['network', key], value);
  if (!entries) return undefined;
  let ok = true;
  entries.forEach((entry, index) => {
    const problem = check(entry);
    if (problem === null) return;
    problems.error(['network', key, index], `\`network.${key}[${index}]\` ${JSON.stringify(entry)}: ${problem}`);
    ok = false;
  });
  if (ok && entries.length > NETWORK_LIMITS[key === 'allow_hosts' ? 'allowHosts' : 'allowCidrs']) {
    problems.error(['network', key], `\`network.${key}\`: at most 64 entries, found ${entries.length}`);
    return undefined;
  }
  return ok ? entries : undefined;
}

/**
 * The network keys, with `[dev] ports` (`dev`, the table or `{}`) merged as smolvm merges it: a non-empty
 * `dev.ports` replaces `ports`. Undefined when one of them is wrong (the problems say which).
 */
export function readNetwork(
  problems: ProblemList,
  document: TomlTable,
  dev: TomlTable = {},
): SmolfileNetwork | undefined {
  let enabled: boolean | undefined = NETWORK_DEFAULTS.enabled;
  if (document.net !== undefined) {
    enabled =
      typeof document.net === 'boolean' ? document.net : expected(problems, ['net'], 'true or false', document.net);
  }
  const topPorts = document.ports === undefined ? [] : readPorts(problems, ['ports'], document.ports);
  const devPorts = dev.ports === undefined ? [] : readPorts(problems, ['dev', 'ports'], dev.ports);
  const ports = !topPorts || !devPorts ? undefined : devPorts.length > 0 ? devPorts : topPorts;
  let allowHosts: string[] | undefined = [];
  let allowCidrs: string[] | undefined = [];
  if (document.network !== undefined) {
    const table = readTable(problems, ['network'], document.network);
    if (!table) return undefined;
    if (table.allow_hosts !== undefined)
      allowHosts = readList(problems, 'allow_hosts', table.allow_hosts, hostPatternProblem);
    if (table.allow_cidrs !== undefined) allowCidrs = readList(problems, 'allow_cidrs', table.allow_cidrs, cidrProblem);
  }
  if (enabled === false) {
    for (const [at, given] of [
      [['ports'], document.ports !== undefined],
      [['dev', 'ports'], dev.ports !== undefined],
      [['network'], document.network !== undefined],
    ] as const) {
      if (!given) continue;
      problems.error(
        at,
        `\`${formatKeyPath(at)}\` needs a network, and this Smolfile has none (\`net\` is false by default); add net = true`,
      );
    }
  }
  if (enabled === undefined || !ports || !allowHosts || !allowCidrs) return undefined;
  return { enabled, ports, allowHosts, allowCidrs };
}
