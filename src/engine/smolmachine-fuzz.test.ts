// The .smolmachine reader under mutation (smolmachine-fuzz.ts; docs/smolmachine.md, "Fuzzing"). In `npm test` it
// replays the findings kept in tests/fixtures/smolmachine-findings/ and runs 100 mutants of a real packed file
// (tests/fixtures/counter.smolmachine: a counting guest, a two-layer memory chain and its kernel) from a fixed seed;
// `npm run fuzz -- --target machine --seconds N` runs it for N seconds from a fresh seed (SMOL_FUZZ_SECONDS,
// SMOL_FUZZ_SEED) and keeps a mutant that breaks the property in native/out/fuzz/crashes/.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { judge, keepFinding, mutate, prng, unpackDigests } from './smolmachine-fuzz.js';

const root = path.resolve(import.meta.dirname, '../..');
const seedFile = path.join(root, 'tests', 'fixtures', 'counter.smolmachine');
const findings = path.join(root, 'tests', 'fixtures', 'smolmachine-findings');
const scratch = mkdtempSync(path.join(tmpdir(), 'smol-machine-fuzz-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const seconds = Number(process.env.SMOL_FUZZ_SECONDS ?? 0);
// A count of mutants (SMOL_FUZZ_RUNS, `npm run fuzz -- --executions N`) takes as long as it takes.
const timeout = seconds ? (seconds + 120) * 1000 : process.env.SMOL_FUZZ_RUNS ? 24 * 3600_000 : 120_000;
const seed = Number(process.env.SMOL_FUZZ_SEED ?? (seconds || process.env.SMOL_FUZZ_RUNS ? Date.now() % 2 ** 31 : 20));

describe('the .smolmachine reader under mutation', { timeout }, () => {
  it('unpacks the seed, a real packed counting guest, to its files', async () => {
    const digests = await unpackDigests(seedFile, scratch);
    // The kernel, and the state and memory of two snapshots (a full layer and a diff over it).
    const names = digests.map((d) => d.split(' ')[0]!.replace(/^sn-\w+/, 'sn'));
    expect(names.sort()).toEqual(['boot.kernel', 'sn.memory', 'sn.memory', 'sn.state', 'sn.state']);
  });

  it('refuses every kept finding with a message, or unpacks it to the same files', async () => {
    const original = await unpackDigests(seedFile, scratch);
    const kept = existsSync(findings) ? readdirSync(findings).filter((f) => f.endsWith('.smolmachine')) : [];
    for (const name of kept) {
      const outcome = await judge(readFileSync(path.join(findings, name)), original, scratch);
      expect(outcome.kind === 'finding' ? `${name}: ${outcome.why}` : 'ok', name).toBe('ok');
    }
  });

  it(`mutants are refused with what is wrong, or unpack to exactly the original files (seed ${seed})`, async () => {
    const file = readFileSync(seedFile);
    const original = await unpackDigests(seedFile, scratch);
    const random = prng(seed);
    const until = Date.now() + seconds * 1000;
    const messages = new Set<string>();
    let runs = 0;
    let refused = 0;
    const wanted = Number(process.env.SMOL_FUZZ_RUNS ?? (seconds ? Infinity : 100));
    for (; runs < wanted && (!seconds || Date.now() < until); runs++) {
      const { bytes, how } = mutate(file, random);
      const outcome = await judge(bytes, original, scratch);
      if (outcome.kind === 'finding') {
        const kept = keepFinding(
          `machine-${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}.smolmachine`,
          bytes,
        );
        expect.fail(
          `mutant ${runs} (${how}) broke the property, kept as ${kept} (move it into ` +
            `tests/fixtures/smolmachine-findings/ with the fix): ${outcome.why}`,
        );
      }
      if (outcome.kind === 'refused') {
        refused++;
        // The kinds of refusal seen: numbers and paths taken out, so the count says how many checks were reached.
        messages.add(outcome.message.replace(/\/\S+/g, 'F').replace(/\d+/g, 'N'));
      }
    }
    process.stdout.write(
      `fuzz machine: ${runs} mutants from seed ${seed}: ${refused} refused (${messages.size} kinds of message), ` +
        `${runs - refused} unpacked to the original files\n`,
    );
    expect(refused).toBeGreaterThan(runs / 3);
    expect(messages.size).toBeGreaterThan(15);
  });
});
