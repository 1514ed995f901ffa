// zstd for .smolmachine chunks (docs/smolmachine.md, "Compression"): Node 20's zlib has no zstd. Packing sends each
// chunk through Debian's `zstd` program, one process per chunk, bytes on its stdin and stdout. Opening decompresses in
// this process with zstddec (the reference libzstd's decoder built to WebAssembly; no process per chunk, about 4 times
// faster here) into a buffer of exactly the size the manifest gives; a chunk it cannot decompress to exactly that size
// goes through the `zstd` program again, which says what is wrong (too long, damaged). Either way decompression is
// bounded: a chunk that inflates past its size is refused without holding more than one chunk.
import { spawn } from 'node:child_process';
import { ZSTDDecoder } from 'zstddec';

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

export function zstdCompress(data: Buffer): Promise<Buffer> {
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
 * fewer bytes when that is what the frames hold (the caller compares).
 */
export async function zstdDecompress(data: Buffer, size: number, what: string): Promise<Buffer> {
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
