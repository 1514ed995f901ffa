// zstd for .smolmachine chunks (docs/smolmachine.md, "Compression"): frames made by the zstd program come back
// through the in-process decoder exactly, and a frame that does not give the size asked for is answered as the zstd
// program answers it (fewer bytes returned for the caller to refuse; more, or damage, refused with what is wrong).
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ZSTDDecoder } from 'zstddec';
import { zstdCompress, zstdDecompress } from './zstd.js';

/** A 4 MiB chunk like a guest's memory: text, random bytes and zero pages. */
function chunk(): Buffer {
  const data = Buffer.alloc(4 << 20);
  for (let at = 0; at < data.length; at += 64 << 10) {
    if ((at >> 16) % 3 === 0) randomBytes(4096).copy(data, at);
    else if ((at >> 16) % 3 === 1) data.write(`page ${at} `.repeat(400), at);
  }
  return data;
}

describe('zstd', () => {
  it('decompresses what the zstd program compressed, in this process', async () => {
    const raw = chunk();
    const stored = await zstdCompress(raw);
    expect(stored.length).toBeLessThan(raw.length / 2);
    expect((await zstdDecompress(stored, raw.length, 'chunk 0')).equals(raw)).toBe(true);
    // The decoder in this process gives the same bytes itself (not only through the program's fallback).
    const decoder = new ZSTDDecoder();
    await decoder.init();
    expect(Buffer.from(decoder.decode(stored, raw.length)).equals(raw)).toBe(true);
  });

  it('returns fewer bytes when the frames hold fewer than asked', async () => {
    const raw = randomBytes(10_000);
    const out = await zstdDecompress(await zstdCompress(raw), raw.length + 100, 'chunk 3');
    expect(out.equals(raw)).toBe(true);
  });

  it('refuses frames that inflate past the size asked, and damaged ones, saying what is wrong', async () => {
    const raw = Buffer.alloc(1 << 20, 7);
    const stored = await zstdCompress(raw);
    await expect(zstdDecompress(stored, raw.length - 1, 'chunk 5 (x memory)')).rejects.toThrow(
      `chunk 5 (x memory) decompresses to more than the ${raw.length - 1} bytes its manifest gives`,
    );
    const damaged = Buffer.from(stored);
    damaged[0]! ^= 0xff; // the frame's magic
    await expect(zstdDecompress(damaged, raw.length, 'chunk 6 (y state)')).rejects.toThrow(
      /^chunk 6 \(y state\): zstd failed: .+/,
    );
    await expect(zstdDecompress(Buffer.from('not zstd at all'), 100, 'chunk 7')).rejects.toThrow(
      /^chunk 7: zstd failed/,
    );
  });
});
