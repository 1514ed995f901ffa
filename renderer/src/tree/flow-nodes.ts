// The fork tree's layout turned into what React Flow draws, outside React (STYLE.md): a node per shown snapshot or
// collapsed chain at its grid place, with its size and handles given up front, and the viewport a tree opens at.
import { Position, type Node, type NodeHandle, type Viewport } from '@xyflow/react';
import type { Snapshot, Vm } from '../../../src/api/schema.js';
import type { TreeLayout } from './tree-layout.js';

export const NODE_W = 184;
export const NODE_H = 58;
export const DEPTH_STEP = NODE_W + 56;
export const BREADTH_STEP = NODE_H + 22;
/** Below this zoom, names cannot be read: a large tree is shown around its focus instead of whole. */
export const READABLE_ZOOM = 0.35;
/** The zoom a tree too large to read whole opens at, around its focus. */
export const FOCUS_ZOOM = 0.8;
/**
 * Where each card's handles are, given up front: React Flow renders every node it has not measured yet (to find its
 * handles) before it culls to the visible ones, which for a 5,000-node tree meant mounting every card once.
 */
const HANDLES: NodeHandle[] = [
  { id: null, type: 'target', position: Position.Left, x: 0, y: NODE_H / 2 - 0.5, width: 1, height: 1 },
  { id: null, type: 'source', position: Position.Right, x: NODE_W - 1, y: NODE_H / 2 - 0.5, width: 1, height: 1 },
];

/**
 * `current`: the selected VM is here (its node is highlighted, its badge marked). `colour`: its value's colour when
 * the tree is coloured by a label, null when it has no value there, undefined when the tree is not coloured.
 * `onBest`: on the best branch (label-scale.ts).
 */
export type SnapshotData = {
  snapshot: Snapshot;
  here: Vm[];
  selected: boolean;
  current: string | null;
  colour?: string | null;
  onBest?: boolean;
  /** Marked (shift-click) as the second of a pair for side by side. */
  marked?: boolean;
};
export type ChainData = { count: number; first: string; from: string; to: string; onBest?: boolean };
/** The tree coloured by a label: each valued snapshot's colour, and the best branch's snapshots. */
export interface TreePaint {
  colours: ReadonlyMap<string, string> | null;
  best: ReadonlySet<string>;
  /** The snapshot marked beside the selection for side by side (selection.ts, toggleTreeMark). */
  marked?: string | null;
}
const NO_PAINT: TreePaint = { colours: null, best: new Set() };
export type SnapshotNode = Node<SnapshotData, 'snapshot'>;
export type ChainNode = Node<ChainData, 'chain'>;

export function flowNodes(
  layout: TreeLayout,
  snapshotsById: Readonly<Record<string, Snapshot>>,
  here: ReadonlyMap<string, Vm[]>,
  selected: string | null,
  selectedVm: string | null = null,
  paint: TreePaint = NO_PAINT,
): (SnapshotNode | ChainNode)[] {
  return layout.nodes.map((node) => {
    const position = { x: node.depth * DEPTH_STEP, y: node.breadth * BREADTH_STEP };
    // Sizes are known, so they count as measured: the minimap and culling need no DOM for offscreen nodes.
    const size = { width: NODE_W, height: NODE_H, measured: { width: NODE_W, height: NODE_H }, handles: HANDLES };
    if (node.kind === 'chain') {
      const name = (id: string) => snapshotsById[id]?.name ?? id;
      const data = {
        count: node.ids.length,
        first: node.ids[0]!,
        from: name(node.ids[0]!),
        to: name(node.ids.at(-1)!),
        ...(node.ids.some((id) => paint.best.has(id)) ? { onBest: true } : {}),
      };
      return { id: node.id, type: 'chain', position, data, ...size } satisfies ChainNode;
    }
    const vms = here.get(node.id) ?? [];
    const current = vms.some((vm) => vm.id === selectedVm) ? selectedVm : null;
    const data: SnapshotData = {
      snapshot: snapshotsById[node.id]!,
      here: vms,
      selected: node.id === selected,
      current,
    };
    if (paint.colours) data.colour = paint.colours.get(node.id) ?? null;
    if (paint.best.has(node.id)) data.onBest = true;
    if (paint.marked === node.id) data.marked = true;
    return {
      id: node.id,
      type: 'snapshot',
      position,
      data,
      selected: node.id === selected,
      ...size,
    } satisfies SnapshotNode;
  });
}

