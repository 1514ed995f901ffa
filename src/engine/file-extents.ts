// Where a file has data, so that packing a .smolmachine reads a sparse memory layer's few MiB of data instead of all
// of its holes (docs/smolmachine.md, "What the figures say"). Node has no lseek: the native addon's dataExtents asks
// the file system with SEEK_DATA/SEEK_HOLE. Without the addon (a checkout where it is not built) the whole file is
// one extent, which is what packing read before: slower, the same bytes.
import { stat } from 'node:fs/promises';
import { loadNative } from '../vmm/native.js';

export type Extent = [start: number, end: number];

/** The [start, end) ranges of `file` that hold data, in order, each start and end a multiple of `page` (or the end). */
export async function dataExtents(file: string, page: number): Promise<{ size: number; extents: Extent[] }> {
  let found: { size: number; extents: Extent[] };
  try {
    found = await loadNative().dataExtents(file);
  } catch (error) {
    if (!/native module/.test((error as Error).message)) throw error;
    const { size } = await stat(file);
    return { size, extents: size > 0 ? [[0, size]] : [] };
  }
  // Pages whole: a file system's data may start or end inside a page; overlapping pages join.
  const extents: Extent[] = [];
  for (const [start, end] of found.extents) {
    const from = Math.floor(start / page) * page;
    const to = Math.min(found.size, Math.ceil(end / page) * page);
    const last = extents.at(-1);
    if (last && from <= last[1]) last[1] = Math.max(last[1], to);
    else if (to > from) extents.push([from, to]);
  }
  return { size: found.size, extents };
}
