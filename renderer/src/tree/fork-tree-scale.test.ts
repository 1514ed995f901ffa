// A 5,000-snapshot fork tree in a 1000×600 pane: laid out whole, but React Flow is left with only the cards in view
// to put in the page. The nodes are the ones ForkTree gives React Flow (flowNodes), taken in by React Flow's own
// store code (adoptUserNodes) and culled by the function its renderer uses for onlyRenderVisibleElements
// (getNodesInside, as useVisibleNodeIds calls it), at the viewport the tree opens at (treeViewport) and panned.
import { adoptUserNodes, getNodesInside, type InternalNodeBase, type NodeBase, type Transform } from '@xyflow/system';
import { describe, expect, it } from 'vitest';
import type { Snapshot, Vm } from '../../../src/api/schema.js';
import { flowNodes, treeViewport, type ChainNode, type SnapshotNode } from './flow-nodes.js';
import { layoutTree } from './tree-layout.js';

const EP = 'ep-aaaaaaaaaa';
const T = '2026-12-01T06:00:00.000Z';
const PANE = { width: 1000, height: 600 };
const MINIMAP_ROOM = 190;
const id = (n: number) => `sn-${String(n).padStart(10, '0')}`;

/** An agent's tree: mostly checkpoints along a branch, a fork from an earlier snapshot now and then. */
function agentTree(count: number): Snapshot[] {
  let state = 11;
  const random = () => (state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const tips = [0];
  const snapshots: Snapshot[] = [];
  for (let n = 0; n < count; n++) {
    let parent: number | null = null;
    if (n > 0 && random() < 0.75) {
      const t = Math.floor(random() * tips.length);
      parent = tips[t]!;
      tips[t] = n;
    } else if (n > 0) {
      parent = Math.floor(random() * n);
      tips.push(n);
    }
    snapshots.push({
      ...{ id: id(n), episode: EP, parent: parent === null ? null : id(parent), layerParent: null, vm: null },
      ...{ kind: 'manual', name: `step-${n}`, note: '', created: T, diskBytes: 0, memoryBytes: 0, cpus: 1 },
      deleted: false,
    });
  }
  return snapshots;
}

/** What React Flow renders with onlyRenderVisibleElements at `transform` (its useVisibleNodeIds). */
function rendered(lookup: Map<string, InternalNodeBase<NodeBase>>, transform: Transform): string[] {
  return getNodesInside(lookup, { x: 0, y: 0, ...PANE }, transform, true).map((node) => node.id);
}

describe('a 5,000-snapshot fork tree', () => {
  const snapshots = agentTree(5000);
  const here = snapshots.at(-1)!;
  const vm = {
    ...{ id: 'vm-aaaaaaaaaa', name: 'agent', episode: EP, state: 'running', snapshot: here.id, parentVm: null },
    ...{ created: T, runningSince: T, exit: null, cpus: 1, memoryMiB: 16 },
  } as Vm;
  const layout = layoutTree(
    snapshots.map((s) => ({ id: s.id, parent: s.parent })),
    { keep: new Set([here.id]) },
  );
  const nodes: (SnapshotNode | ChainNode)[] = flowNodes(
    layout,
    Object.fromEntries(snapshots.map((s) => [s.id, s])),
    new Map([[here.id, [vm]]]),
    null,
  );
  const lookup = new Map<string, InternalNodeBase<NodeBase>>();
  adoptUserNodes(nodes as NodeBase[], lookup, new Map());

  it('gives React Flow every card’s size and handles, so it never mounts an unseen card to measure it', () => {
    // Thousands of nodes even with the chains collapsed…
    expect(layout.nodes.length).toBeGreaterThan(3000);
    expect(lookup.size).toBe(layout.nodes.length);
    // …and React Flow counts a node without handle bounds as visible wherever it is.
    const unmeasured = [...lookup.values()].filter((node) => !node.internals.handleBounds).map((node) => node.id);
    expect(unmeasured).toEqual([]);
  });

  it('opens around the running VM’s card and leaves a few dozen cards to render, also after panning', () => {
    const viewport = treeViewport(layout, PANE, MINIMAP_ROOM, layout.shownAs.get(here.id)!);
    const start = rendered(lookup, [viewport.x, viewport.y, viewport.zoom]);
    expect(start).toContain(here.id);
    // 184×58 cards on a 240×80 grid at zoom 0.8: a 1000×600 pane holds about 6 columns of 10.
    expect(start.length).toBeGreaterThan(5);
    expect(start.length).toBeLessThan(100);
    for (const [dx, dy] of [
      [3000, 0],
      [0, -4000],
      [-6000, 2500],
    ] as const) {
      const panned = rendered(lookup, [viewport.x + dx, viewport.y + dy, viewport.zoom]);
      expect(panned.length).toBeLessThan(100);
      expect(panned).not.toEqual(start);
    }
  });

  it('zoomed out to its minimum, still renders far fewer cards than the tree has', () => {
    // minZoom 0.05: the whole 5,000-node tree fits, but the cards are culled to the pane at any zoom.
    const whole = rendered(lookup, [0, 0, 0.05]);
    expect(whole.length).toBeLessThan(layout.nodes.length);
  });
});
