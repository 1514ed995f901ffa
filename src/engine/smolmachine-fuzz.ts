// A mutation fuzzer for the .smolmachine reader (docs/smolmachine.md, "Fuzzing"), run by `npm run fuzz -- --target
// machine` and, bounded, by src/engine/smolmachine-fuzz.test.ts. It starts from real packed files and makes mutants
// that get past the checks an attacker can satisfy (the whole file's sha256 made right again, the footer's offsets
// kept, a manifest changed as JSON and sealed), then reads each as the engine would before anything reaches a store
// (openMachine, the state and memory headers, every file unpacked). The property: a mutant is refused with an Error
// that says what is wrong, or it unpacks to exactly the files the original does. A TypeError, RangeError or any other
// exception type, a message with NaN or [object in it, or different files are findings.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../package-root.js';
import { openMachine } from './smolmachine-file.js';
import { FOOTER_BYTES, MACHINE_FORMAT } from './smolmachine-format.js';

/** A deterministic PRNG (xorshift32): the same seed makes the same mutants. */
export function prng(seed: number): (n: number) => number {
  let x = seed >>> 0 || 1;
  return (n: number) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return n <= 1 ? 0 : x % n;
  };
}

/** Where the fuzzers keep an input that broke a property (with the libFuzzer targets' crashes). */
const FINDINGS = path.join(packageRoot, 'native', 'out', 'fuzz', 'crashes');

/** Keeps a fuzzer's finding as `name` in native/out/fuzz/crashes/ and returns its path, for the failure to name. */
export function keepFinding(name: string, data: Buffer | string): string {
  mkdirSync(FINDINGS, { recursive: true });
  const kept = path.join(FINDINGS, name);
  writeFileSync(kept, data);
  return kept;
}

function seal(body: Buffer): Buffer {
  return Buffer.concat([body, createHash('sha256').update(body).digest()]);
}

/** `head` (everything before the manifest), then `text` as the manifest, with a footer whose digest is right. */
function sealed(head: Buffer, text: Buffer): Buffer {
  const fields = Buffer.alloc(16);
  fields.writeBigUInt64LE(BigInt(head.length), 0);
  fields.writeBigUInt64LE(BigInt(text.length), 8);
  return seal(Buffer.concat([head, text, fields]));
}

/** The file's manifest offset and text, as its footer gives them (the seed's are right). */
function split(file: Buffer): { offset: number; text: Buffer } {
  const footer = file.subarray(file.length - FOOTER_BYTES);
  const offset = Number(footer.readBigUInt64LE(0));
  const length = Number(footer.readBigUInt64LE(8));
  return { offset, text: file.subarray(offset, offset + length) };
}

/** Values that sit on the edges the reader's checks must hold at. */
const EDGES = [0, 1, -1, 4095, 4096, 4097, 2 ** 31, 2 ** 32, 2 ** 40, 2 ** 53, 1.5, null, '', 'x', true, [], {}];

/** Every path to a leaf of `value` (a number, string, boolean or null), for changing one field of the manifest. */
function leaves(value: unknown, at: Array<string | number> = [], out: Array<Array<string | number>> = []) {
  if (value !== null && typeof value === 'object') {
    for (const [key, child] of Object.entries(value))
      leaves(child, [...at, Array.isArray(value) ? Number(key) : key], out);
  } else out.push(at);
  return out;
}

