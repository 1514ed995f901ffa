// The episode's fork tree (React Flow): snapshots as nodes laid out by tree-layout.ts (re-laid out only when the
// tree's shape, the VMs' places or the open chains change), a "you are here" marker for each live VM on its node,
// collapsed chains that open on click, and zoom, pan, a minimap and fit. Cards show their labels; the tree can be
// coloured by a numeric label, with its legend and best branch (TreeLabels.tsx, label-scale.ts).
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
  useStore as useFlowStore,
} from '@xyflow/react';
import { memo, useEffect, useMemo, useRef } from 'react';
import { useShallow } from 'zustand/react/shallow';
import type { Vm } from '../../../src/api/schema.js';
import { useApp, useAppState } from '../app-context.js';
import { formatTime } from '../format.js';
import { snapshotsOf } from '../store/engine-state.js';
import { expandChain, selectSnapshot, selectVm, selectedVmId, shownVmIds, toggleTreeMark } from '../store/selection.js';
import {
  BREADTH_STEP,
  DEPTH_STEP,
  FlowNodeCache,
  NODE_H,
  NODE_W,
  READABLE_ZOOM,
  treeViewport,
  type ChainData,
  type ChainNode,
  type SnapshotNode,
  type TreePaint,
} from './flow-nodes.js';
import { bestBranch, colourOf, formatLabelValue, labelRange, numberOf } from './label-scale.js';
import { TreeLabels } from './TreeLabels.js';
import { useAway } from '../engines/engine-stores.js';
import { layoutTree } from './tree-layout.js';

/** Below READABLE_ZOOM a card's text would be a few pixels high: cards show as blocks instead (names on hover). */
const useFar = () => useFlowStore((s) => s.transform[2] < READABLE_ZOOM);

