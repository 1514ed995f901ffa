// Requests for the API request parser's fuzzer (docs/fuzzing.md, "The API request parser"): a valid request for every
// route of the route table (its method, its path with ids, the query and JSON body its schemas accept), then
// mutated: another method; odd ids in the path (empty, NUL, bad percent-encoding, `..`, 300 characters, an encoded
// slash); query parameters unknown, repeated, emptied or given hostile values; JSON bodies whose values get the wrong
// type, huge or non-finite numbers, deep nesting, long strings, NUL and lone surrogates, unknown and `__proto__`
// keys; and the body's bytes cut short, given bad UTF-8 or random bytes, or made larger than the limit.
// api-fuzz.test.ts sends each to an in-process engine.
import { ROUTES } from '../api/routes.js';

export interface FuzzRequest {
  method: string;
  path: string;
  body: Buffer | null;
  how: string;
}

/** A valid query and body for each operation that takes them (against an empty store: most then answer 404). */
const SEEDS: Record<string, { query?: Record<string, string>; body?: unknown }> = {
  createEpisode: { body: { smolfile: '/nonexistent/fuzz/Smolfile', name: 'fuzz' } },
  checkSmolfile: { body: { text: 'kernel = "/nonexistent/fuzz/vmlinux"\nmemory = 512\n' } },
  pullImage: { body: { reference: '127.0.0.1:1/fuzz/none:latest' } },
  removeImage: { query: { reference: 'fuzz-none:latest', force: 'false' } },
  pruneImages: { query: { dryRun: 'true' } },
  deleteEpisode: { query: { force: 'false' } },
  updateVm: { body: { labels: { team: 'fuzz', old: null } } },
  removeVm: { query: { force: 'true' } },
  checkpoint: { body: { name: 'before-fuzz', note: 'a note' } },
  forkVm: { body: { count: 2 } },
  restore: { body: { snapshot: 'sn-aaaaaaaaaa' } },
  network: { query: { after: '3' } },
  logs: { query: { tail: '10' } },
  writeConsole: { body: { data: 'ls -l\n' } },
  exec: { body: { argv: ['sh', '-c', 'echo hi'], env: { A: '1' }, cwd: '/', user: 'root', timeoutMs: 1000 } },
  updateSnapshot: { body: { name: 'renamed', note: '', labels: { a: 'b' } } },
  forkSnapshot: { body: { count: 1 } },
  packMachine: { body: { source: 'vm-aaaaaaaaaa', path: '/nonexistent/fuzz.smolmachine', requestId: 'r1' } },
  inspectMachine: { body: { path: '/nonexistent/fuzz.smolmachine' } },
  openMachine: { body: { path: '/nonexistent/fuzz.smolmachine', name: 'opened' } },
  diff: { query: { from: 'sn-aaaaaaaaaa', to: 'sn-bbbbbbbbbb' } },
  listen: { body: { host: '127.0.0.1', port: 0 } },
  unlisten: { query: { port: '41999' } },
  createToken: { body: { name: 'fuzz', scope: 'read-only' } },
  probeEngine: { body: { url: 'http://127.0.0.1:1' } },
  addEngine: { body: { name: 'fuzz', url: 'http://127.0.0.1:1', token: 't0ken' } },
  shutdown: { query: { force: 'false' } },
};

const IDS: Record<string, string> = {
  episode: 'ep-aaaaaaaaaa',
  vm: 'vm-aaaaaaaaaa',
  snapshot: 'sn-aaaaaaaaaa',
  token: 'fuzz',
  engine: 'fuzz',
};

/** The seed request of every route: the route table is the list, so a new route is fuzzed without a change here. */
export function seedRequests(): {
  operation: string;
  method: string;
  path: string;
  query: Record<string, string>;
  body: unknown;
}[] {
  return ROUTES.map((route) => {
    const seed = SEEDS[route.operation] ?? {};
    const path = route.path.replace(/:(\w+)/g, (_, name: string) => IDS[name] ?? 'x');
    return { operation: route.operation, method: route.method, path, query: seed.query ?? {}, body: seed.body };
  });
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];
const PATH_IDS = [
  '',
  '%00',
  '%ff',
  '%E0%A4%A',
  '%',
  '..',
  '%2e%2e',
  '%2F',
  'a'.repeat(300),
  'vm-aaaaaaaaaa%20',
  '%F0%9F%98%80',
  'vm-',
  '-',
  'x?y',
  '%u0041',
];
const QUERY_VALUES = [
  '',
  'true',
  'TRUE',
  '-1',
  '0',
  '1e309',
  '9007199254740993',
  'NaN',
  '0x10',
  '%00',
  '%ff',
  'a'.repeat(5000),
];

