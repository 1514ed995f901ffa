// The .smolmachine file (docs/smolmachine.md): a header, zstd chunks, a JSON manifest and a footer with the whole
// file's sha256. This module is the format alone: its constants, the manifest's schema and every check a file must
// pass before anything of it is believed. The file is untrusted input: each check names what is wrong and where.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { SnapshotId } from '../api/schema.js';
import { Manifest as SnapshotManifest } from './snapshot-manifest.js';

export const MAGIC = 'SMOLMACH';
/** The format this Smol writes: 2 holds disks (docs/smolmachine.md, "Disks"); 1 (VMs without disks) is still read. */
export const MACHINE_FORMAT = 2;
const READABLE_FORMATS = [1, 2];
export const HEADER_BYTES = 64;
/** Footer: u64 manifest offset, u64 manifest length, then the sha256 of every byte before the digest. */
export const FOOTER_BYTES = 48;
export const PAGE = 4096;
/** Raw bytes per chunk at most (a run of non-zero pages longer than this is split). */
export const CHUNK_MAX = 4 << 20;
/** zstd's worst case for CHUNK_MAX bytes is a little over them; anything larger is a lie. */
export const STORED_MAX = CHUNK_MAX + (CHUNK_MAX >> 7) + 4096;
export const MANIFEST_MAX = 64 << 20;
/** The largest file one machine may hold (a memory layer of 1 TiB of RAM plus its header and bitmap). */
export const FILE_MAX = 2 ** 40 + 2 ** 40 / PAGE / 8 + (1 << 20);

const Int = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'a sha256 in hex');

export const Chunk = z
  .object({
    /** Where its zstd bytes start in the .smolmachine file. */
    offset: Int,
    stored: z.number().int().min(1).max(STORED_MAX),
    /** Bytes it decompresses to. */
    size: z.number().int().min(1).max(CHUNK_MAX),
    /** sha256 of the decompressed bytes. */
    sha256: Sha256,
  })
  .strict();
export type Chunk = z.infer<typeof Chunk>;

/**
 * A file as its non-zero extents: `size` bytes long, zeros (holes) except where a piece puts a chunk at `at` (a
 * multiple of 4096). `layout` is the sha256 of layoutText(): a changed offset, size or chunk is caught even when the
 * manifest is otherwise consistent.
 */
export const PackedFile = z
  .object({
    size: Int.max(FILE_MAX),
    pieces: z.array(z.object({ at: Int.multipleOf(PAGE), chunk: Int }).strict()),
    layout: Sha256,
  })
  .strict();
export type PackedFile = z.infer<typeof PackedFile>;

/** A file name in SMOL_HOME/images or SMOL_HOME/disks. */
const DiskName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/, 'a plain file name');

/**
 * A file of a disk chain: a layer (its header names the one below) or the raw image at the bottom. `was` is its path
 * where it was packed, as the state blobs and layer headers name it; `below` the entry under a layer.
 */
export const PackedDisk = z
  .object({
    kind: z.enum(['image', 'layer']),
    name: DiskName,
    was: z.string().min(2).max(4096).startsWith('/'),
    below: DiskName.nullable(),
    file: PackedFile,
  })
  .strict();
export type PackedDisk = z.infer<typeof PackedDisk>;

export const PackedSnapshot = z.object({ manifest: SnapshotManifest, state: PackedFile, memory: PackedFile }).strict();
export type PackedSnapshot = z.infer<typeof PackedSnapshot>;

