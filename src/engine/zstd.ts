// zstd for .smolmachine chunks (docs/smolmachine.md, "Compression"): Node 20's zlib has no zstd, so each chunk goes
// through Debian's `zstd` program (the same libzstd a binding would link), one process per chunk, bytes on its stdin
// and stdout. Decompression is bounded: a chunk that inflates past the size its manifest gives is refused without
// buffering the rest, so a hostile file cannot make us hold more than one chunk.
import { spawn } from 'node:child_process';

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

/** Decompresses one zstd frame sequence; refuses output longer than `size`. */
export function zstdDecompress(data: Buffer, size: number, what: string): Promise<Buffer> {
  return run(['-d', '-q', '-c', '--no-progress'], data, size, what);
}