function setAt(root: unknown, at: Array<string | number>, value: unknown): void {
  let node = root as Record<string | number, unknown>;
  for (const key of at.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  const last = at[at.length - 1]!;
  if (value === undefined) delete node[last];
  else node[last] = value;
}

/** One mutant of `file` and how it was made. */
export function mutate(file: Buffer, random: (n: number) => number): { bytes: Buffer; how: string } {
  const { offset, text } = split(file);
  const body = file.subarray(0, file.length - 32);
  const head = file.subarray(0, offset);
  switch (random(10)) {
    case 0: {
      const bytes = Buffer.from(file);
      const at = random(bytes.length);
      bytes[at]! ^= 1 << random(8);
      return { bytes, how: `bit flipped at ${at}` };
    }
    case 1: {
      const length = random(file.length);
      return { bytes: file.subarray(0, length), how: `truncated to ${length}` };
    }
    case 2: {
      // In the header or the chunks, the digest made right: only the reader's own checks can catch it.
      const bytes = Buffer.from(body);
      const at = random(offset);
      bytes[at] = random(4) === 0 ? random(256) : bytes[at]! ^ (1 << random(8));
      return { bytes: seal(bytes), how: `byte ${at} before the manifest changed, resealed` };
    }
    case 3: {
      // A run of the chunks copied over another place of them (frames spliced), resealed.
      const bytes = Buffer.from(body);
      const from = random(offset);
      const to = random(offset);
      const length = random(Math.min(4096, offset - Math.max(from, to)) + 1);
      bytes.copy(bytes, to, from, from + length);
      return { bytes: seal(bytes), how: `${length} bytes at ${from} copied to ${to}, resealed` };
    }
    case 4: {
      // A byte of the manifest's text changed (mostly breaking it as JSON), sealed.
      const changed = Buffer.from(text);
      const at = random(changed.length);
      changed[at] = random(2) ? '0123456789'.charCodeAt(random(10)) : changed[at]! ^ (1 << random(7));
      return { bytes: sealed(head, changed), how: `manifest byte ${at} changed, sealed` };
    }
    case 5:
    case 6:
    case 7: {
      // One field of the manifest set to an edge value, or a number nudged by one, or removed; sealed.
      const manifest = JSON.parse(text.toString()) as unknown;
      // The CPU's flags are most of the leaves; the fields the reader relies on are picked nine times in ten.
      const all = leaves(manifest);
      const structural = all.filter((p) => p[0] !== 'cpu' && p[0] !== 'made');
      const paths = random(10) ? structural : all;
      const at = paths[random(paths.length)]!;
      const old = at.reduce<unknown>((node, key) => (node as Record<string | number, unknown>)[key], manifest);
      const pick = random(5);
      const nudge = [1, -1, 4096, -4096][random(4)]!;
      const value =
        pick === 0 ? undefined : typeof old === 'number' && pick <= 2 ? old + nudge : EDGES[random(EDGES.length)];
      setAt(manifest, at, value);
      const how = `manifest ${at.join('.')}: ${JSON.stringify(old)} -> ${value === undefined ? 'removed' : JSON.stringify(value)}`;
      return { bytes: sealed(head, Buffer.from(JSON.stringify(manifest))), how: `${how}, sealed` };
    }
    case 8: {
      // Two entries of one of the manifest's arrays swapped, or one duplicated; sealed.
      const manifest = JSON.parse(text.toString()) as Record<string, unknown>;
      const arrays: unknown[][] = [];
      const walk = (value: unknown) => {
        if (Array.isArray(value)) arrays.push(value);
        if (value !== null && typeof value === 'object') Object.values(value).forEach(walk);
      };
      walk(manifest);
      const list = arrays.filter((a) => a.length > 0)[random(arrays.length)] ?? (manifest.chunks as unknown[]);
      const i = random(list.length);
      const j = random(list.length);
      if (random(2)) [list[i], list[j]] = [list[j], list[i]];
      else list.splice(j, 0, structuredClone(list[i]));
      return {
        bytes: sealed(head, Buffer.from(JSON.stringify(manifest))),
        how: `a manifest array's entries ${i}, ${j} moved, sealed`,
      };
    }
    default: {
      // The header's fields: another format version, header size, or bytes in its zero area; resealed.
      const bytes = Buffer.from(body);
      const field = random(3);
      if (field === 0) bytes.writeUInt32LE([0, 1, MACHINE_FORMAT + 1, 2 ** 32 - 1][random(4)]!, 8);
      else if (field === 1) bytes.writeUInt32LE([0, 63, 65, 4096][random(4)]!, 12);
      else bytes[16 + random(48)] = 1 + random(255);
      return { bytes: seal(bytes), how: `header field ${field} changed, resealed` };
    }
  }
}

/** Every file a machine unpacks to, by name, as sha256s; what the engine reads before anything reaches a store. */
export async function unpackDigests(file: string, scratch: string): Promise<string[]> {
  const out = mkdtempSync(path.join(scratch, 'out-'));
  try {
    const m = await openMachine(file);
    try {
      await m.checkSnapshotHeaders();
      const files = [
        ...m.manifest.snapshots.flatMap((s) => [
          [`${s.manifest.id}.state`, s.state] as const,
          [`${s.manifest.id}.memory`, s.memory] as const,
        ]),
        ...m.manifest.boot.map((b) => [`boot.${b.role}`, b.file] as const),
        ...(m.manifest.disks ?? []).map((d) => [`disk.${d.kind}`, d.file] as const),
      ];
      const digests: string[] = [];
      for (const [name, packed] of files) {
        const dest = path.join(out, String(digests.length));
        await m.extractFile(packed, dest, name);
        digests.push(`${name} ${createHash('sha256').update(readFileSync(dest)).digest('hex')}`);
      }
      return digests.sort(); // ids and names may differ without harm; the contents may not
    } finally {
      await m.close();
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

export type Outcome = { kind: 'refused'; message: string } | { kind: 'identical' } | { kind: 'finding'; why: string };

/** Reads `bytes` as a .smolmachine and judges the result against the original's files. */
export async function judge(bytes: Buffer, original: string[], scratch: string): Promise<Outcome> {
  const file = path.join(scratch, 'mutant.smolmachine');
  writeFileSync(file, bytes);
  let digests: string[];
  try {
    digests = await unpackDigests(file, scratch);
  } catch (error) {
    if (!(error instanceof Error) || error.constructor !== Error) {
      const type = error instanceof Error ? error.constructor.name : typeof error;
      return { kind: 'finding', why: `threw a ${type}: ${(error as Error)?.stack ?? String(error)}` };
    }
    if (error.message.length < 10 || /NaN|\[object|at Object\./.test(error.message)) {
      return { kind: 'finding', why: `refused without saying what is wrong: ${error.message}` };
    }
    return { kind: 'refused', message: error.message };
  }
  if (JSON.stringify(digests) !== JSON.stringify(original)) {
    return {
      kind: 'finding',
      why: `accepted, but unpacks to other files:\n${digests.join('\n')}\nnot\n${original.join('\n')}`,
    };
  }
  return { kind: 'identical' };
}
