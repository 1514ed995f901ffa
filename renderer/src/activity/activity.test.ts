// An episode's activity log (activity.ts): what its records say happened, in time order, and the filters.
import { describe, expect, it } from 'vitest';
import type { Snapshot, Vm } from '../../../src/api/schema.js';
import { ACTIVITY_KINDS, activityOf, filterActivity } from './activity.js';

const EP = 'ep-aaaaaaaaaa';
const at = (s: number) => new Date(Date.UTC(2026, 11, 2, 15, 0, s)).toISOString();
const vm = (id: string, name: string, created: number, more: Partial<Vm> = {}): Vm => ({
  ...{ id, name, episode: EP, state: 'running', snapshot: null, parentVm: null, created: at(created) },
  ...{ runningSince: at(created), exit: null, cpus: 1, memoryMiB: 16, agent: 'none' as const },
  ...{ ports: [], network: { enabled: false, refused: 0 }, labels: {} },
  ...more,
});
const snap = (id: string, name: string, kind: Snapshot['kind'], created: number, by: string, parent: string | null) =>
  ({
    ...{ id, episode: EP, parent, layerParent: null, vm: by, kind, name, note: '', created: at(created) },
    ...{ diskBytes: 0, memoryBytes: 0, cpus: 1, deleted: false, labels: {} },
  }) satisfies Snapshot;

const input = {
  episode: { id: EP, name: 'demo-1', created: at(0), base: null },
  vms: [
    vm('vm-a', 'demo-1', 1),
    vm('vm-b', 'demo-1-1', 5, { parentVm: 'vm-a', exit: { reason: 'crashed', code: null, message: 'triple fault' } }),
  ],
  snapshots: [
    snap('sn-1', 'first', 'manual', 3, 'vm-a', null),
    snap('sn-2', 'fork-1', 'fork', 4, 'vm-a', 'sn-1'),
    snap('sn-3', 'auto-1', 'auto', 6, 'vm-a', 'sn-2'),
    snap('sn-4', 'before-restore', 'restore-point', 8, 'vm-a', 'sn-3'),
  ],
  refusals: {
    'vm-a': [
      { seq: 1, at: at(7), destination: '10.0.0.9', port: 443, protocol: 'tcp' as const, rule: 'private' as const },
    ],
  },
};

describe('an episode’s activity', () => {
  it('lists creation, forks, checkpoints, refusals, restores in time order, and exits last', () => {
    const rows = activityOf(input);
    expect(rows.map((r) => [r.kind, r.text])).toEqual([
      ['created', 'episode demo-1 created'],
      ['created', 'demo-1 started'],
      ['checkpointed', 'demo-1 checkpointed first'],
      ['forked', 'fork point fork-1 of demo-1'],
      ['forked', 'demo-1-1 forked from demo-1'],
      ['checkpointed', 'demo-1 checkpointed auto-1 (automatic), after fork-1'],
      ['refused', 'demo-1: tcp to 10.0.0.9:443 refused (private)'],
      ['restored', 'demo-1 restored; where it was kept as before-restore'],
      ['exited', 'demo-1-1 ended (crashed: triple fault)'],
    ]);
    // What a click selects: the snapshot a row made, the VM it happened to.
    const checkpoint = rows.find((r) => r.text.includes('first'))!;
    expect([checkpoint.vm, checkpoint.snapshot]).toEqual(['vm-a', 'sn-1']);
    expect(rows.at(-1)!.at).toBeNull();
  });

  it('filters by kind and by text', () => {
    const rows = activityOf(input);
    const forks = filterActivity(rows, new Set(['forked']), '');
    expect(forks.map((r) => r.id)).toEqual(['snapshot:sn-2', 'vm:vm-b']);
    expect(filterActivity(rows, new Set(ACTIVITY_KINDS), 'AUTO-1').map((r) => r.snapshot)).toEqual(['sn-3']);
    expect(filterActivity(rows, new Set(), '')).toEqual([]);
  });
});