export const MachineManifest = z
  .object({
    format: z.union([z.literal(1), z.literal(2)]),
    made: z
      .object({ smol: z.string(), host: z.string(), platform: z.string(), at: z.string(), from: z.string() })
      .strict(),
    /** The CPU features the state may use: this host's /proc/cpuinfo flags when it was packed (the VMM gives the
     * guest a filtered subset of them, and does not expose which yet). */
    cpu: z
      .object({ source: z.literal('/proc/cpuinfo'), vendor: z.string(), model: z.string(), flags: z.array(z.string()) })
      .strict(),
    smolfile: z.object({ name: z.string().min(1), text: z.string() }).strict(),
    /** The packed snapshot: the last of `snapshots`. */
    snapshot: SnapshotId,
    /** Its memory layer chain, full layer first: each one's layerParent is the one before it. */
    snapshots: z.array(PackedSnapshot).min(1).max(64),
    /** Every file of the snapshots' disk chains, layers and the images under them (format 2). */
    disks: z.array(PackedDisk).max(1024).optional(),
    /** A bare kernel's kernel and initrd, by the file name the unpacked Smolfile gives them. */
    boot: z.array(
      z
        .object({
          role: z.enum(['kernel', 'initrd']),
          name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'a plain file name'),
          file: PackedFile,
        })
        .strict(),
    ),
    /** The VM's console screen when it was packed (serialized terminal), shown first after the restore. */
    console: z
      .object({ screen: z.string().max(4 << 20) })
      .strict()
      .nullable(),
    chunks: z.array(Chunk),
    totals: z.object({ raw: Int, stored: Int, memoryData: Int }).strict(),
  })
  .strict();
export type MachineManifest = z.infer<typeof MachineManifest>;

/** What a PackedFile's `layout` digest covers: its size, and each piece's offset, raw size and data's sha256. */
export function layoutText(size: number, pieces: Array<{ at: number; size: number; sha256: string }>): string {
  return JSON.stringify([size, pieces.map((p) => [p.at, p.size, p.sha256])]);
}

export interface Footer {
  manifestOffset: number;
  manifestLength: number;
  digest: Buffer;
}

/** The header's fields; refuses a file that is not a .smolmachine or has a format this Smol does not read. */
export function checkHeader(header: Buffer, fileBytes: number, file: string): void {
  const min = HEADER_BYTES + FOOTER_BYTES;
  if (fileBytes < min) throw new Error(`${file} is ${fileBytes} bytes, shorter than any .smolmachine (${min})`);
  if (header.subarray(0, 8).toString('latin1') !== MAGIC) {
    throw new Error(`${file} is not a .smolmachine file (it does not start with ${MAGIC})`);
  }
  const version = header.readUInt32LE(8);
  if (!READABLE_FORMATS.includes(version)) {
    const who = version > MACHINE_FORMAT ? 'written by a newer Smol' : 'an unknown older version';
    throw new Error(
      `${file} has .smolmachine format version ${version}; this Smol reads versions ${READABLE_FORMATS.join(' and ')} (${who})`,
    );
  }
  if (header.readUInt32LE(12) !== HEADER_BYTES) {
    throw new Error(`${file}: header size is ${header.readUInt32LE(12)}, not ${HEADER_BYTES}`);
  }
  if (!header.subarray(16, HEADER_BYTES).every((b) => b === 0))
    throw new Error(`${file}: header reserved bytes are not zero`);
}

export function encodeHeader(): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  header.write(MAGIC, 0, 'latin1');
  header.writeUInt32LE(MACHINE_FORMAT, 8);
  header.writeUInt32LE(HEADER_BYTES, 12);
  return header;
}

export function encodeFooterFields(manifestOffset: number, manifestLength: number): Buffer {
  const fields = Buffer.alloc(16);
  fields.writeBigUInt64LE(BigInt(manifestOffset), 0);
  fields.writeBigUInt64LE(BigInt(manifestLength), 8);
  return fields;
}

export function decodeFooter(footer: Buffer, fileBytes: number, file: string): Footer {
  const manifestOffset = Number(footer.readBigUInt64LE(0));
  const manifestLength = Number(footer.readBigUInt64LE(8));
  const end = fileBytes - FOOTER_BYTES;
  if (manifestLength < 2 || manifestLength > MANIFEST_MAX) {
    throw new Error(
      `${file}: its footer gives a manifest of ${manifestLength} bytes, not 2 to ${MANIFEST_MAX}: the file is truncated, extended or damaged`,
    );
  }
  if (manifestOffset < HEADER_BYTES || manifestOffset + manifestLength !== end) {
    throw new Error(
      `${file}: its manifest at ${manifestOffset} (+${manifestLength}) does not end where the footer starts (${end}); ` +
        `the file is truncated or extended`,
    );
  }
  return { manifestOffset, manifestLength, digest: Buffer.from(footer.subarray(16, 48)) };
}

