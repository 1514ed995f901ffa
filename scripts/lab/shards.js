// The Linux guest tests are split over the KVM lab's shards (scripts/test.js runs them at once, each lab VM with its
// own 30-minute timeout) by how long each file takes, not by vitest's default (files sorted by a hash of their path,
// cut into equal counts): on 2026-12-03 that put smolmachine, agent, root-disk, volumes-oci and engine, about 1,800 s
// of lab time, in shard 1 and 1,434 s in shard 2, and shard 1 timed out. The seconds per file are measured ones
// (tests/linux/lab-seconds.json); vitest.config.ts's sequencer calls balanceShards when a run is sharded.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const labSecondsFile = path.join(root, 'tests', 'linux', 'lab-seconds.json');

/**
 * The seconds of lab work scripts/test.js runs after the last shard's files, in a lab of its own (the Python SDK's
 * agent tests): the last shard gets that much less of the files, so that both end about together.
 */
export function labAfterLastShard(file = labSecondsFile) {
  const after = JSON.parse(fs.readFileSync(file, 'utf8')).afterLastShard?.seconds ?? 0;
  if (typeof after !== 'number' || after < 0)
    throw new Error(`${file}: afterLastShard.seconds is not a number of seconds`);
  return after;
}

/** The measured seconds per test file, by path relative to the checkout ("tests/linux/boot.test.ts"). */
export function labSeconds(file = labSecondsFile) {
  const table = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (!table || typeof table.seconds !== 'object') throw new Error(`${file}: no "seconds" object`);
  return table.seconds;
}

/**
 * Splits `files` (paths relative to the checkout) into `count` shards of nearly equal measured time: the longest
 * file first, each into the shard with the least time so far (ties: the lower shard). A file without a figure
 * counts as the median of the others. `afterLast` seconds of other work follow the last shard (labAfterLastShard):
 * it starts with them. The same input always gives the same shards, on every machine and in every shard's own
 * process, which is what makes each file run in exactly one shard.
 */
export function balanceShards(files, count, seconds, afterLast = 0) {
  if (!Number.isInteger(count) || count < 1) throw new Error(`shard count must be a positive integer, not ${count}`);
  const known = files
    .map((f) => seconds[f])
    .filter((s) => typeof s === 'number')
    .sort((a, b) => a - b);
  const fallback = known.length ? known[Math.floor(known.length / 2)] : 1;
  const weighed = [...new Set(files)]
    .map((file) => ({ file, weight: typeof seconds[file] === 'number' ? seconds[file] : fallback }))
    .sort((a, b) => b.weight - a.weight || (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
  const shards = Array.from({ length: count }, () => ({ files: [], seconds: 0 }));
  if (count > 1) shards[count - 1].seconds = afterLast;
  for (const { file, weight } of weighed) {
    let least = shards[0];
    for (const shard of shards) if (shard.seconds < least.seconds) least = shard;
    least.files.push(file);
    least.seconds += weight;
  }
  return shards;
}

/**
 * The seconds per Linux test file in vitest JSON reports (`--reporter=json`, what scripts/test.js writes into
 * test-results/), by path from the checkout: reports name files by absolute path, in whichever clone ran them.
 */
export function secondsFromReports(reports) {
  const seconds = {};
  for (const report of reports) {
    for (const result of report.testResults ?? []) {
      const file = /(?:^|\/)(tests\/linux\/[^/]+\.test\.ts)$/.exec(String(result.name ?? ''))?.[1];
      if (!file || typeof result.startTime !== 'number' || typeof result.endTime !== 'number') continue;
      seconds[file] = Math.round((result.endTime - result.startTime) / 1000);
    }
  }
  return seconds;
}

// `node scripts/lab/shards.js --update REPORT.json...`: writes the reports' figures into lab-seconds.json (files
// the reports do not have keep theirs); with no arguments, prints the shards of the Linux tests for 2 and 3 labs.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [flag, ...reports] = process.argv.slice(2);
  if (flag === '--update') {
    if (!reports.length) {
      console.error('usage: node scripts/lab/shards.js --update test-results/vitest-linux-*.json');
      process.exit(64);
    }
    const table = JSON.parse(fs.readFileSync(labSecondsFile, 'utf8'));
    const found = secondsFromReports(reports.map((r) => JSON.parse(fs.readFileSync(r, 'utf8'))));
    const merged = Object.entries({ ...table.seconds, ...found }).sort(([a], [b]) => (a < b ? -1 : 1));
    table.seconds = Object.fromEntries(merged);
    fs.writeFileSync(labSecondsFile, `${JSON.stringify(table, null, 2)}\n`);
    console.log(`${labSecondsFile}: ${Object.keys(found).length} files updated`);
  } else if (flag === undefined) {
    const files = fs
      .readdirSync(path.join(root, 'tests', 'linux'))
      .filter((name) => name.endsWith('.test.ts'))
      .map((name) => `tests/linux/${name}`);
    for (const count of [2, 3]) {
      balanceShards(files, count, labSeconds(), labAfterLastShard()).forEach((shard, i) =>
        console.log(`${i + 1}/${count}: ${shard.seconds} s: ${shard.files.join(' ')}`),
      );
    }
  } else {
    console.error(`unknown option ${flag}; usage: node scripts/lab/shards.js [--update REPORT.json...]`);
    process.exit(64);
  }
}
