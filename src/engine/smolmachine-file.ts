// Writing and reading .smolmachine files (docs/smolmachine.md). writeMachine() packs files as their non-zero pages,
// zstd chunks with a sha256 each, then the manifest and the footer, all appended in order with one running sha256;
// it writes FILE.partial-PID and renames it. openMachine() checks the footer, the whole file's digest, the manifest
// and its consistency before it returns; extractFile() then writes a file back, checking every chunk's size and
// sha256 as it goes. Nothing here knows the store or the engine.
import { createHash } from 'node:crypto';
import { close, fstat, open, read, write, fsync, ftruncate } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { promisify } from 'node:util';
import {
  CHUNK_MAX,
  FOOTER_BYTES,
  HEADER_BYTES,
  PAGE,
  checkConsistency,
  checkHeader,
  checkVmmHeaders,
  layoutText,
  decodeFooter,
  encodeFooterFields,
  encodeHeader,
  parseManifest,
  type Chunk,
  type MachineManifest,
  type PackedFile,
} from './smolmachine-format.js';
import { dataExtents } from './file-extents.js';
import { zstdCompress, zstdDecompress } from './zstd.js';

const openFd = promisify(open);
const closeFd = promisify(close);
const fstatFd = promisify(fstat);
const fsyncFd = promisify(fsync);
const ftruncateFd = promisify(ftruncate);

