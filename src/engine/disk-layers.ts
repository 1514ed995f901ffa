// The engine's side of disk layer files (docs/disks.md has the format, docs/engine.md "Disks" the bookkeeping): every
// layer a VM writes, and every layer a checkpoint froze, is a file SMOL_HOME/disks/<random>.layer. A snapshot owns the
// layers its checkpoint froze (its manifest's `diskLayers`); a live instance owns the one it writes. This module
// names new layers and reads just enough of a layer's header to follow a chain down: the path of the layer below.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readSync } from 'node:fs';
import { chmod, link, mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

export const DISKS_DIR = 'disks';
/** A layer file's name in SMOL_HOME/disks: 20 random hex digits and `.layer`. */
export const LAYER_NAME = /^[0-9a-f]{20}\.layer$/;

const MAGIC = 'SMOLDISK';
const HEADER_BYTES = 4096;
const BELOW_LENGTH_OFFSET = 88;
const BELOW_PATH_OFFSET = 96;
const BELOW_PATH_MAX = 3968;
const FLAG_FROZEN = 1;

export function newLayerName(): string {
  return `${randomBytes(10).toString('hex')}.layer`;
}

export interface LayerHeader {
  frozen: boolean;
  /** The absolute path of the layer (or raw base image) below this one. */
  below: string;
}

/**
 * The part of a layer's header the engine needs, or null when the file is missing or is not a layer of this format
 * (the VMM checks headers fully, checksum included, whenever it opens one; here a bad header only means "unknown").
 */
export async function readLayerHeader(file: string): Promise<LayerHeader | null> {
  let handle;
  try {
    handle = await open(file, 'r');
    const header = Buffer.alloc(HEADER_BYTES);
    const { bytesRead } = await handle.read(header, 0, HEADER_BYTES, 0);
    return parseHeader(header.subarray(0, bytesRead));
  } catch {
    return null;
  } finally {
    await handle?.close();
  }
}

/** Whether `file` is a layer whose header says frozen (synchronous: for a path that must decide at once). */
export function isFrozenLayerSync(file: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const header = Buffer.alloc(HEADER_BYTES);
    return parseHeader(header.subarray(0, readSync(fd, header, 0, HEADER_BYTES, 0)))?.frozen ?? false;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function parseHeader(header: Buffer): LayerHeader | null {
  if (header.length < HEADER_BYTES || header.toString('latin1', 0, 8) !== MAGIC) return null;
  const length = header.readUInt32LE(BELOW_LENGTH_OFFSET);
  if (length < 1 || length > BELOW_PATH_MAX) return null;
  return {
    frozen: (header.readUInt32LE(20) & FLAG_FROZEN) !== 0,
    below: header.toString('utf8', BELOW_PATH_OFFSET, BELOW_PATH_OFFSET + length),
  };
}

/** The name of the layer directly below `file` when it is a layer in `disksDir`, else null (a base image, none). */
export async function layerBelow(file: string, disksDir: string): Promise<string | null> {
  const header = await readLayerHeader(file);
  if (!header || path.dirname(header.below) !== disksDir) return null;
  const name = path.basename(header.below);
  return LAYER_NAME.test(name) ? name : null;
}

/**
 * The names of the layers in `disksDir` under `file`, nearest first, down to the base (or to a layer outside
 * `disksDir`); stops at a loop and after 128, which only a damaged chain could make.
 */
export async function* layersBelow(file: string, disksDir: string): AsyncGenerator<string> {
  const seen = new Set<string>();
  for (let below = await layerBelow(file, disksDir); below && !seen.has(below) && seen.size < 128;) {
    seen.add(below);
    yield below;
    below = await layerBelow(path.join(disksDir, below), disksDir);
  }
}

/** How many layers the chain under `file` has (itself included, the base not), counting those in `disksDir`. */
export async function chainDepth(file: string, disksDir: string): Promise<number> {
  let depth = 1;
  for await (const _below of layersBelow(file, disksDir)) depth++;
  return depth;
}

export const IMAGES_DIR = 'images';

/**
 * The engine's own copy of a base image (a guest build's root disk), SMOL_HOME/images/<its name>: every layer over it
 * names it by path, so it must live as long as the snapshots do, whatever happens to the guest cache. A hard link
 * when the cache is on the same file system, else a sparse copy (cp, off the event loop). The names carry a content
 * hash, so an existing one is the same image.
 */
export async function adoptBaseImage(home: string, file: string): Promise<string> {
  const dir = path.join(home, IMAGES_DIR);
  const target = path.join(dir, path.basename(file));
  if (await stat(target).catch(() => null)) return target;
  await mkdir(dir, { recursive: true });
  // With its pid: a copy left by a killed engine is removed at the next start (removeLeftPartials).
  const temporary = `${target}.partial-${process.pid}-${randomBytes(6).toString('hex')}`;
  try {
    await link(file, temporary);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
    // Not spawnSync: a 4 GiB image on a file system without SEEK_HOLE (9p, some FUSE) takes tens of seconds to
    // read through, and the engine's other episodes, streams and requests must go on meanwhile.
    try {
      await promisify(execFile)('cp', ['--sparse=always', '--reflink=auto', file, temporary], { encoding: 'utf8' });
    } catch (copyError) {
      await rm(temporary, { force: true });
      const { stderr, message } = copyError as { stderr?: string; message: string };
      throw new Error(`cannot copy ${file} to ${dir}: ${stderr?.trim() || message}`);
    }
  }
  await chmod(temporary, 0o444);
  // Two first boots of one image at once: the later rename replaces an identical file.
  await rename(temporary, target);
  return target;
}
