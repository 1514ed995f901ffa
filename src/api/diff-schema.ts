// The API's diff of two points of an episode (docs/diff.md): what changed on each disk between two snapshots, and
// the console output between them. Browser-safe (zod only).
import { z } from 'zod';
import { Ref } from './schema.js';

export const DiffQuery = z
  .object({
    from: Ref.describe('the earlier snapshot (name or id)'),
    to: Ref.describe('the later snapshot of the same episode'),
  })
  .strict();
export type DiffQuery = z.infer<typeof DiffQuery>;

const EntryType = z.enum(['file', 'dir', 'symlink', 'fifo', 'socket', 'char', 'block', 'unknown']);

const EntryMeta = z.object({
  type: EntryType,
  mode: z.string().describe('permission bits in octal, with setuid, setgid and sticky ("0644", "4755")'),
  uid: z.number().int(),
  gid: z.number().int(),
  size: z.number().int(),
  target: z.string().optional().describe('a symlink’s target'),
});

export const FileChange = z.object({
  path: z.string().describe('from the disk’s root, with a leading slash'),
  change: z.enum(['added', 'removed', 'changed']),
  before: EntryMeta.nullable(),
  after: EntryMeta.nullable(),
  fields: z
    .array(z.enum(['type', 'mode', 'owner', 'size', 'target', 'content', 'times']))
    .describe('what differs, for "changed"'),
  diff: z.string().optional().describe('a unified diff of a changed text file under the size cap'),
  diffNote: z.string().optional().describe('why a changed file has no diff ("binary", "over 65536 bytes")'),
});
export type FileChange = z.infer<typeof FileChange>;

export const DiskDiff = z.object({
  device: z.string().describe('"virtio-blk" (the root disk) or "virtio-blk-N" (volume N)'),
  /** Null when the disk could not be read; `error` says why. */
  error: z.string().nullable(),
  added: z.number().int(),
  removed: z.number().int(),
  changed: z.number().int(),
  files: z.array(FileChange),
  truncated: z.boolean().describe('more changes than the answer holds'),
  problems: z.array(z.string()).describe('what the reader could not read (a corrupt directory, a loop)'),
});
export type DiskDiff = z.infer<typeof DiskDiff>;

const PointRef = z.object({ id: z.string(), name: z.string(), vm: z.string().nullable() });

export const DiffResponse = z.object({
  from: PointRef,
  to: PointRef,
  disks: z.array(DiskDiff),
  console: z.object({
    /** The output recorded between the two points' markers (ANSI sequences kept), null when there is none to give. */
    text: z.string().nullable(),
    /** Why `text` is null or cut ("the two points are on different VMs' recordings"). */
    note: z.string().nullable(),
  }),
  /** Milliseconds the engine spent: exporting the disks, and reading and comparing them. */
  timings: z.object({ exportMs: z.number(), readMs: z.number() }),
});
export type DiffResponse = z.infer<typeof DiffResponse>;