async function readAt(fd: number, length: number, position: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
  let got = 0;
  while (got < length) {
    const { bytesRead } = await promisify(read)(fd, buffer, got, length - got, position + got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return got === length ? buffer : buffer.subarray(0, got);
}

async function writeAll(fd: number, data: Buffer, position: number | null): Promise<void> {
  let done = 0;
  while (done < data.length) {
    const { bytesWritten } = await promisify(write)(
      fd,
      data,
      done,
      data.length - done,
      position === null ? null : position + done,
    );
    done += bytesWritten;
  }
}

const ZERO_PAGE = Buffer.alloc(PAGE);
const READ_BLOCK = 8 << 20;
/** Zero bytes between two non-zero runs that still make them one piece. */
const MERGE_GAP = 64 << 10;

/** Writes `data` at `at`, leaving its zero pages as holes (the file was made by ftruncate). */
async function writeSparse(fd: number, data: Buffer, at: number): Promise<void> {
  let start = -1;
  for (let i = 0; ; i += PAGE) {
    const done = i >= data.length;
    const zero = done || data.subarray(i, i + PAGE).equals(ZERO_PAGE.subarray(0, Math.min(PAGE, data.length - i)));
    if (!zero && start < 0) start = i;
    if (zero && start >= 0) {
      await writeAll(fd, data.subarray(start, i), at + start);
      start = -1;
    }
    if (done) return;
  }
}

export type Progress = (done: number, total: number) => void;

/** What goes into a file, in order: the files it holds are given by path and become PackedFiles in the manifest. */
export interface MachineWriter {
  /** Packs the file at `path` as its non-zero pages; returns where its pieces went. */
  addFile(path: string): Promise<PackedFile>;
  /** Writes the manifest (with `chunks` and `totals` filled in) and the footer, then publishes the file. */
  finish(manifest: Omit<MachineManifest, 'chunks' | 'totals'>): Promise<{ bytes: number; manifest: MachineManifest }>;
  abort(): Promise<void>;
}

/** Starts `out` (written as `out.partial-PID`); `total` is what progress counts to: the bytes of every file added. */
export async function createMachine(
  out: string,
  total: number,
  onProgress: Progress = () => {},
): Promise<MachineWriter> {
  const partial = `${out}.partial-${process.pid}`;
  const fd = await openFd(partial, 'w', 0o644);
  const hash = createHash('sha256');
  let position = 0;
  let scanned = 0;
  const chunks: Chunk[] = [];
  let memoryData = 0;
  const append = async (data: Buffer) => {
    hash.update(data);
    await writeAll(fd, data, null);
    position += data.length;
  };
  await append(encodeHeader());

  /** Compressions run two at a time (one per core); their results are appended in order. */
  const inFlight: Array<Promise<void>> = [];
  let tail: Promise<void> = Promise.resolve();
  const emit = (raw: Buffer, pieces: PackedFile['pieces'], at: number) => {
    const index = chunks.length;
    chunks.push({ offset: 0, stored: 1, size: raw.length, sha256: createHash('sha256').update(raw).digest('hex') });
    pieces.push({ at, chunk: index });
    const compressed = zstdCompress(raw);
    tail = tail.then(async () => {
      const stored = await compressed;
      chunks[index]!.offset = position;
      chunks[index]!.stored = stored.length;
      await append(stored);
    });
    tail.catch(() => undefined); // awaited by drain(); marked handled so a failure is thrown there, once
    inFlight.push(tail);
  };
  const drain = async (max: number) => {
    while (inFlight.length > max) await inFlight.shift();
  };

  const writer: MachineWriter = {
    async addFile(file) {
      // Only where the file has data: its holes read as zero pages, which are left out anyway.
      const { extents } = await dataExtents(file, PAGE);
      const src = await openFd(file, 'r');
      try {
        const { size } = await fstatFd(src);
        const packed: PackedFile = { size, pieces: [], layout: '' };
        let run: Buffer[] = [];
        let runBytes = 0;
        let runAt = 0;
        // Zero pages after a run are held back: a short gap joins the next non-zero page's run (one zstd call, and
        // zeros cost it almost nothing), a long one ends the run. They are holes again when unpacked.
        let gap: Buffer[] = [];
        let gapBytes = 0;
        const flush = () => {
          if (runBytes) emit(Buffer.concat(run, runBytes), packed.pieces, runAt);
          run = [];
          runBytes = 0;
          gap = [];
          gapBytes = 0;
        };
        /** `bytes` of zeros not read (a hole): as many zero pages after the run, or the run's end. */
        const skip = (bytes: number) => {
          if (!runBytes || bytes <= 0) return;
          if (gapBytes + bytes >= MERGE_GAP || runBytes + gapBytes + bytes >= CHUNK_MAX) return flush();
          for (let left = bytes; left > 0; left -= PAGE) gap.push(ZERO_PAGE.subarray(0, Math.min(PAGE, left)));
          gapBytes += bytes;
        };
        let end = 0; // where the last extent read ended
        const blocks = extents
          .filter(([from]) => from < size)
          .flatMap(([from, to]) => {
            const out: Array<{ offset: number; length: number; hole: number }> = [];
            for (let offset = from; offset < Math.min(to, size); offset += READ_BLOCK) {
              out.push({ offset, length: Math.min(READ_BLOCK, Math.min(to, size) - offset), hole: offset - end });
              end = offset + out.at(-1)!.length;
            }
            return out;
          });
        for (const { offset, length, hole } of blocks) {
          skip(hole);
          scanned += hole;
          const block = await readAt(src, length, offset);
          for (let i = 0; i < block.length; i += PAGE) {
            const page = block.subarray(i, Math.min(i + PAGE, block.length));
            if (page.equals(ZERO_PAGE.subarray(0, page.length))) {
              if (!runBytes) continue;
              gap.push(page);
              gapBytes += page.length;
              if (gapBytes >= MERGE_GAP || runBytes + gapBytes >= CHUNK_MAX) flush();
              continue;
            }
            if (runBytes + gapBytes + page.length > CHUNK_MAX) flush();
            if (!runBytes) runAt = offset + i;
            run.push(...gap, page);
            runBytes += gapBytes + page.length;
            gap = [];
            gapBytes = 0;
          }
          scanned += block.length;
          await drain(2);
          onProgress(scanned, total);
        }
        scanned += size - end; // the hole at the end
        onProgress(scanned, total);
        flush();
        await drain(0);
        const text = layoutText(
          size,
          packed.pieces.map((p) => ({ at: p.at, ...chunks[p.chunk]! })),
        );
        packed.layout = createHash('sha256').update(text).digest('hex');
        return packed;
      } finally {
        await closeFd(src);
      }
    },
    async finish(partialManifest) {
      await drain(0);
      await tail;
      const raw = chunks.reduce((sum, c) => sum + c.size, 0);
      const stored = chunks.reduce((sum, c) => sum + c.stored, 0);
      for (const s of partialManifest.snapshots) for (const p of s.memory.pieces) memoryData += chunks[p.chunk]!.size;
      const manifest: MachineManifest = { ...partialManifest, chunks, totals: { raw, stored, memoryData } };
      const text = Buffer.from(JSON.stringify(manifest));
      const manifestOffset = position;
      await append(text);
      await append(encodeFooterFields(manifestOffset, text.length));
      const digest = hash.digest();
      await writeAll(fd, digest, null);
      position += digest.length;
      await fsyncFd(fd);
      await closeFd(fd);
      await rename(partial, out);
      onProgress(total, total);
      return { bytes: position, manifest };
    },
    async abort() {
      await closeFd(fd).catch(() => undefined);
      await rm(partial, { force: true });
    },
  };
  return writer;
}

/** An opened, checked .smolmachine: its manifest, and a way to write each of its files back. */
export interface OpenedMachine {
  manifest: MachineManifest;
  bytes: number;
  /** Writes `packed` to `dest` (created, holes where it had zero pages), checking every chunk; then fsyncs it. */
  extractFile(packed: PackedFile, dest: string, what: string, onChunk?: (bytes: number) => void): Promise<void>;
  /** Reads one piece's decompressed bytes, checked (the first piece of a file: its header). */
  readChunk(index: number, what: string, into?: Buffer): Promise<Buffer>;
  /** Each snapshot's state and memory headers against its manifest (their first chunks, decompressed). */
  checkSnapshotHeaders(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Opens `file` and checks all of it that can be checked before unpacking: header and version, footer, the sha256 of
 * the whole file (every byte read once), the manifest's schema and consistency. Throws naming the first problem.
 */
export async function openMachine(file: string, onProgress: Progress = () => {}): Promise<OpenedMachine> {
  const fd = await openFd(file, 'r').catch((error: NodeJS.ErrnoException) => {
    throw new Error(`cannot open ${file}: ${error.code ?? error.message}`);
  });
  try {
    const stat = await fstatFd(fd);
    if (!stat.isFile()) throw new Error(`${file} is not a regular file`);
    const size = stat.size;
    checkHeader(await readAt(fd, HEADER_BYTES, 0), size, file);
    const footer = decodeFooter(await readAt(fd, FOOTER_BYTES, size - FOOTER_BYTES), size, file);
    const hash = createHash('sha256');
    const end = size - 32;
    for (let at = 0; at < end; at += READ_BLOCK) {
      const block = await readAt(fd, Math.min(READ_BLOCK, end - at), at);
      if (block.length === 0) throw new Error(`${file} changed while it was read`);
      hash.update(block);
      onProgress(at + block.length, end);
    }
    if (!hash.digest().equals(footer.digest)) {
      throw new Error(`${file} is corrupt: its sha256 is not the one its footer records (a changed or damaged byte)`);
    }
    const manifest = parseManifest(await readAt(fd, footer.manifestLength, footer.manifestOffset), file);
    checkConsistency(manifest, footer.manifestOffset, file);
    return opened(fd, file, size, manifest);
  } catch (error) {
    await closeFd(fd).catch(() => undefined);
    throw error;
  }
}

function opened(fd: number, file: string, bytes: number, manifest: MachineManifest): OpenedMachine {
  /** With `into`, the bytes are a view of it (see zstdDecompress), good until `into` is used again. */
  const readChunk = async (index: number, what: string, into?: Buffer): Promise<Buffer> => {
    const chunk = manifest.chunks[index]!;
    const stored = await readAt(fd, chunk.stored, chunk.offset);
    if (stored.length !== chunk.stored) throw new Error(`${file}: chunk ${index} (${what}) is cut short`);
    let raw: Buffer;
    try {
      raw = await zstdDecompress(stored, chunk.size, `chunk ${index} (${what})`, into);
    } catch (error) {
      throw new Error(`${file}: ${(error as Error).message}`);
    }
    if (raw.length !== chunk.size) {
      throw new Error(
        `${file}: chunk ${index} (${what}) decompresses to ${raw.length} bytes; its manifest says ${chunk.size}`,
      );
    }
    if (createHash('sha256').update(raw).digest('hex') !== chunk.sha256) {
      throw new Error(`${file}: chunk ${index} (${what}) does not have the sha256 its manifest records`);
    }
    return raw;
  };
  /**
   * The buffers extractFile decompresses into, one per chunk in flight, kept for the file's life: fresh memory for
   * every chunk cost 1.3 ms a MiB in page faults on this project's machine, more than the decompression.
   */
  const spare: Buffer[] = [];
  return {
    manifest,
    bytes,
    readChunk,
    async checkSnapshotHeaders() {
      for (const { manifest: s, state, memory } of manifest.snapshots) {
        const first = (f: PackedFile, what: string) => {
          const piece = f.pieces[0];
          if (!piece || piece.at !== 0) throw new Error(`${file}: snapshot ${s.id}'s ${what} has no header`);
          return readChunk(piece.chunk, `${s.id} ${what}`);
        };
        checkVmmHeaders(await first(state, 'state'), state.size, await first(memory, 'memory'), memory.size, s, file);
      }
    },
    async extractFile(packed, dest, what, onChunk) {
      const out = await openFd(dest, 'wx', 0o644);
      try {
        await ftruncateFd(out, packed.size);
        // Two chunks decompress at once (on the thread pool); they are written as they come (each has its own
        // place), and each one's buffer goes back for the next chunk once it is written.
        const pending: Array<Promise<void>> = [];
        for (const piece of packed.pieces) {
          const into = spare.pop() ?? Buffer.allocUnsafeSlow(CHUNK_MAX + 1);
          const done = readChunk(piece.chunk, what, into)
            .then(async (raw) => {
              await writeSparse(out, raw, piece.at);
              onChunk?.(raw.length);
            })
            .finally(() => spare.push(into));
          done.catch(() => undefined); // awaited below; marked handled so the first failure is the one thrown
          pending.push(done);
          if (pending.length >= 2) await pending.shift();
        }
        for (const done of pending) await done;
        await fsyncFd(out);
      } finally {
        await closeFd(out);
      }
    },
    close: () => closeFd(fd),
  };
}