const SnapshotCard = memo(function SnapshotCard({ data }: NodeProps<SnapshotNode>) {
  const { store } = useApp();
  const far = useFar();
  const { snapshot, here, selected, current, colour, onBest, marked } = data;
  // Its engine out of reach: where the VMs were last seen, their state unknown.
  const away = useAway();
  const labels = Object.entries(snapshot.labels ?? {}).sort(([a], [b]) => a.localeCompare(b));
  const labelText = labels.map(([key, value]) => `${key}=${formatLabelValue(value)}`).join(' ');
  const paint = colour === undefined ? '' : colour === null ? ' unvalued' : ' valued';
  return (
    <div
      className={`tree-node kind-${snapshot.kind}${selected ? ' selected' : ''}${current ? ' current' : ''}${far ? ' far' : ''}${paint}${onBest ? ' on-best' : ''}${marked ? ' marked' : ''}`}
      style={colour ? { ['--node-colour' as string]: colour } : undefined}
      role="treeitem"
      aria-selected={selected}
      aria-label={`Snapshot ${snapshot.name}${labelText ? `, labels ${labelText}` : ''}${onBest ? ', on the best branch' : ''}${marked ? ', marked for side by side' : ''}${here.length ? `, here: ${here.map((vm) => vm.name).join(', ')}` : ''}`}
      title={[snapshot.note || snapshot.name, labelText].filter(Boolean).join('\n')}
    >
      <Handle type="target" position={Position.Left} isConnectable={false} />
      <div className="tree-node-name">{snapshot.name}</div>
      {/* With labels, they take the kind's place (the kind is the card's left border colour). */}
      <div className="tree-node-meta" data-testid={labels.length ? 'node-labels' : undefined}>
        {labels.length ? labelText : `${snapshot.kind} · ${formatTime(snapshot.created)}`}
      </div>
      {here.length > 0 && (
        <div className="here" aria-label="You are here">
          {/* The selected VM's badge first: a card has room for two or three. */}
          {[...here]
            .sort((a, b) => Number(b.id === current) - Number(a.id === current))
            .map((vm) => (
              <button
                key={vm.id}
                className={`here-vm nodrag nopan state-${away ? 'unknown' : vm.state}${vm.id === current ? ' current' : ''}`}
                title={
                  away
                    ? `${vm.name} was last seen here (${vm.state}); ${away}`
                    : `${vm.name} is here (${vm.state}); click to select it`
                }
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
  const far = useFar();
  return (
    <div
      className={`tree-node chain${far ? ' far' : ''}${data.onBest ? ' on-best' : ''}`}
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
const MIN_ZOOM = 0.05;
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
  const hideAutomatic = useAppState((s) => s.hideAutomatic);
  const colourBy = useAppState((s) => s.treeColour.label);
  const bestOf = useAppState((s) => s.treeColour.bestOf);
  const marked = useAppState((s) => s.treeMark);
  // Where a live VM is and the selection: never hidden, never folded into a chain.
  const vmPlaces = vms.filter((vm) => LIVE.has(vm.state)).map((vm) => vm.snapshot ?? '');
  const pinnedKey = [...vmPlaces, selected ?? ''].join(',');
  // A snapshot waiting for its delete is hidden already; its children hang from its parent, as they will. So do
  // automatic checkpoints when the user hides them.
  const snapshots = useMemo(() => {
    const pinned = new Set(pinnedKey.split(','));
    const all = snapshotsOf(base, timeline, snapshotsById);
    const hidden = new Set(pending);
    if (hideAutomatic) for (const s of all) if (s.kind === 'auto' && !pinned.has(s.id)) hidden.add(s.id);
    const shownParent = (id: string | null): string | null =>
      id !== null && hidden.has(id) ? shownParent(snapshotsById[id]?.parent ?? null) : id;
    return all
      .filter((s) => !hidden.has(s.id))
      .map((s) => (hidden.has(s.parent ?? '') ? { ...s, parent: shownParent(s.parent) } : s));
  }, [base, timeline, snapshotsById, pending, hideAutomatic, pinnedKey]);
  const here = useMemo(() => {
    const map = new Map<string, Vm[]>();
    for (const vm of vms) {
      if (!vm.snapshot || !LIVE.has(vm.state)) continue;
      map.set(vm.snapshot, [...(map.get(vm.snapshot) ?? []), vm]);
    }
    return map;
  }, [vms]);
  // Coloured by a label: each valued snapshot's colour on the range of the shown ones, and the best branch.
  const range = useMemo(() => (colourBy ? labelRange(snapshots, colourBy) : null), [snapshots, colourBy]);
  const best = useMemo(
    () => (colourBy && bestOf ? bestBranch(snapshots, colourBy, bestOf) : null),
    [snapshots, colourBy, bestOf],
  );
  const paint = useMemo<TreePaint>(() => {
    const colours = colourBy ? new Map<string, string>() : null;
    if (colours && range) {
      for (const s of snapshots) {
        const value = numberOf(s, colourBy!);
        if (value !== null) colours.set(s.id, colourOf(value, range));
      }
    }
    return { colours, best: new Set(best?.path ?? []), marked };
  }, [snapshots, colourBy, range, best, marked]);
  // The shape: parents, kept ids and open chains; names and notes changing do not re-lay it out.
  const shapeKey = snapshots.map((s) => `${s.id}<${s.parent}`).join(',');
  // Only automatic checkpoints fold into "+N snapshots": named and manual ones, forks and bases stay in view.
  const keepKey = [
    ...here.keys(),
    selected ?? '',
    best?.best ?? '',
    ...snapshots.filter((s) => s.kind !== 'auto').map((s) => s.id),
  ].join(',');
  const layout = useMemo(
    () =>
      layoutTree(
        snapshots.map((s) => ({ id: s.id, parent: s.parent })),
        { keep: new Set(keepKey.split(',')), expanded: new Set(expanded) },
      ),
    [shapeKey, keepKey, expanded],
  );
  // Unchanged cards keep their node objects, so React Flow and the memoised cards skip them (flow-nodes.ts).
  const cache = useRef<FlowNodeCache | null>(null);
  cache.current ??= new FlowNodeCache();
  const nodes = useMemo(
    () => cache.current!.nodesOf(layout, snapshotsById, here, selected, selectedVm, paint),
    [layout, snapshotsById, here, selected, selectedVm, paint],
  );
  const edges = useMemo<Edge[]>(
    () => cache.current!.edgesOf(layout, new Set([...paint.best].map((id) => layout.shownAs.get(id) ?? id))),
    [layout, paint],
  );
  const flow = useRef<ReactFlowInstance<SnapshotNode | ChainNode> | null>(null);
  const box = useRef<HTMLDivElement>(null);
  // The viewport is computed from the layout, not measured: React Flow's own fitView waits for every node to be
  // measured, which never happens for nodes offscreen when only visible ones are rendered (a large tree).
  const focus = useAppState((s) => (s.vmId ? (s.engine.vms[s.vmId]?.snapshot ?? null) : null));
  // Once the user zoomed or panned, the view is theirs: new snapshots never move it, until they press Fit.
  const userMoved = useRef(false);
  // After "Fit", the tree stays fitted whole as it grows (else it opens readable, around its focus).
  const wholeFit = useRef(false);
  const fit = (duration = 0, whole = false) => {
    const instance = flow.current;
    const size = box.current?.getBoundingClientRect();
    if (!instance || !size || size.width === 0) return;
    const shown = focus ? (layout.shownAs.get(focus) ?? null) : null;
    void instance.setViewport(treeViewport(layout, size, MINIMAP_ROOM, shown, whole ? MIN_ZOOM : undefined), {
      duration,
    });
  };
  // Fit when the tree gains or loses nodes (a fork, a checkpoint), not on every selection, and not after the user
  // moved the view.
  useEffect(() => {
    if (userMoved.current) return;
    const timer = setTimeout(() => !userMoved.current && fit(200, wholeFit.current), 30);
    return () => clearTimeout(timer);
  }, [layout.nodes.length]);
  // A snapshot selected from outside the tree (the activity log, a details link) out of view: brought into view at
  // the same zoom. One clicked in the tree is in view already and nothing moves.
  useEffect(() => {
    const instance = flow.current;
    const size = box.current?.getBoundingClientRect();
    const node = selected ? layout.nodes.find((n) => n.id === (layout.shownAs.get(selected) ?? selected)) : undefined;
    if (!instance || !size || !node) return;
    const { x, y, zoom } = instance.getViewport();
    const [left, top] = [node.depth * DEPTH_STEP * zoom + x, node.breadth * BREADTH_STEP * zoom + y];
    if (left >= 0 && top >= 0 && left + NODE_W * zoom <= size.width && top + NODE_H * zoom <= size.height) return;
    void instance.setCenter(node.depth * DEPTH_STEP + NODE_W / 2, node.breadth * BREADTH_STEP + NODE_H / 2, {
      zoom,
      duration: 200,
    });
  }, [selected]);
  if (snapshots.length === 0) {
    return (
      <div className="tree empty" role="tree" aria-label="Fork tree">
        <p>{timeline ? 'No snapshots yet: checkpoint a VM to start the tree.' : 'Loading snapshots…'}</p>
      </div>
    );
  }
  return (
    <div className="tree" role="tree" aria-label="Fork tree">
      {/* Above the flow, not over it: a panel over the tree hid the cards under it. */}
      <TreeLabels snapshots={snapshots} range={range} best={best} />
      <div className="tree-flow" ref={box}>
        <ReactFlow
          nodes={nodes}
          edges={edges}
          nodeTypes={nodeTypes}
          onInit={(instance) => {
            flow.current = instance;
            fit();
          }}
          // A move with an event is the user's (a wheel, a drag); ours (setViewport) have none. onMove, not onMoveStart:
          // a click on a card starts a gesture that moves nothing, and must not count.
          onMove={(event) => {
            if (event) [userMoved.current, wholeFit.current] = [true, false];
          }}
          onNodeClick={(event, node) => {
            if (node.type === 'chain') {
              expandChain(store, episodeId, (node.data as ChainData).first);
            } else if (event.shiftKey || event.ctrlKey || event.metaKey) {
              // A second card beside the selection, for side by side (EpisodeView's tree bar).
              toggleTreeMark(store, node.id === selected ? null : node.id);
            } else selectSnapshot(store, node.id);
          }}
          nodesDraggable={false}
          nodesConnectable={false}
          edgesFocusable={false}
          onlyRenderVisibleElements
          minZoom={MIN_ZOOM}
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
            nodeColor={(node) =>
              node.type === 'chain'
                ? 'var(--line)'
                : ((node.data as SnapshotNode['data']).colour ?? (colourBy ? 'var(--panel-2)' : 'var(--accent)'))
            }
            maskColor="var(--minimap-mask)"
          />
          <Controls
            showInteractive={false}
            showFitView={false}
            aria-label="Zoom and fit"
            onZoomIn={() => ([userMoved.current, wholeFit.current] = [true, false])}
            onZoomOut={() => ([userMoved.current, wholeFit.current] = [true, false])}
          >
            <ControlButton
              onClick={() => {
                [userMoved.current, wholeFit.current] = [false, true];
                fit(200, true);
              }}
              aria-label="Fit the tree"
              title="Fit the whole tree (new snapshots then keep it fitted)"
            >
              ⤢
            </ControlButton>
          </Controls>
        </ReactFlow>
      </div>
    </div>
  );
}