/** Parses the manifest's bytes; refuses a newer manifest format naming both versions, and any invalid field. */
export function parseManifest(bytes: Buffer, file: string): MachineManifest {
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new Error(`${file}: its manifest is not JSON (${(error as Error).message})`);
  }
  const format = (json as { format?: unknown } | null)?.format;
  if (typeof format === 'number' && !READABLE_FORMATS.includes(format)) {
    throw new Error(
      `${file}: its manifest has format ${format}; this Smol reads formats ${READABLE_FORMATS.join(' and ')}`,
    );
  }
  const parsed = MachineManifest.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${file}: its manifest is invalid at ${issue.path.join('.') || '(top)'}: ${issue.message}`);
  }
  return parsed.data;
}

/**
 * Everything the manifest says that can be checked without the chunks' contents: chunks tile the data area exactly
 * (from the header to the manifest, in order), every chunk is used by exactly one piece, pieces lie inside their
 * file without overlapping, the snapshot chain holds together, and the totals add up.
 */
export function checkConsistency(m: MachineManifest, manifestOffset: number, file: string): void {
  const bad = (what: string) => new Error(`${file}: ${what}`);
  let at = HEADER_BYTES;
  let raw = 0;
  let stored = 0;
  m.chunks.forEach((chunk, i) => {
    if (chunk.offset !== at) throw bad(`chunk ${i} starts at ${chunk.offset}; the chunk before it ends at ${at}`);
    at += chunk.stored;
    raw += chunk.size;
    stored += chunk.stored;
  });
  if (at !== manifestOffset) throw bad(`the chunks end at ${at}, but the manifest starts at ${manifestOffset}`);
  if (raw !== m.totals.raw || stored !== m.totals.stored) {
    throw bad(`the totals (${m.totals.raw} raw, ${m.totals.stored} stored) are not the chunks' (${raw}, ${stored})`);
  }
  const used = new Set<number>();
  const checkFile = (f: PackedFile, what: string) => {
    let end = 0;
    for (const piece of f.pieces) {
      const chunk = m.chunks[piece.chunk];
      if (!chunk) throw bad(`${what} names chunk ${piece.chunk}; there are ${m.chunks.length}`);
      if (used.has(piece.chunk)) throw bad(`chunk ${piece.chunk} is used twice (again by ${what})`);
      used.add(piece.chunk);
      if (piece.at < end)
        throw bad(`${what}: a piece at ${piece.at} overlaps or precedes the one before (ends ${end})`);
      end = piece.at + chunk.size;
      if (end > f.size) throw bad(`${what}: a piece ends at ${end}, past the file's ${f.size} bytes`);
    }
    const text = layoutText(
      f.size,
      f.pieces.map((p) => ({ at: p.at, ...m.chunks[p.chunk]! })),
    );
    if (createHash('sha256').update(text).digest('hex') !== f.layout) {
      throw bad(`${what}: its layout digest does not match its size and pieces`);
    }
  };
  const ids = new Set<string>();
  let memoryData = 0;
  m.snapshots.forEach(({ manifest: s, state, memory }, i) => {
    const before = i === 0 ? null : m.snapshots[i - 1]!.manifest;
    if (ids.has(s.id)) throw bad(`snapshot ${s.id} is in it twice`);
    ids.add(s.id);
    if (s.layerParent !== (before?.id ?? null)) {
      throw bad(
        `snapshot ${s.id}'s layer parent is ${s.layerParent}; the chain has ${before?.id ?? 'nothing'} before it`,
      );
    }
    if (before && (before.memoryBytes !== s.memoryBytes || before.cpus !== s.cpus)) {
      throw bad(`snapshot ${s.id} has ${s.memoryBytes} bytes and ${s.cpus} vCPUs, unlike ${before.id} below it`);
    }
    if (s.diskLayers?.length && m.format === 1)
      throw bad(`snapshot ${s.id} has disk layers, which format 1 does not hold`);
    if (memory.size < s.memoryBytes || memory.size > s.memoryBytes + FILE_MAX / 1024) {
      throw bad(
        `snapshot ${s.id}'s memory file is ${memory.size} bytes, not its ${s.memoryBytes} bytes of RAM plus a header`,
      );
    }
    checkFile(state, `snapshot ${s.id}'s state`);
    checkFile(memory, `snapshot ${s.id}'s memory`);
    for (const p of memory.pieces) memoryData += m.chunks[p.chunk]!.size;
  });
  if (m.snapshots[m.snapshots.length - 1]!.manifest.id !== m.snapshot) {
    throw bad(`the packed snapshot ${m.snapshot} is not the top of its chain`);
  }
  if (memoryData !== m.totals.memoryData) throw bad(`totals.memoryData is ${m.totals.memoryData}, not ${memoryData}`);
  checkDisks(m.disks ?? [], bad);
  for (const d of m.disks ?? []) checkFile(d.file, `disk file ${d.name}`);
  const roles = new Set<string>();
  for (const b of m.boot) {
    if (roles.has(b.role)) throw bad(`two ${b.role} files`);
    roles.add(b.role);
    checkFile(b.file, `the ${b.role}`);
  }
  if (used.size !== m.chunks.length) throw bad(`${m.chunks.length - used.size} chunk(s) belong to no file`);
}

