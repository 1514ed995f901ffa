// The fork tree's layout, outside React (STYLE.md): a tidy tree in the manner of Reingold and Tilford, time flowing
// left to right. Each subtree is laid out on its own, then its children's subtrees are packed as close as their
// contours (the extreme positions on every level) allow, and the parent is centred between its first and last child.
// Contours are kept deepest level first with a lazy offset, and the shallower of two is merged into the deeper one,
// so a 5,000-node tree takes milliseconds. Long linear chains collapse into one node until expanded.

export interface TreeInput {
  id: string;
  /** The tree edge; null, or an id not in the input, makes a root. */
  parent: string | null;
}

export interface LayoutOptions {
  /** Ids never hidden in a chain (a VM's "you are here", the selection). */
  keep?: ReadonlySet<string>;
  /** Chains expanded by the user, named by their first node's id. */
  expanded?: ReadonlySet<string>;
  /** A run of at least this many one-child nodes collapses (default 4). */
  minChain?: number;
}

export type LayoutNode =
  | { kind: 'snapshot'; id: string; depth: number; breadth: number }
  /** A collapsed run: `ids` in order, parent first; its id is `chain:` and the first node's id. */
  | { kind: 'chain'; id: string; ids: string[]; depth: number; breadth: number };

export interface TreeLayout {
  /** Positions in grid units: `depth` along time (the level), `breadth` across (one unit between neighbours). */
  nodes: LayoutNode[];
  edges: { source: string; target: string }[];
  /** The shown node each input id is drawn in (itself, or the chain that holds it). */
  shownAs: Map<string, string>;
  depth: number;
  breadth: number;
}

interface Contour {
  /** Deepest level first: the last element is the subtree's root level. Values plus `off` are positions. */
  left: number[];
  right: number[];
  off: number;
}

/** The tree as shown: chains collapsed into single nodes; returns each shown node's children and the roots. */
function collapse(input: readonly TreeInput[], options: LayoutOptions) {
  const known = new Set(input.map((n) => n.id));
  const children = new Map<string, string[]>();
  const roots: string[] = [];
  for (const node of input) {
    if (node.parent !== null && node.parent !== node.id && known.has(node.parent)) {
      const list = children.get(node.parent);
      if (list) list.push(node.id);
      else children.set(node.parent, [node.id]);
    } else roots.push(node.id);
  }
  // A cycle (a corrupt store could name one) has no root: its first node becomes one, so nothing is lost.
  const reached = new Set<string>();
  const reach = (from: string) => {
    const stack = [from];
    while (stack.length) {
      const id = stack.pop()!;
      if (reached.has(id)) continue;
      reached.add(id);
      for (const kid of children.get(id) ?? []) stack.push(kid);
    }
  };
  for (const root of roots) reach(root);
  if (reached.size < known.size) {
    for (const node of input) {
      if (reached.has(node.id)) continue;
      roots.push(node.id);
      // Its parent's edge to it would close the cycle again.
      const siblings = children.get(node.parent!)!;
      siblings.splice(siblings.indexOf(node.id), 1);
      reach(node.id);
    }
  }
  const keep = options.keep ?? new Set<string>();
  const expanded = options.expanded ?? new Set<string>();
  const minChain = options.minChain ?? 4;
  // A node may hide in a chain when it has exactly one child, is not a root and is not kept.
  const isRoot = new Set(roots);
  const plain = (id: string) => !isRoot.has(id) && !keep.has(id) && children.get(id)?.length === 1;
  const shown = new Map<string, string[]>(); // shown id -> shown children
  const chains = new Map<string, string[]>();
  const shownAs = new Map<string, string>();
  const open = new Set<string>(); // members of expanded chains
  const stack = [...roots].reverse();
  const visit = (id: string): string => {
    // A chain starts here when this node and enough after it are plain and the user did not expand it.
    if (plain(id) && !open.has(id)) {
      const run: string[] = [];
      for (let at: string | undefined = id; at !== undefined && plain(at); at = children.get(at)![0]) run.push(at);
      if (expanded.has(id) || run.length < minChain) {
        for (const member of run) open.add(member); // shown one by one; not measured again from each member
      } else {
        const chainId = `chain:${id}`;
        chains.set(chainId, run);
        for (const member of run) shownAs.set(member, chainId);
        const next = children.get(run.at(-1)!)![0]!;
        shown.set(chainId, [next]);
        stack.push(next);
        return chainId;
      }
    }
    shownAs.set(id, id);
    const kids = children.get(id) ?? [];
    shown.set(id, kids);
    for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]!);
    return id;
  };
  // Iterative (a 5,000-deep chain would overflow recursion); children are visited after their parent.
  const rename = new Map<string, string>();
  while (stack.length) {
    const id = stack.pop()!;
    rename.set(id, visit(id));
  }
  // Chains replace their first member among their parent's children.
  for (const [id, kids] of shown)
    shown.set(
      id,
      kids.map((kid) => rename.get(kid) ?? kid),
    );
  return { shown, chains, shownAs, roots: roots.map((root) => rename.get(root) ?? root) };
}

