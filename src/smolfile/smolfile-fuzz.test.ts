// The Smolfile parser under mutation (docs/fuzzing.md, "The Smolfile parser"): every Smolfile in smolfiles/ is mutated line by
// line and token by token (keys dropped, repeated and moved, values swapped for hostile ones, bytes inserted, the
// text cut short) and parsed. The property: parseSmolfile never throws; it returns a Smolfile exactly when no problem
// is an error; every problem is a sentence at a line and column inside the text. In `npm test` 3,000 mutants from a
// fixed seed; `npm run fuzz -- --target smolfile --seconds N` (or `--executions N`) runs it from a fresh seed
// (SMOL_FUZZ_SECONDS, SMOL_FUZZ_RUNS, SMOL_FUZZ_SEED) and keeps a mutant that breaks the property in
// native/out/fuzz/crashes/.
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { keepFinding, prng } from '../engine/smolmachine-fuzz.js';
import { parseSmolfile } from './smolfile.js';

const root = path.resolve(import.meta.dirname, '../..');
const seeds = readdirSync(path.join(root, 'smolfiles'))
  .filter((name) => name.endsWith('.smolfile'))
  .map((name) => ({ name, text: readFileSync(path.join(root, 'smolfiles', name), 'utf8') }));

const seconds = Number(process.env.SMOL_FUZZ_SECONDS ?? 0);
// A count of mutants (SMOL_FUZZ_RUNS, `npm run fuzz -- --executions N`) takes as long as it takes.
const timeout = seconds ? (seconds + 120) * 1000 : process.env.SMOL_FUZZ_RUNS ? 24 * 3600_000 : 120_000;
const runsWanted = Number(process.env.SMOL_FUZZ_RUNS ?? (seconds ? Infinity : 3000));
const seed = Number(process.env.SMOL_FUZZ_SEED ?? (seconds || process.env.SMOL_FUZZ_RUNS ? Date.now() % 2 ** 31 : 32));

/** Values a hostile or careless author writes. */
const VALUES = [
  '-1',
  '0',
  '1e309',
  '-0',
  'inf',
  'nan',
  '4294967297',
  '9007199254740993',
  '0x7fffffff',
  '1_000',
  'true',
  '""',
  '"\\u0000"',
  '"../../etc/shadow"',
  '"/dev/kvm"',
  `"${'a'.repeat(5000)}"`,
  '[]',
  '[[]]',
  '{}',
  '{ a = 1 }',
  '[1, "two"]',
  '"5m"',
  '"-5m"',
  '"999999999h"',
  '"0s"',
  '"x"',
  '1979-05-27T07:32:00Z',
  "'''\n'''",
  '"\\ud800"',
  '[' + '"x",'.repeat(300) + ']',
  '"80:80"',
  '"70000:1"',
  '"tcp/80"',
  '"builtin"',
  '"docker://x"',
  '3.5',
];
const KEYS = [
  'image',
  'kernel',
  'initrd',
  'cpus',
  'memory',
  'env',
  'workdir',
  'init',
  'net',
  'ports',
  'cmdline',
  'user',
  '[snapshots]',
  'auto_checkpoint',
  'keep',
  '[[volumes]]',
  'host',
  'guest',
  'read_only',
  '[network]',
  '[health]',
  'interval',
  'command',
  '[disks]',
  'size',
  '[labels]',
  'unknown_key',
  'cpus.x',
  '"quoted key"',
];

