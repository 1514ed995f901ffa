// Packing a sparse file reads only where it has data (src/engine/file-extents.ts, SEEK_DATA/SEEK_HOLE through the
// native addon) and must give exactly what reading every byte gives: the same pieces at the same offsets, the same
// chunks. Each file is written twice, once with holes and once with its zeros written out (no holes, so the
// whole file is one extent and every page is read), and both are packed.
import { mkdtempSync, openSync, closeSync, rmSync, writeSync, ftruncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { dataExtents } from './file-extents.js';
import { createMachine } from './smolmachine-file.js';
import { PAGE } from './smolmachine-format.js';

const dir = mkdtempSync(path.join(tmpdir(), 'smol-sparse-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MiB = 1 << 20;
const filled = (length: number, seed: number) => Buffer.alloc(length, seed);

/** The file's data pieces as [offset, bytes]; `dense` writes the zeros between them too. */
function writeFile(name: string, size: number, pieces: Array<[number, Buffer]>, dense: boolean): string {
  const file = path.join(dir, `${name}${dense ? '-dense' : ''}`);
  const fd = openSync(file, 'w');
  if (dense) {
    for (let at = 0; at < size; at += 4 * MiB)
      writeSync(fd, Buffer.alloc(Math.min(4 * MiB, size - at)), 0, undefined, at);
  } else ftruncateSync(fd, size);
  for (const [at, data] of pieces) writeSync(fd, data, 0, data.length, at);
  closeSync(fd);
  return file;
}

async function pack(file: string) {
  const writer = await createMachine(path.join(dir, `${path.basename(file)}.smolmachine`), 0);
  try {
    return await writer.addFile(file);
  } finally {
    await writer.abort();
  }
}

describe('packing a sparse file', () => {
  const cases: Array<{ name: string; size: number; pieces: Array<[number, Buffer]> }> = [
    // Data at 0, a hole shorter than the merge gap (the runs join), a long hole, data ending inside a page.
    {
      name: 'scattered',
      size: 64 * MiB,
      pieces: [
        [0, filled(PAGE, 1)],
        [9 * PAGE, filled(3 * PAGE, 2)],
        [40 * MiB + 123, filled(5000, 3)],
        [64 * MiB - PAGE, filled(100, 4)],
      ],
    },
    // A zero page written inside the data (no hole, read and left out as zeros are) and a size not a page multiple.
    {
      name: 'zeros-in-data',
      size: 8 * MiB + 777,
      pieces: [
        [2 * MiB, Buffer.concat([filled(PAGE, 5), Buffer.alloc(PAGE), filled(PAGE, 6)])],
        [8 * MiB, filled(777, 7)],
      ],
    },
    { name: 'all-holes', size: 16 * MiB, pieces: [] },
    // A run longer than a chunk, across a hole of one page.
    {
      name: 'long-run',
      size: 24 * MiB,
      pieces: [
        [MiB, filled(9 * MiB, 8)],
        [10 * MiB + PAGE, filled(2 * MiB, 9)],
      ],
    },
  ];

  for (const { name, size, pieces } of cases) {
    it(`gives the same pieces as reading every byte: ${name}`, async () => {
      const sparse = writeFile(name, size, pieces, false);
      const dense = writeFile(name, size, pieces, true);
      const [a, b] = [await pack(sparse), await pack(dense)];
      expect(a.size).toBe(size);
      expect(a.pieces.map((p) => p.at)).toEqual(b.pieces.map((p) => p.at));
      expect(a.layout).toBe(b.layout); // sizes and sha256 of every piece
      expect(a.pieces.length > 0).toBe(pieces.length > 0);
    });
  }

  it('finds the data of a sparse file by page, and reads a file with its zeros written as one extent', async () => {
    const file = writeFile(
      'extents',
      64 * MiB,
      [
        [PAGE + 10, filled(20, 1)],
        [40 * MiB, filled(2 * PAGE, 2)],
      ],
      false,
    );
    const { size, extents } = await dataExtents(file, PAGE);
    expect(size).toBe(64 * MiB);
    // ext4 and tmpfs keep data by block (4 KiB): the file system may round, never to the whole 64 MiB.
    expect(extents.length).toBe(2);
    expect(extents[0]![0]).toBeLessThanOrEqual(PAGE);
    expect(extents[0]![1]).toBeGreaterThanOrEqual(2 * PAGE);
    expect(extents[1]![0]).toBeLessThanOrEqual(40 * MiB);
    expect(extents[1]![1]).toBeGreaterThanOrEqual(40 * MiB + 2 * PAGE);
    expect(extents[1]![1]).toBeLessThan(64 * MiB);
    for (const [from, to] of extents) expect([from % PAGE, to % PAGE]).toEqual([0, 0]);
    const dense = writeFile('extents', 8 * MiB, [], true);
    expect((await dataExtents(dense, PAGE)).extents).toEqual([[0, 8 * MiB]]);
    await expect(dataExtents(path.join(dir, 'missing'), PAGE)).rejects.toThrow(/cannot open .*missing: No such file/);
  });
});