/** JSON values of every type and size a careless or hostile client sends. */
const VALUES: (() => unknown)[] = [
  () => null,
  () => true,
  () => 0,
  () => -1,
  () => 1.5,
  () => 2 ** 53 + 2,
  () => 1e308,
  () => -0,
  () => '',
  () => 'x'.repeat(70_000),
  () => 'a\0b',
  () => '\ud800',
  () => '../../etc/shadow',
  () => '/etc/passwd',
  () => [],
  () => [1, 'two', null],
  () => ({}),
  () => ({ nested: { deeper: [{}] } }),
  () => deep(200),
  () => Array.from({ length: 5000 }, (_, i) => i),
];

function deep(depth: number): unknown {
  let value: unknown = 'bottom';
  for (let i = 0; i < depth; i++) value = i % 2 ? [value] : { d: value };
  return value;
}

/** Raw body texts JSON.stringify never writes. */
const RAW_BODIES = [
  '{',
  '{"count": }',
  '{"count": 1e400}',
  '['.repeat(100_000),
  'null',
  '"a string"',
  '{"__proto__": {"count": 2}}',
  '{"constructor": {"prototype": {}}}',
  '{"a": 1, "a": 2}',
  '\ufeff{}',
  '{"data": "\\ud800"}',
  '{"data": "\\u0000"}',
];

type Random = (n: number) => number;
const pick = <T>(list: readonly T[], random: Random): T => list[random(list.length)]!;

/** An own property even for `__proto__` (assigning it would set the prototype), as JSON.parse makes one. */
function set(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** One change to a JSON value: at the top or at a random depth. */
function mutateValue(value: unknown, random: Random): { value: unknown; how: string } {
  if (value === null || typeof value !== 'object' || random(4) === 0) {
    const next = pick(VALUES, random)();
    return { value: next, how: `a value replaced by ${JSON.stringify(next)?.slice(0, 30)}` };
  }
  const copy: Record<string, unknown> | unknown[] = Array.isArray(value) ? [...value] : { ...value };
  const keys = Object.keys(copy);
  const choice = random(5);
  if (choice === 0 || keys.length === 0) {
    const key = pick(['bogus', '__proto__', 'constructor', '', 'count', 'name', 'labels', 'x'.repeat(300)], random);
    set(copy, key, pick(VALUES, random)());
    return { value: copy, how: `key ${JSON.stringify(key.slice(0, 20))} added` };
  }
  const key = pick(keys, random);
  if (choice === 1) {
    if (Array.isArray(copy)) copy.splice(Number(key), 1);
    else delete copy[key];
    return { value: copy, how: `${key} removed` };
  }
  const inner = mutateValue((copy as Record<string, unknown>)[key], random);
  set(copy, key, inner.value);
  return { value: copy, how: `${key}: ${inner.how}` };
}

function mutateBytes(body: Buffer, random: Random): { body: Buffer; how: string } {
  const at = random(body.length + 1);
  switch (random(4)) {
    case 0:
      return { body: body.subarray(0, at), how: `body cut at ${at} of ${body.length}` };
    case 1:
      return {
        body: Buffer.concat([body.subarray(0, at), Buffer.from([0xff, 0xfe, 0xc3]), body.subarray(at)]),
        how: `bad UTF-8 at ${at}`,
      };
    case 2: {
      const noise = Buffer.from(Array.from({ length: 1 + random(8) }, () => random(256)));
      return { body: Buffer.concat([body.subarray(0, at), noise, body.subarray(at)]), how: `bytes at ${at}` };
    }
    default:
      return { body: Buffer.from(pick(RAW_BODIES, random)), how: 'a raw body' };
  }
}

function encodeQuery(query: [string, string][]): string {
  if (!query.length) return '';
  // Values that are already percent-escapes (%00, %ff) go as they are; the rest encoded.
  const part = (text: string) => (/^%/.test(text) ? text : encodeURIComponent(text));
  return `?${query.map(([k, v]) => `${part(k)}=${part(v)}`).join('&')}`;
}

/** A URL or image reference that names this machine (tests send traffic nowhere else). */
const LOOPBACK_URL = /^https?:\/\/(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\])(:\d+)?\/?$/;
const LOOPBACK_REFERENCE = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\]):\d+\/[^\s]*$/;

