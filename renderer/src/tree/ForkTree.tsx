// The episode's fork tree (React Flow): snapshots as nodes laid out by tree-layout.ts (re-laid out only when the
// tree's shape, the VMs' places or the open chains change), a "you are here" marker for each live VM on its node,
// collapsed chains that open on click, and zoom, pan, a minimap and fit.
import {
  Background,
  ControlButton,
  Controls,
  Handle,
  MiniMap,
  Position,
  ReactFlow,
  type Edge,
  type NodeProps,
  type ReactFlowInstance,
} from '@xyflow/react';
import { memo, useEffect, useMemo, useRef } from 'react';
import { useShallow } from 'zustand/react/shallow';
import type { Vm } from '../../../src/api/schema.js';
import { useApp, useAppState } from '../app-context.js';
import { formatTime } from '../format.js';
import { snapshotsOf } from '../store/engine-state.js';
import { expandChain, selectSnapshot, selectVm, selectedVmId, shownVmIds } from '../store/selection.js';
import { flowNodes, treeViewport, type ChainData, type ChainNode, type SnapshotNode } from './flow-nodes.js';
import { layoutTree } from './tree-layout.js';

const SnapshotCard = memo(function SnapshotCard({ data }: NodeProps<SnapshotNode>) {
  const { store } = useApp();
  const { snapshot, here, selected, current } = data;
  return (
    <div
      className={`tree-node kind-${snapshot.kind}${selected ? ' selected' : ''}${current ? ' current' : ''}`}
      role="treeitem"
      aria-selected={selected}
      aria-label={`Snapshot ${snapshot.name}${here.length ? `, here: ${here.map((vm) => vm.name).join(', ')}` : ''}`}
      title={snapshot.note || snapshot.name}
    >
      <Handle type="target" position={Position.Left} isConnectable={false} />
      <div className="tree-node-name">{snapshot.name}</div>
      <div className="tree-node-meta">
        {snapshot.kind} · {formatTime(snapshot.created)}
      </div>
      {here.length > 0 && (
        <div className="here" aria-label="You are here">
          {here.map((vm) => (
            <button
              key={vm.id}
              className={`here-vm nodrag nopan state-${vm.state}${vm.id === current ? ' current' : ''}`}
              title={`${vm.name} is here (${vm.state}); click to select it`}
              aria-label={`Select VM ${vm.name}`}
              aria-pressed={vm.id === current}
              onClick={(event) => {
                event.stopPropagation(); // the VM, not the snapshot
                selectVm(store, vm.id);
              }}
            >
              ▶ {vm.name}
            </button>
          ))}
        </div>
      )}
      <Handle type="source" position={Position.Right} isConnectable={false} />
    </div>
  );
});

const ChainCard = memo(function ChainCard({ data }: NodeProps<ChainNode>) {
  return (
    <div
      className="tree-node chain"
      role="treeitem"
      aria-label={`${data.count} snapshots from ${data.from} to ${data.to}, collapsed`}
      title="Click to expand"
    >
      <Handle type="target" position={Position.Left} isConnectable={false} />
      <div className="tree-node-name">+{data.count} snapshots</div>
      <div className="tree-node-meta">
        {data.from} … {data.to}
      </div>
      <Handle type="source" position={Position.Right} isConnectable={false} />
    </div>
  );
});

const MINIMAP_ROOM = 190;
const LIVE = new Set(['running', 'paused', 'creating']);

// Outside the component: React Flow re-creates its node renderers when this object changes.
const nodeTypes = { snapshot: SnapshotCard, chain: ChainCard };

