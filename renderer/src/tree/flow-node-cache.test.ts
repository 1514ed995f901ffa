// A checkpoint arriving in the 89-snapshot, 23-VM tree (issue 23, "Measure"): the nodes ForkTree hands React Flow
// keep their objects where nothing they draw changed, so React Flow and the memoised cards skip them.
import { describe, expect, it } from 'vitest';
import type { Snapshot, Vm } from '../../../src/api/schema.js';
import { FlowNodeCache } from './flow-nodes.js';
import { layoutTree } from './tree-layout.js';

const EP = 'ep-aaaaaaaaaa';
const T = '2026-12-01T06:00:00.000Z';
const id = (n: number) => `sn-${String(n).padStart(10, '0')}`;
const snap = (n: number, parent: number | null, kind: Snapshot['kind'] = 'manual'): Snapshot => ({
  ...{ id: id(n), episode: EP, parent: parent === null ? null : id(parent), layerParent: null, vm: null, kind },
  ...{ name: `s${n}`, note: '', created: T, diskBytes: 0, memoryBytes: 0, cpus: 1, deleted: false },
});
const vm = (n: number, at: number): Vm => ({
  ...{ id: `vm-${String(n).padStart(10, 'a')}`, name: `vm${n}`, episode: EP, state: 'running', snapshot: id(at) },
  ...{ parentVm: null, created: T, runningSince: T, exit: null, cpus: 1, memoryMiB: 16, agent: 'none' as const },
  ...{ ports: [], network: { enabled: false, refused: 0 } },
});

/** The bench's episode: one snapshot forked into 23 VMs, each checkpointed along its own branch, 89 in all. */
function scaleTree() {
  const snapshots = [snap(0, null)];
  const tips = Array.from({ length: 23 }, () => 0);
  for (let n = 1; n < 89; n++) {
    const branch = (n - 1) % 23;
    snapshots.push(snap(n, tips[branch]!));
    tips[branch] = n;
  }
  return { snapshots, vms: tips.map((at, i) => vm(i + 1, at)) };
}

function draw(cache: FlowNodeCache, snapshots: Snapshot[], vms: Vm[]) {
  const here = new Map<string, Vm[]>();
  for (const v of vms) here.set(v.snapshot!, [...(here.get(v.snapshot!) ?? []), v]);
  const layout = layoutTree(
    snapshots.map((s) => ({ id: s.id, parent: s.parent })),
    { keep: new Set([...here.keys(), ...snapshots.filter((s) => s.kind !== 'auto').map((s) => s.id)]) },
  );
  const byId = Object.fromEntries(snapshots.map((s) => [s.id, s]));
  return { nodes: cache.nodesOf(layout, byId, here, null, vms[0]!.id), edges: cache.edgesOf(layout) };
}

describe('a checkpoint arriving in the 89-snapshot tree', () => {
  it('leaves every card it does not change as the same node object, and every edge', () => {
    const { snapshots, vms } = scaleTree();
    const cache = new FlowNodeCache();
    const first = draw(cache, snapshots, vms);
    expect(first.nodes).toHaveLength(89);
    // vm5 checkpoints itself: a new card at the end of its branch, and its "you are here" moves onto it.
    const on = vms[4]!;
    const checkpoint = { ...snap(89, Number(on.snapshot!.slice(3)), 'auto'), vm: on.id };
    const moved = vms.map((v) => (v === on ? { ...v, snapshot: checkpoint.id } : v));
    const second = draw(cache, [...snapshots, checkpoint], moved);
    expect(second.nodes).toHaveLength(90);
    const before = new Map(first.nodes.map((node) => [node.id, node]));
    const changed = second.nodes.filter((node) => before.get(node.id) !== node).map((node) => node.id);
    // The new card and the one vm5 left; nothing else moved.
    expect(changed.sort()).toEqual([on.snapshot!, checkpoint.id].sort());
    const edges = new Set(first.edges);
    expect(second.edges.filter((edge) => !edges.has(edge)).map((edge) => edge.target)).toEqual([checkpoint.id]);
  });

  it('draws a card again when what it shows changes: a VM stopping on it, a rename', () => {
    const { snapshots, vms } = scaleTree();
    const cache = new FlowNodeCache();
    const first = draw(cache, snapshots, vms);
    const stopped = vms.map((v, i) => (i === 2 ? { ...v, state: 'paused' as const } : v));
    const renamed = snapshots.map((s, i) => (i === 10 ? { ...s, name: 'renamed' } : s));
    const second = draw(cache, renamed, stopped);
    const before = new Map(first.nodes.map((node) => [node.id, node]));
    const changed = second.nodes.filter((node) => before.get(node.id) !== node).map((node) => node.id);
    expect(changed.sort()).toEqual([vms[2]!.snapshot!, id(10)].sort());
  });
});

describe('the tree coloured by a label', () => {
  it('draws again only the cards whose colour or best-branch mark changes, and the edges of the branch', () => {
    const { snapshots, vms } = scaleTree();
    const here = new Map<string, Vm[]>();
    const layout = layoutTree(snapshots.map((s) => ({ id: s.id, parent: s.parent })));
    const byId = Object.fromEntries(snapshots.map((s) => [s.id, s]));
    const cache = new FlowNodeCache();
    const plain = cache.nodesOf(layout, byId, here, null, vms[0]!.id);
    const edges = cache.edgesOf(layout);
    // Two snapshots coloured, the path to one of them the best branch.
    const paint = {
      colours: new Map([
        [id(1), 'rgb(1, 2, 3)'],
        [id(24), 'rgb(4, 5, 6)'],
      ]),
      best: new Set([id(0), id(1)]),
    };
    const coloured = cache.nodesOf(layout, byId, here, null, vms[0]!.id, paint);
    const changed = coloured.filter((node, i) => plain[i] !== node);
    // Every card changes (the ones without a value are marked as such), and each says what it is.
    expect(changed).toHaveLength(89);
    const data = (n: number) => coloured.find((node) => node.id === id(n))!.data as { colour?: string | null };
    expect([data(1).colour, data(24).colour, data(2).colour]).toEqual(['rgb(1, 2, 3)', 'rgb(4, 5, 6)', null]);
    const again = cache.nodesOf(layout, byId, here, null, vms[0]!.id, { ...paint });
    expect(again.every((node, i) => node === coloured[i])).toBe(true);
    const bestEdges = cache.edgesOf(layout, paint.best);
    expect(bestEdges.filter((edge) => edge.className === 'best-edge').map((e) => e.id)).toEqual([`${id(0)}>${id(1)}`]);
    expect(bestEdges.filter((edge, i) => edges[i] !== edge)).toHaveLength(1);
  });
});
