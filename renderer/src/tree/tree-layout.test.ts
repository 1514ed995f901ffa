import { describe, expect, it } from 'vitest';
import { layoutTree, type LayoutNode, type TreeInput } from './tree-layout.js';

/** A deterministic pseudo-random tree: each node's parent is an earlier node, biased to recent ones. */
function randomTree(count: number, seed = 7): TreeInput[] {
  let state = seed;
  const random = () => (state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const nodes: TreeInput[] = [{ id: 'n0', parent: null }];
  for (let i = 1; i < count; i++) {
    const back = Math.floor(random() ** 3 * Math.min(i, 50));
    nodes.push({ id: `n${i}`, parent: `n${i - 1 - back}` });
  }
  return nodes;
}

/** Map.groupBy, which Node 20 lacks. */
function groupBy<T, K>(items: readonly T[], key: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

function chain(count: number, prefix = 'c', parent: string | null = null): TreeInput[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `${prefix}${i}`,
    parent: i === 0 ? parent : `${prefix}${i - 1}`,
  }));
}

function expectNoOverlaps(nodes: LayoutNode[]) {
  const taken = new Map<string, string>();
  for (const node of nodes) {
    // Neighbours on a level are at least one unit apart: rounding to half units cannot merge two of them.
    const key = `${node.depth}:${Math.round(node.breadth * 2)}`;
    expect(taken.get(key), `${node.id} overlaps ${taken.get(key)}`).toBeUndefined();
    taken.set(key, node.id);
  }
  const byLevel = groupBy(nodes, (node) => node.depth);
  for (const level of byLevel.values()) {
    const sorted = level.map((node) => node.breadth).sort((a, b) => a - b);
    for (let i = 1; i < sorted.length; i++) expect(sorted[i]! - sorted[i - 1]!).toBeGreaterThanOrEqual(1 - 1e-9);
  }
}

function expectParentsCentred(layout: ReturnType<typeof layoutTree>) {
  const byId = new Map(layout.nodes.map((node) => [node.id, node]));
  const kids = groupBy(layout.edges, (edge) => edge.source);
  for (const [parent, edges] of kids) {
    const breadths = edges.map((edge) => byId.get(edge.target)!.breadth);
    const mid = (Math.min(...breadths) + Math.max(...breadths)) / 2;
    expect(byId.get(parent)!.breadth).toBeCloseTo(mid, 9);
    for (const edge of edges) expect(byId.get(edge.target)!.depth).toBe(byId.get(parent)!.depth + 1);
  }
}

describe('fork tree layout', () => {
  it('places a fork’s children on the next level, side by side, with the parent centred over them', () => {
    const layout = layoutTree([
      { id: 'base', parent: null },
      { id: 'fork', parent: 'base' },
      { id: 'a', parent: 'fork' },
      { id: 'b', parent: 'fork' },
      { id: 'c', parent: 'fork' },
    ]);
    const at = Object.fromEntries(layout.nodes.map((node) => [node.id, node]));
    expect([at.a!.depth, at.b!.depth, at.c!.depth]).toEqual([2, 2, 2]);
    expect([at.b!.breadth - at.a!.breadth, at.c!.breadth - at.b!.breadth]).toEqual([1, 1]);
    expect(at.fork!.breadth).toBe(at.b!.breadth);
    expect(layout.breadth).toBe(3);
    expectParentsCentred(layout);
  });

  it('packs subtrees by their contours: a deep branch does not push a shallow sibling’s far descendants', () => {
    const input: TreeInput[] = [
      { id: 'r', parent: null },
      { id: 'l', parent: 'r' },
      { id: 'm', parent: 'r' },
      { id: 'x', parent: 'r' },
      { id: 'l1', parent: 'l' },
      { id: 'l2', parent: 'l' },
      { id: 'x1', parent: 'x' },
      { id: 'x2', parent: 'x' },
    ];
    const layout = layoutTree(input);
    expectNoOverlaps(layout.nodes);
    expectParentsCentred(layout);
    expect(layout.breadth).toBe(4); // l1 l2 | x1 x2 on level 2; m fits between l and x on level 1
  });

  it('lays out a 5,000-snapshot tree without overlaps, parents centred, in well under a second', () => {
    const input = randomTree(5000);
    const started = performance.now();
    const layout = layoutTree(input, { minChain: Infinity });
    const took = performance.now() - started;
    expect(layout.nodes).toHaveLength(5000);
    expectNoOverlaps(layout.nodes);
    expectParentsCentred(layout);
    expect(took).toBeLessThan(500);
  });

  it('handles a 5,000-deep chain without recursion, and collapses it to one node', () => {
    const input = chain(5000);
    const expanded = layoutTree(input, { minChain: Infinity });
    expect(expanded.depth).toBe(5000);
    const collapsed = layoutTree(input);
    // The root and the leaf stay; the 4,998 one-child nodes between them become one chain node.
    expect(collapsed.nodes.map((node) => node.kind)).toEqual(['snapshot', 'chain', 'snapshot']);
    const node = collapsed.nodes[1]!;
    expect(node.kind === 'chain' && node.ids.length).toBe(4998);
    expect(collapsed.shownAs.get('c2500')).toBe(node.id);
    expect(collapsed.edges).toEqual([
      { source: 'c0', target: node.id },
      { source: node.id, target: 'c4999' },
    ]);
  });

  it('keeps forks, kept nodes and short runs out of chains, and expands a chain on request', () => {
    const input = [...chain(10), { id: 'side', parent: 'c5' }];
    const layout = layoutTree(input, { keep: new Set(['c3']) });
    const kinds = layout.nodes.map((node) => (node.kind === 'chain' ? `chain(${node.ids.join(',')})` : node.id));
    // c1 c2 are a run of 2 (too short); c3 is kept; c4 alone; c5 forks; c6..c8 a run of 3.
    expect(kinds).toEqual(['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8', 'c9', 'side']);
    const long = layoutTree(chain(10), { minChain: 3 });
    expect(long.nodes.map((node) => node.id)).toEqual(['c0', 'chain:c1', 'c9']);
    const opened = layoutTree(chain(10), { minChain: 3, expanded: new Set(['c1']) });
    expect(opened.nodes.map((node) => node.id)).toEqual(chain(10).map((node) => node.id));
    expectParentsCentred(opened);
  });

  it('lays out several roots side by side and treats an unknown parent as a root', () => {
    const layout = layoutTree([
      { id: 'a', parent: null },
      { id: 'a1', parent: 'a' },
      { id: 'orphan', parent: 'sn-gone' },
      { id: 'o1', parent: 'orphan' },
      { id: 'o2', parent: 'orphan' },
    ]);
    expectNoOverlaps(layout.nodes);
    expect(layout.nodes.filter((node) => node.depth === 0).map((node) => node.id)).toEqual(['a', 'orphan']);
    expect(Math.min(...layout.nodes.map((node) => node.breadth))).toBe(0);
  });

  it('breaks a cycle instead of losing its nodes', () => {
    const layout = layoutTree([
      { id: 'root', parent: null },
      { id: 'x', parent: 'z' },
      { id: 'y', parent: 'x' },
      { id: 'z', parent: 'y' },
    ]);
    expect(layout.nodes.map((node) => node.id).sort()).toEqual(['root', 'x', 'y', 'z']);
    expectNoOverlaps(layout.nodes);
    expect(layout.edges).toEqual([
      { source: 'x', target: 'y' },
      { source: 'y', target: 'z' },
    ]);
  });
});