export function layoutTree(input: readonly TreeInput[], options: LayoutOptions = {}): TreeLayout {
  const { shown, chains, shownAs, roots } = collapse(input, options);
  const VIRTUAL = '\u0000root';
  shown.set(VIRTUAL, roots);
  // Post-order without recursion.
  const order: string[] = [];
  const stack = [VIRTUAL];
  while (stack.length) {
    const id = stack.pop()!;
    order.push(id);
    const kids = shown.get(id) ?? [];
    for (let k = kids.length - 1; k >= 0; k--) stack.push(kids[k]!);
  }
  const contours = new Map<string, Contour>();
  const relative = new Map<string, number>(); // a child's position relative to its parent
  for (let i = order.length - 1; i >= 0; i--) {
    const id = order[i]!;
    const kids = shown.get(id) ?? [];
    if (kids.length === 0) {
      contours.set(id, { left: [0], right: [0], off: 0 });
      continue;
    }
    let acc = contours.get(kids[0]!)!;
    contours.delete(kids[0]!);
    const shifts = [0];
    for (let k = 1; k < kids.length; k++) {
      const c = contours.get(kids[k]!)!;
      contours.delete(kids[k]!);
      const [la, lc] = [acc.left.length, c.left.length];
      const common = Math.min(la, lc);
      let shift = -Infinity;
      for (let d = 0; d < common; d++) {
        shift = Math.max(shift, acc.right[la - 1 - d]! + acc.off - (c.left[lc - 1 - d]! + c.off) + 1);
      }
      shifts.push(shift);
      if (lc <= la) {
        for (let d = 0; d < common; d++) acc.right[la - 1 - d] = c.right[lc - 1 - d]! + c.off + shift - acc.off;
      } else {
        c.off += shift;
        for (let d = 0; d < common; d++) c.left[lc - 1 - d] = acc.left[la - 1 - d]! + acc.off - c.off;
        acc = c;
      }
    }
    const centre = (shifts[0]! + shifts.at(-1)!) / 2;
    kids.forEach((kid, k) => relative.set(kid, shifts[k]! - centre));
    acc.off -= centre;
    acc.left.push(-acc.off);
    acc.right.push(-acc.off);
    contours.set(id, acc);
  }
  // Pre-order: absolute positions; the virtual root's level is -1.
  const nodes: LayoutNode[] = [];
  const edges: { source: string; target: string }[] = [];
  const place = new Map<string, { depth: number; breadth: number }>([[VIRTUAL, { depth: -1, breadth: 0 }]]);
  let minBreadth = Infinity;
  let maxBreadth = -Infinity;
  let maxDepth = 0;
  for (const id of order) {
    const at = place.get(id)!;
    for (const kid of shown.get(id) ?? []) {
      const spot = { depth: at.depth + 1, breadth: at.breadth + relative.get(kid)! };
      place.set(kid, spot);
      minBreadth = Math.min(minBreadth, spot.breadth);
      maxBreadth = Math.max(maxBreadth, spot.breadth);
      maxDepth = Math.max(maxDepth, spot.depth);
      if (id !== VIRTUAL) edges.push({ source: id, target: kid });
    }
  }
  for (const id of order) {
    if (id === VIRTUAL) continue;
    const { depth, breadth } = place.get(id)!;
    const members = chains.get(id);
    const b = breadth - minBreadth;
    nodes.push(
      members ? { kind: 'chain', id, ids: members, depth, breadth: b } : { kind: 'snapshot', id, depth, breadth: b },
    );
  }
  return {
    nodes,
    edges,
    shownAs,
    depth: nodes.length ? maxDepth + 1 : 0,
    breadth: nodes.length ? maxBreadth - minBreadth + 1 : 0,
  };
}
