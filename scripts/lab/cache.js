// Entries in <cache>/lab are marked as used on every run and removed after a week unused, so that concurrent runs
// of different checkouts (different init.sh, say) never delete what the other is about to boot.
import fs from 'node:fs';
import path from 'node:path';

const UNUSED_FOR_MS = 7 * 24 * 3600 * 1000;

export function markUsed(entry) {
  const now = new Date();
  fs.utimesSync(entry, now, now);
}

/** Removes `<prefix>*` entries of labDir not marked as used for a week, except `keep`. */
export function pruneUnused(labDir, prefix, keep) {
  for (const name of fs.readdirSync(labDir).filter((n) => n.startsWith(prefix))) {
    const entry = path.join(labDir, name);
    if (entry === keep) continue;
    try {
      if (Date.now() - fs.statSync(entry).mtimeMs > UNUSED_FOR_MS) fs.rmSync(entry, { recursive: true, force: true });
    } catch {
      // removed by a concurrent run
    }
  }
}