/**
 * A body the engine would act on with a `url` (probeEngine, addEngine) or `reference` (pullImage) that names another
 * host, or a Smolfile `text` that names an image, gets a loopback (or image-less) one back: a mutant must never make the engine reach a registry or an engine off this
 * machine, nor ask DNS for a mutated name. (The engine parses bodies with JSON.parse of the UTF-8 text, as here;
 * what does not parse here is refused there before any handler runs.)
 */
function onlyLoopback(bytes: Buffer | null): Buffer | null {
  if (!bytes) return bytes;
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    return bytes;
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return bytes;
  const fields = parsed as Record<string, unknown>;
  let changed = false;
  if (typeof fields.url === 'string' && !LOOPBACK_URL.test(fields.url)) {
    set(fields, 'url', 'http://127.0.0.1:1');
    changed = true;
  }
  if (typeof fields.reference === 'string' && !LOOPBACK_REFERENCE.test(fields.reference)) {
    set(fields, 'reference', '127.0.0.1:1/fuzz/none:latest');
    changed = true;
  }
  // A Smolfile's text that names an image would pull it, should a mutant carry it to createEpisode.
  if (typeof fields.text === 'string' && /image/i.test(fields.text)) {
    set(fields, 'text', 'kernel = "/nonexistent/fuzz/vmlinux"\n');
    changed = true;
  }
  return changed ? Buffer.from(JSON.stringify(fields)) : bytes;
}

/** One mutant of one route's seed request: 1 to 3 changes among method, path, query and body. */
export function mutantRequest(random: Random, seeds = seedRequests()): FuzzRequest {
  const seed = pick(seeds, random);
  let method = seed.method;
  let segments = seed.path.split('/');
  const query = Object.entries(seed.query);
  let body: unknown = seed.body;
  let raw: Buffer | null = null;
  const hows: string[] = [];
  for (let n = 1 + random(3); n > 0; n--) {
    switch (random(8)) {
      case 0:
        method = pick(METHODS, random);
        hows.push(`method ${method}`);
        break;
      case 1: {
        const at = 3 + random(Math.max(1, segments.length - 3)); // after /api/v1
        segments = [...segments];
        const how = random(4);
        if (how === 0) segments.splice(at, 0, pick(PATH_IDS, random));
        else if (how === 1) segments.splice(at, 1);
        else segments[at] = pick(PATH_IDS, random);
        hows.push(`path ${segments.join('/').slice(0, 60)}`);
        break;
      }
      case 2:
        query.push([
          pick(['bogus', 'force', 'tail', 'after', 'token', 'reference', '', '%00'], random),
          pick(QUERY_VALUES, random),
        ]);
        hows.push(`query ${query.at(-1)![0]}=${query.at(-1)![1].slice(0, 20)}`);
        break;
      case 3:
        if (query.length) {
          const at = random(query.length);
          query[at] = [query[at]![0], pick(QUERY_VALUES, random)];
          hows.push(`query ${query[at]![0]}=${query[at]![1].slice(0, 20)}`);
        } else hows.push('no query to change');
        break;
      case 4:
      case 5: {
        const mutated = mutateValue(body ?? {}, random);
        body = mutated.value;
        hows.push(`body ${mutated.how}`);
        break;
      }
      case 6: {
        const mutated = mutateBytes(raw ?? Buffer.from(JSON.stringify(body ?? {})), random);
        raw = mutated.body;
        hows.push(mutated.how);
        break;
      }
      default:
        if (random(100) === 0) {
          raw = Buffer.alloc((1 << 20) + 1, 0x20); // over the 1 MiB limit, drained and refused
          hows.push('a body over 1 MiB');
        } else {
          body = undefined;
          raw = null;
          hows.push('no body');
        }
    }
  }
  const bytes = onlyLoopback(raw ?? (body === undefined ? null : Buffer.from(JSON.stringify(body))));
  return {
    method,
    path: segments.join('/') + encodeQuery(query),
    body: bytes,
    how: `${seed.operation} (${seed.method} ${seed.path}): ${hows.join(', ')}`,
  };
}
