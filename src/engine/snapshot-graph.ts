// The graphs over snapshots (docs/engine.md, "Snapshot store"): the tree, by `parent` (where a VM was), which a
// person sees; and the layer chains, by `layerParent` (which memory layer a diff is written against) and
// `diskParent` (which snapshot owns the disk layer below), which decide what the disk must keep. Pure functions over
// manifests; the store does the I/O.
import type { Manifest } from './snapshot-manifest.js';

type Manifests = ReadonlyMap<string, { manifest: Manifest }>;

/**
 * The nearest ancestor of `id` along `parent` edges that `skip` does not pass over, or null for a root. An ancestor
 * that is not in `snapshots` ends the walk as null (the node is shown as a root). Stops on a cycle, which only a
 * hand-edited manifest could make.
 */
export function nearestAncestor(
  snapshots: Manifests,
  id: string,
  skip: (manifest: Manifest) => boolean,
): string | null {
  const seen = new Set([id]);
  let parent = snapshots.get(id)?.manifest.parent ?? null;
  while (parent !== null && !seen.has(parent)) {
    const node = snapshots.get(parent)?.manifest;
    if (!node) return null;
    if (!skip(node)) return parent;
    seen.add(parent);
    parent = node.parent;
  }
  return null;
}

/**
 * Deleted snapshots whose files nothing needs: not on the memory or disk layer chain of a living snapshot, nor on
 * the chains of a live VM's layer head (the snapshot its next checkpoint diffs against, whose disk layer its own
 * sits on).
 */
export function unneededSnapshots(snapshots: Manifests, liveLayerHeads: Iterable<string>): Set<string> {
  const needed = new Set<string>();
  const keepChain = (head: string) => {
    const pending = [head];
    while (pending.length > 0) {
      const id = pending.pop()!;
      const node: Manifest | undefined = snapshots.get(id)?.manifest;
      if (!node || needed.has(id)) continue;
      needed.add(id);
      if (node.layerParent) pending.push(node.layerParent);
      if (node.diskParent) pending.push(node.diskParent);
    }
  };
  for (const { manifest } of snapshots.values()) if (!manifest.deleted) keepChain(manifest.id);
  for (const head of liveLayerHeads) keepChain(head);
  return new Set([...snapshots.keys()].filter((id) => !needed.has(id)));
}