export function ForkTree({ episodeId }: { episodeId: string }) {
  const { store } = useApp();
  const base = useAppState((s) => s.engine.episodes[episodeId]?.base ?? null);
  const timeline = useAppState((s) => s.engine.timeline[episodeId]);
  const snapshotsById = useAppState((s) => s.engine.snapshots);
  const selected = useAppState((s) => s.snapshotId);
  const selectedVm = useAppState(selectedVmId);
  const expanded = useAppState(useShallow((s) => s.expandedChains[episodeId] ?? []));
  // Not the VMs waiting for their delete (hidden already, as in the tabs).
  const vms = useAppState(useShallow((s) => shownVmIds(s, episodeId).map((id) => s.engine.vms[id]!)));
  const pending = useAppState(useShallow((s) => s.pendingDeletes));
  // A snapshot waiting for its delete is hidden already; its children hang from its parent, as they will.
  const snapshots = useMemo(() => {
    const hidden = new Set(pending);
    const all = snapshotsOf(base, timeline, snapshotsById);
    const shownParent = (id: string | null): string | null =>
      id !== null && hidden.has(id) ? shownParent(snapshotsById[id]?.parent ?? null) : id;
    return all
      .filter((s) => !hidden.has(s.id))
      .map((s) => (hidden.has(s.parent ?? '') ? { ...s, parent: shownParent(s.parent) } : s));
  }, [base, timeline, snapshotsById, pending]);
  const here = useMemo(() => {
    const map = new Map<string, Vm[]>();
    for (const vm of vms) {
      if (!vm.snapshot || !LIVE.has(vm.state)) continue;
      map.set(vm.snapshot, [...(map.get(vm.snapshot) ?? []), vm]);
    }
    return map;
  }, [vms]);
  // The shape: parents, kept ids and open chains; names and notes changing do not re-lay it out.
  const shapeKey = snapshots.map((s) => `${s.id}<${s.parent}`).join(',');
  const keepKey = [...here.keys(), selected ?? ''].join(',');
  const layout = useMemo(
    () =>
      layoutTree(
        snapshots.map((s) => ({ id: s.id, parent: s.parent })),
        { keep: new Set(keepKey.split(',')), expanded: new Set(expanded) },
      ),
    [shapeKey, keepKey, expanded],
  );
  const nodes = useMemo(
    () => flowNodes(layout, snapshotsById, here, selected, selectedVm),
    [layout, snapshotsById, here, selected, selectedVm],
  );
  const edges = useMemo<Edge[]>(
    () =>
      layout.edges.map((e) => ({
        id: `${e.source}>${e.target}`,
        source: e.source,
        target: e.target,
        type: 'smoothstep',
      })),
    [layout],
  );
  const flow = useRef<ReactFlowInstance<SnapshotNode | ChainNode> | null>(null);
  const box = useRef<HTMLDivElement>(null);
  // The viewport is computed from the layout, not measured: React Flow's own fitView waits for every node to be
  // measured, which never happens for nodes offscreen when only visible ones are rendered (a large tree).
  const focus = useAppState((s) => (s.vmId ? (s.engine.vms[s.vmId]?.snapshot ?? null) : null));
  const fit = (duration = 0) => {
    const instance = flow.current;
    const size = box.current?.getBoundingClientRect();
    if (!instance || !size || size.width === 0) return;
    const shown = focus ? (layout.shownAs.get(focus) ?? null) : null;
    void instance.setViewport(treeViewport(layout, size, MINIMAP_ROOM, shown), { duration });
  };
  // Fit when the tree gains or loses nodes (a fork, a checkpoint), not on every selection.
  useEffect(() => {
    const timer = setTimeout(() => fit(200), 30);
    return () => clearTimeout(timer);
  }, [layout.nodes.length]);
  if (snapshots.length === 0) {
    return (
      <div className="tree empty" role="tree" aria-label="Fork tree">
        <p>{timeline ? 'No snapshots yet: checkpoint a VM to start the tree.' : 'Loading snapshots…'}</p>
      </div>
    );
  }
  return (
    <div className="tree" role="tree" aria-label="Fork tree" ref={box}>
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        onInit={(instance) => {
          flow.current = instance;
          fit();
        }}
        onNodeClick={(_event, node) => {
          if (node.type === 'chain') {
            expandChain(store, episodeId, (node.data as ChainData).first);
          } else selectSnapshot(store, node.id);
        }}
        nodesDraggable={false}
        nodesConnectable={false}
        edgesFocusable={false}
        onlyRenderVisibleElements
        minZoom={0.05}
        maxZoom={2}
        proOptions={{ hideAttribution: true }}
        colorMode="system"
      >
        <Background gap={24} size={1} />
        <MiniMap
          pannable
          zoomable
          ariaLabel="Fork tree overview"
          style={{ width: 160, height: 100 }}
          nodeColor={(node) => (node.type === 'chain' ? 'var(--line)' : 'var(--accent)')}
          maskColor="var(--minimap-mask)"
        />
        <Controls showInteractive={false} showFitView={false} aria-label="Zoom and fit">
          <ControlButton onClick={() => fit(200)} aria-label="Fit the tree" title="Fit the tree">
            ⤢
          </ControlButton>
        </Controls>
      </ReactFlow>
    </div>
  );
}
