// The two graphs over snapshots (docs/engine.md, "Snapshot store"): the tree, by `parent` (where a VM was), which a
// person sees; and the layer chains, by `layerParent` (which memory layer a diff is written against), which decide
// what the disk must keep. Pure functions over manifests; the store does the I/O.
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
 * Deleted snapshots whose files nothing needs: not on the layer chain of a living snapshot, nor on the chain of a
 * live VM's layer head (the snapshot its next checkpoint diffs against).
 */
export function unneededSnapshots(snapshots: Manifests, liveLayerHeads: Iterable<string>): Set<string> {
  const needed = new Set<string>();
  const keepChain = (head: string) => {
    for (let id: string | null = head; id !== null && !needed.has(id);) {
      const node: Manifest | undefined = snapshots.get(id)?.manifest;
      if (!node) break;
      needed.add(id);
      id = node.layerParent;
    }
  };
  for (const { manifest } of snapshots.values()) if (!manifest.deleted) keepChain(manifest.id);
  for (const head of liveLayerHeads) keepChain(head);
  return new Set([...snapshots.keys()].filter((id) => !needed.has(id)));
}