function mutate(text: string, random: (n: number) => number): { text: string; how: string } {
  const lines = text.split('\n');
  const at = random(lines.length);
  const pick = <T>(list: readonly T[]) => list[random(list.length)]!;
  switch (random(9)) {
    case 0:
      lines.splice(at, 1);
      return { text: lines.join('\n'), how: `line ${at + 1} removed` };
    case 1:
      lines.splice(at, 0, lines[random(lines.length)]!);
      return { text: lines.join('\n'), how: `a line repeated at ${at + 1}` };
    case 2: {
      const other = random(lines.length);
      [lines[at], lines[other]] = [lines[other]!, lines[at]!];
      return { text: lines.join('\n'), how: `lines ${at + 1} and ${other + 1} swapped` };
    }
    case 3: {
      const value = pick(VALUES);
      lines[at] = lines[at]!.includes('=') ? lines[at]!.replace(/=.*$/, `= ${value}`) : `${pick(KEYS)} = ${value}`;
      return { text: lines.join('\n'), how: `line ${at + 1} given ${value.slice(0, 20)}` };
    }
    case 4: {
      const key = pick(KEYS);
      lines.splice(at, 0, key.startsWith('[') ? key : `${key} = ${pick(VALUES)}`);
      return { text: lines.join('\n'), how: `${key} inserted at ${at + 1}` };
    }
    case 5: {
      const cut = random(text.length + 1);
      return { text: text.slice(0, cut), how: `cut at ${cut}` };
    }
    case 6: {
      const where = random(text.length + 1);
      const bytes = Array.from({ length: 1 + random(8) }, () => String.fromCharCode(random(128)));
      return { text: text.slice(0, where) + bytes.join('') + text.slice(where), how: `bytes at ${where}` };
    }
    case 7: {
      const where = random(text.length);
      return { text: text.slice(0, where) + text.slice(where + 1 + random(20)), how: `chars deleted at ${where}` };
    }
    default: {
      const count = 2 + random(4);
      let out = text;
      for (let n = 0; n < count; n++) out = mutate(out, random).text;
      return { text: out, how: `${count} mutations` };
    }
  }
}

/** What is wrong with one parse, or null. */
function judge(text: string): string | null {
  let result;
  try {
    result = parseSmolfile(text, { path: '/nonexistent/fuzz/Smolfile', relativeFrom: null });
  } catch (error) {
    return `parseSmolfile threw: ${(error as Error).stack ?? String(error)}`;
  }
  const lineCount = text.split('\n').length;
  const errors = result.problems.filter((p) => p.severity === 'error');
  if ((result.smolfile === null) !== errors.length > 0) {
    return `smolfile is ${result.smolfile ? 'given' : 'null'} with ${errors.length} errors`;
  }
  for (const p of result.problems) {
    if (typeof p.message !== 'string' || p.message.trim().length < 10)
      return `a problem without a sentence: ${p.message}`;
    if (!Number.isInteger(p.line) || p.line < 1 || p.line > lineCount)
      return `a problem at line ${p.line} of ${lineCount}`;
    if (!Number.isInteger(p.column) || p.column < 1) return `a problem at column ${p.column}`;
  }
  return null;
}

describe('the Smolfile parser under mutation', { timeout }, () => {
  it('accepts every seed as it is', () => {
    for (const { name, text } of seeds) expect(judge(text), name).toBeNull();
    expect(seeds.length).toBeGreaterThanOrEqual(5);
  });

  it(`never throws, and names a line for every problem (seed ${seed})`, () => {
    const random = prng(seed);
    const until = seconds ? Date.now() + seconds * 1000 : Infinity;
    const messages = new Set<string>();
    let runs = 0;
    let refused = 0;
    for (; runs < runsWanted && Date.now() < until; runs++) {
      const from = seeds[random(seeds.length)]!;
      const { text, how } = mutate(from.text, random);
      const why = judge(text);
      if (why) {
        const kept = keepFinding(`smolfile-${createHash('sha256').update(text).digest('hex').slice(0, 16)}`, text);
        expect.fail(`mutant ${runs} of ${from.name} (${how}) broke the property, kept as ${kept}: ${why}`);
      }
      const { smolfile, problems } = parseSmolfile(text, { path: '/nonexistent/fuzz/Smolfile', relativeFrom: null });
      if (!smolfile) refused++;
      for (const p of problems) messages.add(p.message.replace(/"[^"]*"/g, 'S').replace(/\d+/g, 'N'));
    }
    process.stdout.write(
      `fuzz smolfile: ${runs} mutants from seed ${seed}: ${refused} refused, ${runs - refused} accepted; ` +
        `${messages.size} kinds of problem message\n`,
    );
    expect(refused).toBeGreaterThan(runs / 4);
    expect(messages.size).toBeGreaterThan(30);
  });
});