/** Disk entries: unique names and old paths, each layer on an entry of its own, every chain ending at an image. */
function checkDisks(disks: PackedDisk[], bad: (what: string) => Error): void {
  const byName = new Map<string, PackedDisk>();
  const was = new Set<string>();
  for (const d of disks) {
    if (byName.has(d.name)) throw bad(`two disk files are named ${d.name}`);
    if (was.has(d.was)) throw bad(`two disk files were ${d.was}`);
    byName.set(d.name, d);
    was.add(d.was);
    if (d.kind === 'image' && d.below !== null) throw bad(`disk image ${d.name} has something below it`);
    if (d.kind === 'layer' && !/^[0-9a-f]{20}\.layer$/.test(d.name))
      throw bad(`disk layer ${d.name}: not a layer name`);
  }
  for (const d of disks) {
    let at = d;
    for (let depth = 0; at.kind === 'layer'; depth++) {
      if (depth >= 64) throw bad(`disk layer ${d.name}: its chain is deeper than 64 (or a loop)`);
      const below = byName.get(at.below ?? '');
      if (!below) throw bad(`disk layer ${at.name} sits on ${at.below}, which the file does not hold`);
      at = below;
    }
  }
}

/** The state and memory files' own headers (docs/snapshots.md), read from their first piece. */
export function checkVmmHeaders(
  state: Buffer,
  stateSize: number,
  memory: Buffer,
  memorySize: number,
  s: SnapshotManifest,
  file: string,
): void {
  const bad = (what: string) => new Error(`${file}: snapshot ${s.id}: ${what}`);
  if (state.length < 64 || state.subarray(0, 8).toString('latin1') !== 'SMOLSNAP')
    throw bad(`its state is not a snapshot state blob`);
  if (Number(state.readBigUInt64LE(16)) !== stateSize) {
    throw bad(`its state says it is ${state.readBigUInt64LE(16)} bytes; the file holds ${stateSize}`);
  }
  if (memory.length < 64 || memory.subarray(0, 8).toString('latin1') !== 'SMOLMEM\0')
    throw bad(`its memory is not a memory layer`);
  const bytes = Number(memory.readBigUInt64LE(16));
  const dataOffset = Number(memory.readBigUInt64LE(24));
  if (bytes !== s.memoryBytes)
    throw bad(`its memory layer holds ${bytes} bytes of RAM; its manifest says ${s.memoryBytes}`);
  if (dataOffset + bytes !== memorySize) {
    throw bad(`its memory layer's data ends at ${dataOffset + bytes}; the file is ${memorySize} bytes`);
  }
}

/** This host's CPU, as /proc/cpuinfo describes its first processor. */
export function parseCpuinfo(text: string): { vendor: string; model: string; flags: string[] } {
  const field = (name: string) => new RegExp(`^${name}\\s*:\\s*(.*)$`, 'm').exec(text)?.[1]?.trim() ?? '';
  return {
    vendor: field('vendor_id'),
    model: field('model name'),
    flags: field('flags').split(/\s+/).filter(Boolean).sort(),
  };
}

/** The features the machine's state needs that this host lacks. */
export function missingCpuFlags(needed: string[], host: string[]): string[] {
  const have = new Set(host);
  return needed.filter((flag) => !have.has(flag));
}
