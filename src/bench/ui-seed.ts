// The data `smol bench ui` shows: a throwaway SMOL_HOME holding `episodes` episode records and one episode whose
// fork tree has `snapshots` snapshots, written through the engine's own store (SnapshotStore: publish() and its
// episode records, checked by the engine's EpisodeRecord schema), so the engine that later opens this home loads
// them as its own. Every snapshot is a real one: the echo guest is booted once and checkpointed by the VMM, and
// each published snapshot's `state` and `memory` are hard links to those files (restorable, and free on disk).
import { copyFileSync, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EpisodeRecord, type VmRecord } from '../engine/episode-registry.js';
import { SnapshotStore, newId } from '../engine/snapshot-store.js';
import { Vm } from '../vmm/vm.js';
import { withTimeout } from './vm-create.js';

export interface SeedOptions {
  home: string;
  /** Episodes in the list, the tree's own included. */
  episodes: number;
  /** Snapshots in the tree episode. */
  snapshots: number;
  echoGuest: string;
  smolfile: string;
  progress: (line: string) => void;
}

export interface Seeded {
  treeEpisode: { id: string; name: string };
  /** Nodes the tree shows with every chain collapsed is what the UI lays out; this is the whole count. */
  snapshots: number;
  episodes: number;
}

/** A deterministic pseudo-random sequence (mulberry32), so every run seeds the same tree. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The tree's shape, as an agent's search makes it: mostly checkpoints on from the newest node of a branch (chains),
 * sometimes a fork from an earlier snapshot (a new branch). Returns each node's parent index (-1: the root).
 */
export function agentTreeShape(count: number, seed = 7): number[] {
  const next = random(seed);
  const parents: number[] = [];
  const tips: number[] = [];
  for (let i = 0; i < count; i++) {
    if (i === 0) {
      parents.push(-1);
      tips.push(0);
      continue;
    }
    const roll = next();
    let parent: number;
    if (roll < 0.75) {
      // go on along a branch: replace its tip
      const t = Math.floor(next() * tips.length);
      parent = tips[t]!;
      tips[t] = i;
    } else {
      // fork from any earlier snapshot: a new branch
      parent = Math.floor(next() * i);
      tips.push(i);
    }
    parents.push(parent);
  }
  return parents;
}

/** Boots the echo guest and checkpoints it: the VMM files every seeded snapshot links to. */
async function realSnapshotFiles(echoGuest: string, dir: string): Promise<{ memoryBytes: number }> {
  const vm = await Vm.create({ kernel: echoGuest, memoryMiB: 16 });
  try {
    const ready = new Promise<void>((resolve) => {
      let text = '';
      vm.on('console', (chunk: Buffer) => {
        text += chunk.toString('latin1');
        if (text.includes('echo: ready')) resolve();
      });
    });
    vm.start();
    await withTimeout(ready, 30_000, 'the echo guest printed no "echo: ready" within 30 s');
    await vm.checkpoint(dir);
    return { memoryBytes: 16 << 20 };
  } finally {
    await vm.kill();
    await vm.exited;
  }
}

function vmRecord(episode: string, name: string, snapshot: string | null, created: string): VmRecord {
  return {
    id: newId('vm'),
    name,
    episode,
    state: 'stopped',
    snapshot,
    parentVm: null,
    created,
    runningSince: null,
    exit: { reason: 'killed', code: null, message: 'stopped' },
    cpus: 1,
    memoryMiB: 16,
    layerHead: null,
    suspendedAt: null,
    resumeOnStart: false,
    suspendedPaused: false,
  } as VmRecord;
}

export async function seedUiHome(options: SeedOptions): Promise<Seeded> {
  const { home, progress } = options;
  const store = await SnapshotStore.open(home, (line) => progress(line));
  const text = readFileSync(options.smolfile, 'utf8');
  const record = (id: string, name: string, vms: VmRecord[], created: string) =>
    EpisodeRecord.parse({
      format: 1,
      id,
      name,
      smolfile: { path: options.smolfile, text },
      created,
      base: null,
      vms,
      autoCheckpoint: { everyMs: null, keep: 5 },
      counters: {},
    });

  // The tree: a real snapshot's files, linked into every published snapshot's directory.
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'smol-bench-ui-snap-'));
  const source = path.join(scratch, 'snap');
  try {
    progress('checkpointing the echo guest once: the VMM files every seeded snapshot shares');
    const { memoryBytes } = await realSnapshotFiles(options.echoGuest, source);
    const treeId = newId('ep');
    const treeName = `tree-${options.snapshots}`;
    const vm = vmRecord(treeId, treeName, null, new Date().toISOString());
    const parents = agentTreeShape(options.snapshots);
    const ids: string[] = [];
    // Rewards for the tree coloured by one (docs/ui.md "Labels on the tree"): nine in ten snapshots have one.
    const reward = random(11);
    progress(`publishing ${options.snapshots} snapshots through the engine's snapshot store, with rewards`);
    for (let i = 0; i < parents.length; i++) {
      const id = store.newSnapshotId();
      const dir = store.dirFor(id);
      mkdirSync(dir);
      for (const file of ['state', 'memory']) {
        try {
          linkSync(path.join(source, file), path.join(dir, file));
        } catch {
          copyFileSync(path.join(source, file), path.join(dir, file)); // another file system: a copy
        }
      }
      const parent = parents[i]! < 0 ? null : ids[parents[i]!]!;
      await store.publish({
        id,
        episode: treeId,
        parent,
        vm: vm.id,
        kind: parent === null ? 'manual' : i % 17 === 0 ? 'fork' : 'manual',
        name: `step-${i + 1}`,
        note: i % 50 === 0 ? `branch point ${i / 50}` : '',
        layerParentDir: null,
        memoryBytes,
        cpus: 1,
      });
      if (i % 10 !== 3) await store.update(id, { labels: { reward: Math.round(reward() * 1000) / 1000 } });
      ids.push(id);
      if ((i + 1) % 1000 === 0) progress(`  ${i + 1} snapshots`);
    }
    vm.snapshot = ids.at(-1) ?? null;
    await store.saveEpisodeRecord(treeId, record(treeId, treeName, [vm], new Date().toISOString()));

    progress(`saving ${options.episodes - 1} more episode records through the engine's store`);
    const start = Date.now() - options.episodes * 60_000;
    for (let i = 1; i < options.episodes; i++) {
      const id = newId('ep');
      const name = `agent-run-${String(i).padStart(4, '0')}`;
      const created = new Date(start + i * 60_000).toISOString();
      await store.saveEpisodeRecord(id, record(id, name, [vmRecord(id, name, null, created)], created));
    }
    return { treeEpisode: { id: treeId, name: treeName }, snapshots: ids.length, episodes: options.episodes };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
