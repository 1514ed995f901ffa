// zstd for .smolmachine chunks (docs/smolmachine.md, "Compression"): the addon's libzstd, the WebAssembly decoder and
// the zstd program read each other's frames exactly, and a frame that does not give the size asked for is answered
// the same way by each (fewer bytes returned for the caller to refuse; more, or damage, refused with what is wrong).
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ZSTDDecoder } from 'zstddec';
import { loadNative } from '../vmm/native.js';
import {
  zstdCompress,
  zstdDecompress,
  zstdDecompressStream,
  zstdProgramCompress,
  zstdProgramDecompress,
} from './zstd.js';

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
    const stored = await zstdProgramCompress(raw);
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

  it('compresses in the addon, off the JavaScript thread, frames the zstd program and the decoder read', async () => {
    const native = loadNative();
    const raw = chunk();
    const stored = await zstdCompress(raw);
    expect(stored.equals(await native.zstdCompress(raw, 3))).toBe(true); // zstdCompress is the addon's here
    expect(stored.length).toBeLessThan(raw.length / 2);
    expect((await zstdProgramDecompress(stored, raw.length, 'chunk 1')).equals(raw)).toBe(true);
    const decoder = new ZSTDDecoder();
    await decoder.init();
    expect(Buffer.from(decoder.decode(stored, raw.length)).equals(raw)).toBe(true);
    // The JavaScript thread stays free while a chunk compresses: a timer fires before the promise settles.
    let ticked = false;
    const timer = new Promise<void>((resolve) => setImmediate(() => resolve(void (ticked = true))));
    const big = native.zstdCompress(Buffer.concat([raw, raw, raw, raw]), 19);
    await timer;
    expect(ticked).toBe(true);
    await big;
    expect(() => native.zstdCompress(raw, 0)).toThrow(/level must be 1 to 19/);
  });

  it('decompresses into a buffer the caller gives, which it reuses, and refuses one too small', async () => {
    const a = chunk();
    const b = randomBytes(1 << 20);
    const into = Buffer.alloc((4 << 20) + 1);
    const first = await zstdDecompress(await zstdProgramCompress(a), a.length, 'chunk 8', into);
    expect(first.buffer).toBe(into.buffer);
    expect(first.equals(a)).toBe(true);
    const second = await zstdDecompress(await zstdCompress(b), b.length, 'chunk 9', into);
    expect(second.buffer).toBe(into.buffer);
    expect(second.equals(b)).toBe(true);
    expect(() => loadNative().zstdDecompress(Buffer.alloc(1), 10, Buffer.alloc(10))).toThrow(/at least size \+ 1/);
    // A frame that inflates past what `into` allows is refused the same way as without it.
    await expect(zstdDecompress(await zstdCompress(a), a.length - 1, 'chunk 10', into)).rejects.toThrow(
      `chunk 10 decompresses to more than the ${a.length - 1} bytes its manifest gives`,
    );
  });

  it('refuses a bomb without making its output: 1 GiB of zeros asked for as 4 MiB', async () => {
    const bomb = await zstdCompress(Buffer.alloc(1 << 30));
    expect(bomb.length).toBeLessThan(64 << 10);
    const rss = process.memoryUsage().rss;
    await expect(zstdDecompress(bomb, 4 << 20, 'chunk 11')).rejects.toThrow(/decompresses to more than the 4194304/);
    expect(process.memoryUsage().rss - rss).toBeLessThan(256 << 20);
  });

  describe('as a stream (OCI layers)', () => {
    /** `bytes` fed in pieces of `piece` bytes. */
    async function* pieces(bytes: Buffer, piece: number) {
      for (let at = 0; at < bytes.length; at += piece) yield bytes.subarray(at, at + piece);
    }
    async function drain(stream: NodeJS.ReadableStream): Promise<Buffer> {
      const out: Buffer[] = [];
      for await (const piece of stream) out.push(piece as Buffer);
      return Buffer.concat(out);
    }

    it('gives back two frames one after the other, fed in small pieces or all at once', async () => {
      const a = chunk().subarray(0, 300_000);
      const b = randomBytes(70_000);
      const both = Buffer.concat([await zstdProgramCompress(a), await zstdCompress(b)]);
      const whole = Buffer.concat([a, b]);
      expect((await drain(zstdDecompressStream(pieces(both, both.length), 'l1')!)).equals(whole)).toBe(true);
      expect((await drain(zstdDecompressStream(pieces(both, 97), 'l2')!)).equals(whole)).toBe(true);
      expect((await drain(zstdDecompressStream(pieces(both, 4093), 'l3')!)).equals(whole)).toBe(true);
    });

    it('reads out a thousandfold inflation a MiB at a time, only as fast as it is read', async () => {
      const zeros = await zstdProgramCompress(Buffer.alloc(256 << 20));
      expect(zeros.length).toBeLessThan(64 << 10);
      const stream = zstdDecompressStream(pieces(zeros, zeros.length), 'l4')!;
      let total = 0;
      let largest = 0;
      const rss = process.memoryUsage().rss;
      let peak = 0;
      for await (const piece of stream) {
        total += (piece as Buffer).length;
        largest = Math.max(largest, (piece as Buffer).length);
        peak = Math.max(peak, process.memoryUsage().rss - rss);
        await new Promise((resolve) => setImmediate(resolve)); // a slow reader
      }
      expect(total).toBe(256 << 20);
      expect(largest).toBeLessThanOrEqual(1 << 20);
      expect(peak).toBeLessThan(128 << 20); // not the 256 MiB at once
    });

    it('names a stream cut short and a damaged one', async () => {
      const stored = await zstdCompress(chunk());
      await expect(
        drain(zstdDecompressStream(pieces(stored.subarray(0, 1000), 100), 'layer sha256:ab')!),
      ).rejects.toThrow('layer sha256:ab ends in the middle of a zstd frame');
      const damaged = Buffer.from(stored);
      damaged[4]! |= 0x08; // the frame header's reserved bit
      await expect(drain(zstdDecompressStream(pieces(damaged, 1 << 16), 'layer sha256:cd')!)).rejects.toThrow(
        /^layer sha256:cd: zstd failed: \w/,
      );
    });
  });
});
