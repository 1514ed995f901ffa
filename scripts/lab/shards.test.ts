// The Linux guest tests' split over the lab's shards (scripts/lab/shards.js, docs/lab.md "Shards"): every file in
// exactly one shard, the same split in every shard's process, by measured time, and a figure for every test file.
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module without types
import { balanceShards, labAfterLastShard, labSeconds, secondsFromReports } from './shards.js';

type Shard = { files: string[]; seconds: number };
const split = (files: string[], count: number, seconds: Record<string, number>, afterLast = 0): Shard[] =>
  balanceShards(files, count, seconds, afterLast);

describe('balanceShards', () => {
  it('puts every file in exactly one shard, longest first into the emptiest', () => {
    const seconds = { a: 600, b: 300, c: 250, d: 240, e: 220, f: 30, g: 20 };
    const shards = split(Object.keys(seconds), 2, seconds);
    expect(shards.map((s) => s.files)).toEqual([
      ['a', 'e', 'g'],
      ['b', 'c', 'd', 'f'],
    ]);
    expect(shards.map((s) => s.seconds)).toEqual([840, 820]); // vitest's equal counts: 4 files and 3
    expect(shards.flatMap((s) => s.files).sort()).toEqual(Object.keys(seconds));
  });

  it('gives the same shards whatever order the files come in', () => {
    const seconds = { a: 5, b: 5, c: 5, d: 5, e: 1 };
    const one = split(['a', 'b', 'c', 'd', 'e'], 3, seconds);
    const other = split(['e', 'd', 'c', 'b', 'a'], 3, seconds);
    expect(other).toEqual(one);
    expect(one.map((s) => s.files)).toEqual([['a', 'd'], ['b', 'e'], ['c']]);
  });

  it('counts a file without a figure as the median of the others', () => {
    const shards = split(['new', 'x', 'y', 'z'], 2, { x: 10, y: 40, z: 100 });
    expect(shards.find((s) => s.files.includes('new'))!.files).toEqual(['new', 'y', 'x']); // new counts 40, as y
    expect(shards.map((s) => s.seconds).sort((a, b) => a - b)).toEqual([90, 100]);
  });

  it('gives the last shard less when other work follows it', () => {
    const seconds = { a: 600, b: 300, c: 250, d: 240, e: 220, f: 30, g: 20 };
    const shards = split(Object.keys(seconds), 2, seconds, 250);
    expect(shards.map((s) => s.files)).toEqual([
      ['a', 'd', 'f', 'g'],
      ['b', 'c', 'e'],
    ]);
    expect(shards.map((s) => s.seconds)).toEqual([890, 1020]); // the second's 770 s of files and the 250 after them
    expect(split(['a', 'b'], 1, seconds, 250)[0]!.seconds).toBe(900); // one shard: nothing to even out
  });

  it('leaves shards empty when there are fewer files than shards, and refuses a count that is not one', () => {
    expect(split(['a'], 3, { a: 1 }).map((s) => s.files)).toEqual([['a'], [], []]);
    expect(() => split(['a'], 0, {})).toThrow('shard count must be a positive integer, not 0');
  });
});

describe('the measured table', () => {
  const linux = path.join(__dirname, '..', '..', 'tests', 'linux');
  const files = readdirSync(linux)
    .filter((name) => name.endsWith('.test.ts'))
    .map((name) => `tests/linux/${name}`);
  const seconds: Record<string, number> = labSeconds();
  const afterLast: number = labAfterLastShard();

  it('has a figure for every Linux test file and none for a file that is gone', () => {
    const missing = files.filter((f) => typeof seconds[f] !== 'number');
    const gone = Object.keys(seconds).filter((f) => !files.includes(f));
    expect(missing, 'add their lab seconds to tests/linux/lab-seconds.json').toEqual([]);
    expect(gone, 'remove them from tests/linux/lab-seconds.json').toEqual([]);
  });

  it('splits the Linux tests and the work after them over two labs within a tenth of each other', () => {
    expect(afterLast).toBeGreaterThan(0);
    const [one, two] = split(files, 2, seconds, afterLast);
    expect(one!.files.length + two!.files.length).toBe(files.length);
    expect(Math.abs(one!.seconds - two!.seconds)).toBeLessThan((one!.seconds + two!.seconds) / 10);
  });
});

describe('secondsFromReports', () => {
  it('reads the Linux files of vitest JSON reports from any clone, in whole seconds', () => {
    const reports = [
      {
        testResults: [
          { name: '/work/ci-clone/tests/linux/boot.test.ts', startTime: 1000, endTime: 65_400 },
          { name: '/elsewhere/src/engine/zstd.test.ts', startTime: 0, endTime: 5000 },
          { name: '/work/ci-clone/tests/linux/cp.test.ts', startTime: 0 },
        ],
      },
      { testResults: [{ name: '/x/tests/linux/vsock.test.ts', startTime: 0, endTime: 20_600 }] },
    ];
    expect(secondsFromReports(reports)).toEqual({ 'tests/linux/boot.test.ts': 64, 'tests/linux/vsock.test.ts': 21 });
  });
});
