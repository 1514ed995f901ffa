// A writer for the "newc" cpio format (the one the Linux initramfs unpacker reads), so the archive can hold a
// device node and root-owned files without root, and comes out byte-identical for the same inputs.

export type CpioEntry =
  | { type: 'dir'; path: string; mode?: number }
  | { type: 'file'; path: string; data: Buffer; mode?: number }
  | { type: 'symlink'; path: string; target: string }
  | { type: 'chardev'; path: string; major: number; minor: number; mode?: number };

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const S_IFCHR = 0o020000;
const MAGIC = '070701';
const TRAILER = 'TRAILER!!!';

const pad4 = (n: number) => (4 - (n % 4)) % 4;
const hex8 = (n: number) => n.toString(16).padStart(8, '0');

interface Header {
  ino: number;
  mode: number;
  nlink: number;
  mtime: number;
  size: number;
  rdevMajor: number;
  rdevMinor: number;
  name: string;
}

function record(header: Header, data: Buffer): Buffer[] {
  const name = Buffer.from(`${header.name}\0`, 'utf8');
  const fields = [
    header.ino,
    header.mode,
    0, // uid: root
    0, // gid: root
    header.nlink,
    header.mtime,
    header.size,
    0, // devmajor
    0, // devminor
    header.rdevMajor,
    header.rdevMinor,
    name.length,
    0, // check (only for the "crc" variant)
  ];
  const head = Buffer.from(MAGIC + fields.map(hex8).join(''), 'ascii');
  const parts: Buffer[] = [head, name, Buffer.alloc(pad4(head.length + name.length))];
  if (data.length > 0) parts.push(data, Buffer.alloc(pad4(data.length)));
  return parts;
}

/**
 * The archive for these entries, in the order given (parents before children), every file owned by root with
 * modification time `mtime` (seconds since the epoch).
 */
export function newcArchive(entries: CpioEntry[], mtime = 0): Buffer {
  const parts: Buffer[] = [];
  const seen = new Set<string>();
  entries.forEach((entry, index) => {
    const name = entry.path.replace(/^\/+/, '');
    if (name === '' || name.split('/').includes('..')) throw new Error(`cpio: bad path ${JSON.stringify(entry.path)}`);
    if (seen.has(name)) throw new Error(`cpio: ${name} is in the archive twice`);
    seen.add(name);
    const base = { ino: index + 1, mtime, name, rdevMajor: 0, rdevMinor: 0 };
    switch (entry.type) {
      case 'dir':
        parts.push(...record({ ...base, mode: S_IFDIR | (entry.mode ?? 0o755), nlink: 2, size: 0 }, Buffer.alloc(0)));
        break;
      case 'file':
        parts.push(
          ...record({ ...base, mode: S_IFREG | (entry.mode ?? 0o644), nlink: 1, size: entry.data.length }, entry.data),
        );
        break;
      case 'symlink': {
        const target = Buffer.from(entry.target, 'utf8');
        parts.push(...record({ ...base, mode: S_IFLNK | 0o777, nlink: 1, size: target.length }, target));
        break;
      }
      case 'chardev':
        parts.push(
          ...record(
            {
              ...base,
              mode: S_IFCHR | (entry.mode ?? 0o600),
              nlink: 1,
              size: 0,
              rdevMajor: entry.major,
              rdevMinor: entry.minor,
            },
            Buffer.alloc(0),
          ),
        );
        break;
    }
  });
  const trailer = { ino: 0, mode: 0, nlink: 1, mtime: 0, size: 0, rdevMajor: 0, rdevMinor: 0, name: TRAILER };
  parts.push(...record(trailer, Buffer.alloc(0)));
  return Buffer.concat(parts);
}
