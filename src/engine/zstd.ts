// zstd for .smolmachine chunks (docs/smolmachine.md, "Compression"): Node 20's zlib has no zstd. The native addon
// links Debian's libzstd and compresses and decompresses each chunk on libuv's thread pool (native/binding/
// zstd_wrap.cc), so two chunks use two cores and the JavaScript thread only hashes and writes; opening decompresses
// into buffers the caller reuses. Without the addon (a checkout where it is not built): packing sends each chunk
// through Debian's `zstd` program, and opening decompresses with zstddec (libzstd's decoder built to WebAssembly) into
// exactly the size the manifest gives, a chunk it cannot decompress to that size going through the `zstd` program
// again, which says what is wrong. Every way is bounded: a chunk that inflates past its size is refused without
// holding more than one chunk, and the messages are the same ("decompresses to more than", "zstd failed: ...").
import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { ZSTDDecoder } from 'zstddec';
import { loadNative, type NativeBinding } from '../vmm/native.js';

/** What the command-line tools are called; SMOL_ZSTD points at another. */
const ZSTD = process.env.SMOL_ZSTD || 'zstd';
export const ZSTD_LEVEL = 3;

function run(args: string[], input: Buffer, limit: number, what: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn(ZSTD, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let bytes = 0;
    let err = '';
    let over = false;
    child.on('error', (error: NodeJS.ErrnoException) =>
      reject(
        new Error(
          error.code === 'ENOENT'
            ? `the zstd program is not installed (Debian's zstd package; scripts/setup-system.sh installs it)`
            : `zstd could not start: ${error.message}`,
        ),
      ),
    );
    child.stdout.on('data', (data: Buffer) => {
      bytes += data.length;
      if (bytes > limit) {
        over = true;
        child.kill('SIGKILL');
        return;
      }
      out.push(data);
    });
    child.stderr.on('data', (data: Buffer) => (err += data.toString()));
    child.stdin.on('error', () => undefined); // a zstd that stops reading (bad input) ends with its own error
    child.on('close', (code) => {
      if (over) reject(new Error(`${what} decompresses to more than the ${limit} bytes its manifest gives`));
      else if (code !== 0) reject(new Error(`${what}: zstd failed: ${err.trim().split('\n').pop() || `exit ${code}`}`));
      else resolve(Buffer.concat(out, bytes));
    });
    child.stdin.end(input);
  });
}

/** The addon's zstd, or null where the addon is not built (or is a build from before it had zstd). */
function nativeZstd(): Pick<NativeBinding, 'zstdCompress' | 'zstdDecompress'> | null {
  try {
    const native = loadNative();
    return typeof native.zstdDecompress === 'function' ? native : null;
  } catch (error) {
    if (/native module/.test((error as Error).message)) return null;
    throw error;
  }
}

export function zstdCompress(data: Buffer): Promise<Buffer> {
  const native = nativeZstd();
  if (native) return native.zstdCompress(data, ZSTD_LEVEL);
  return zstdProgramCompress(data);
}

/** The same through Debian's `zstd` program (what packing used before the addon had zstd). */
export function zstdProgramCompress(data: Buffer): Promise<Buffer> {
  return run([`-${ZSTD_LEVEL}`, '-q', '-c', '--no-progress'], data, Number.MAX_SAFE_INTEGER, 'compressing');
}

let decoder: Promise<ZSTDDecoder> | null = null;

function wasmDecoder(): Promise<ZSTDDecoder> {
  decoder ??= (async () => {
    const d = new ZSTDDecoder();
    await d.init();
    return d;
  })();
  return decoder;
}

/**
 * Decompresses one zstd frame sequence that should give `size` bytes; refuses output longer than `size`. Returns
 * fewer bytes when that is what the frames hold (the caller compares). With `into` (at least size + 1 bytes) the
 * addon writes there and the result is a view of it, good until the caller reuses `into`.
 */
export async function zstdDecompress(data: Buffer, size: number, what: string, into?: Buffer): Promise<Buffer> {
  const native = nativeZstd();
  if (native) {
    try {
      if (into && into.length > size) return into.subarray(0, await native.zstdDecompress(data, size, into));
      return await native.zstdDecompress(data, size);
    } catch (error) {
      const message = (error as Error).message;
      if (/^more than \d+$/.test(message)) {
        throw new Error(`${what} decompresses to more than the ${size} bytes its manifest gives`);
      }
      throw new Error(`${what}: ${message}`);
    }
  }
  if (size > 0) {
    // ZSTD_decompress into exactly `size` bytes: a longer output is an error there, and errors come back as no bytes.
    const out = (await wasmDecoder()).decode(data, size);
    if (out.length === size) return Buffer.from(out.buffer, out.byteOffset, out.length);
  }
  return zstdProgramDecompress(data, size, what);
}

/** The same through Debian's `zstd` program (what opening used before, and how a bad chunk's problem is named). */
export function zstdProgramDecompress(data: Buffer, size: number, what: string): Promise<Buffer> {
  return run(['-d', '-q', '-c', '--no-progress'], data, size, what);
}

/** Output per call of a stream's decompression: what the tar reader takes at a time. */
const STREAM_PIECE = 1 << 20;

/**
 * A zstd stream decompressed as it is read (an OCI layer's tar): libzstd in the addon, on the thread pool, at most a
 * MiB of output at a time and no more than the reader asks for, so a layer that inflates a thousandfold never sits in
 * memory. Throws (when read) `WHAT: zstd failed: <libzstd's reason>` for damage, and `WHAT ends in the middle of a
 * zstd frame` for a stream cut short. Null where the addon has no zstd (the caller says zstd layers need it).
 */
export function zstdDecompressStream(source: AsyncIterable<Buffer>, what: string): Readable | null {
  const native = nativeZstd() as NativeBinding | null;
  if (!native || typeof native.zstdStreamNew !== 'function') return null;
  const zstd = native;
  const stream = zstd.zstdStreamNew();
  async function* pieces(): AsyncGenerator<Buffer> {
    let ended = false;
    const decode = async (data: Buffer) => {
      try {
        return await zstd.zstdStreamDecode(stream, data, STREAM_PIECE);
      } catch (error) {
        throw new Error(`${what}: ${(error as Error).message}`);
      }
    };
    for await (const chunk of source) {
      let data = chunk;
      for (;;) {
        const r = await decode(data);
        if (r.out.length || r.consumed) ended = r.ended; // a call that did nothing says nothing of the frame
        if (r.out.length) yield r.out;
        data = data.subarray(r.consumed);
        // Its input used and its output not full: the context wants more input.
        if (!data.length && r.out.length < STREAM_PIECE) break;
      }
    }
    // What the context still holds after the last input.
    for (;;) {
      const r = await decode(Buffer.alloc(0));
      if (r.out.length) ended = r.ended;
      if (!r.out.length) break;
      yield r.out;
    }
    if (!ended) throw new Error(`${what} ends in the middle of a zstd frame`);
  }
  return Readable.from(pieces(), { objectMode: false, highWaterMark: STREAM_PIECE });
}
