// The built images under <guest cache>/images, for `smol image ls`: each `<name>.ext4` with its sizes, and the record
// `<name>.json` written next to it when it was built (its suite, mirror, init commands and their output).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from './guest-assets.js';
import type { InitOutput } from './mmdebstrap-output.js';

const RECORD_FORMAT = 1;
const IMAGE_FILE = /^(debian-([a-z][a-z0-9-]*)-([0-9a-f]{16}))\.ext4$/;

export interface ImageRecord {
  format: number;
  image: string;
  suite: string;
  mirror: string;
  hash: string;
  /** The init commands (their env's values are left out: they may be secrets). */
  init: string[];
  initOutput: InitOutput[];
  built: string;
  /** How long the build took, download included. */
  seconds: number;
}

export interface ImageEntry {
  /** `debian:<suite>` */
  image: string;
  name: string;
  file: string;
  hash: string;
  /** The disk's size (the file's apparent size), and what the sparse file takes on the host's disk. */
  size: number;
  allocated: number;
  /** When it was built: from its record, else the file's time. */
  built: string;
  seconds: number | null;
  init: string[] | null;
}

export function writeImageRecord(
  dir: string,
  name: string,
  fields: Omit<ImageRecord, 'format' | 'image' | 'built'>,
  now = new Date(),
): void {
  const record: ImageRecord = {
    format: RECORD_FORMAT,
    image: `debian:${fields.suite}`,
    ...fields,
    built: now.toISOString(),
  };
  writeFileAtomic(path.join(dir, `${name}.json`), JSON.stringify(record, null, 2) + '\n');
}

/** The record of image `name`, or null when there is none or it cannot be read. */
export function readImageRecord(dir: string, name: string): ImageRecord | null {
  try {
    const record = JSON.parse(readFileSync(path.join(dir, `${name}.json`), 'utf8')) as Partial<ImageRecord>;
    if (record.format !== RECORD_FORMAT || !Array.isArray(record.initOutput) || !Array.isArray(record.init))
      return null;
    return record as ImageRecord;
  } catch {
    return null;
  }
}

/** The images in `dir`, by name; an empty list when the directory does not exist. */
export function listImages(dir: string): ImageEntry[] {
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return [];
  }
  const entries: ImageEntry[] = [];
  for (const fileName of names) {
    const match = IMAGE_FILE.exec(fileName);
    if (!match?.[1] || !match[2] || !match[3]) continue;
    const file = path.join(dir, fileName);
    let stats;
    try {
      stats = statSync(file);
    } catch {
      continue; // removed meanwhile
    }
    const record = readImageRecord(dir, match[1]);
    entries.push({
      image: `debian:${match[2]}`,
      name: match[1],
      file,
      hash: match[3],
      size: stats.size,
      allocated: stats.blocks * 512,
      built: record?.built ?? stats.mtime.toISOString(),
      seconds: record?.seconds ?? null,
      init: record?.init ?? null,
    });
  }
  return entries;
}