/**
 * flowNodes that keeps each node's object from the last call when nothing it draws changed (its place, its snapshot,
 * the VMs on it by id, name and state, its selection), and the edges likewise: React Flow adopts an unchanged node
 * object as it is and its memoised card does not render again, so a checkpoint arriving costs one new card and the
 * nodes it moved, not every card in the tree.
 */
export class FlowNodeCache {
  private nodes = new Map<string, SnapshotNode | ChainNode>();
  private edges = new Map<string, FlowEdge>();

  nodesOf(...args: Parameters<typeof flowNodes>): (SnapshotNode | ChainNode)[] {
    const next = new Map<string, SnapshotNode | ChainNode>();
    const list = flowNodes(...args).map((node) => {
      const old = this.nodes.get(node.id);
      const kept = old && sameNode(old, node) ? old : node;
      next.set(node.id, kept);
      return kept;
    });
    this.nodes = next;
    return list;
  }

  /** `onBest`: the shown nodes on the best branch, whose edges between them are drawn as the branch. */
  edgesOf(layout: TreeLayout, onBest: ReadonlySet<string> = new Set()): FlowEdge[] {
    const next = new Map<string, FlowEdge>();
    const list = layout.edges.map(({ source, target }) => {
      const id = `${source}>${target}`;
      const best = onBest.has(source) && onBest.has(target);
      const old = this.edges.get(id);
      const edge =
        old && (old.className === 'best-edge') === best
          ? old
          : { id, source, target, type: 'smoothstep' as const, ...(best ? { className: 'best-edge' } : {}) };
      next.set(id, edge);
      return edge;
    });
    this.edges = next;
    return list;
  }
}

export type FlowEdge = { id: string; source: string; target: string; type: 'smoothstep'; className?: string };

const sameVms = (a: readonly Vm[], b: readonly Vm[]) =>
  a.length === b.length && a.every((vm, i) => vm.id === b[i]!.id && vm.name === b[i]!.name && vm.state === b[i]!.state);

function sameNode(a: SnapshotNode | ChainNode, b: SnapshotNode | ChainNode): boolean {
  if (a.type !== b.type || a.position.x !== b.position.x || a.position.y !== b.position.y) return false;
  if (a.type === 'chain' || b.type === 'chain') {
    const [x, y] = [a.data as ChainData, b.data as ChainData];
    return x.count === y.count && x.first === y.first && x.from === y.from && x.to === y.to && x.onBest === y.onBest;
  }
  const [x, y] = [a.data, b.data];
  return (
    x.snapshot === y.snapshot &&
    x.selected === y.selected &&
    x.current === y.current &&
    x.colour === y.colour &&
    x.onBest === y.onBest &&
    x.marked === y.marked &&
    sameVms(x.here, y.here)
  );
}

/**
 * The viewport a tree opens at in a pane of `size`, computed from the layout (React Flow's own fitView waits for every
 * node to be measured, which never happens for offscreen nodes when only visible ones are rendered): the whole tree
 * when it can be read so, beside the minimap's `minimapRoom`; else the shown node `focus` (or the newest node) centred
 * at FOCUS_ZOOM.
 */
export function treeViewport(
  layout: TreeLayout,
  size: { width: number; height: number },
  minimapRoom: number,
  focus: string | null,
  /** Fit the whole tree down to this zoom ("Fit"; its cards show as blocks below READABLE_ZOOM). */
  wholeDownTo = READABLE_ZOOM,
): Viewport {
  const width = (layout.depth - 1) * DEPTH_STEP + NODE_W;
  const height = (layout.breadth - 1) * BREADTH_STEP + NODE_H;
  const room = size.width - minimapRoom;
  const fitted = Math.min(1.2, (room * 0.92) / width, (size.height * 0.85) / height);
  const zoom = Math.max(fitted, Math.min(wholeDownTo, READABLE_ZOOM));
  if (fitted >= wholeDownTo) return { x: (room - width * zoom) / 2, y: (size.height - height * zoom) / 2, zoom };
  const target = layout.nodes.find((n) => n.id === focus) ?? layout.nodes.at(-1);
  if (!target) return { x: 0, y: 0, zoom: 1 };
  const cx = target.depth * DEPTH_STEP + NODE_W / 2;
  const cy = target.breadth * BREADTH_STEP + NODE_H / 2;
  return { x: room / 2 - cx * FOCUS_ZOOM, y: size.height / 2 - cy * FOCUS_ZOOM, zoom: FOCUS_ZOOM };
}
