// An episode's activity as rows of a log (docs/ui.md "Activity"), derived from what the store holds, outside React:
// the episode created, each VM started or forked, each checkpoint, each restore (its restore point), each VM's exit,
// and the network refusals the page has loaded or been sent. The engine keeps no event history to ask for, so this
// is what its records say: times are the snapshots' and VMs' own, and an exit has none (it sorts last).
import type { NetworkRefusal, Snapshot, Vm } from '../../../src/api/schema.js';

export const ACTIVITY_KINDS = ['created', 'forked', 'checkpointed', 'restored', 'exited', 'refused'] as const;
export type ActivityKind = (typeof ACTIVITY_KINDS)[number];

export interface ActivityRow {
  id: string;
  /** ISO time; null for an exit (the record keeps no time for it). */
  at: string | null;
  kind: ActivityKind;
  /** The VM it happened to and the snapshot it made or is at: what a click selects. */
  vm: string | null;
  snapshot: string | null;
  text: string;
}

export interface ActivityInput {
  episode: { id: string; name: string; created: string; base: string | null };
  vms: readonly Vm[];
  snapshots: readonly Snapshot[];
  refusals: Readonly<Record<string, readonly NetworkRefusal[]>>;
}

/** The episode's activity, oldest first; rows without a time last. */
export function activityOf({ episode, vms, snapshots, refusals }: ActivityInput): ActivityRow[] {
  const vmName = new Map(vms.map((vm) => [vm.id, vm.name]));
  const snapName = new Map(snapshots.map((s) => [s.id, s.name]));
  const nameOf = (id: string | null) => (id ? (vmName.get(id) ?? 'a removed VM') : 'a VM');
  const rows: ActivityRow[] = [
    {
      id: `episode:${episode.id}`,
      at: episode.created,
      kind: 'created',
      vm: null,
      snapshot: episode.base,
      text: `episode ${episode.name} created`,
    },
  ];
  for (const vm of vms) {
    const at = vm.snapshot;
    rows.push(
      vm.parentVm
        ? {
            id: `vm:${vm.id}`,
            at: vm.created,
            kind: 'forked',
            vm: vm.id,
            snapshot: null,
            text: `${vm.name} forked from ${nameOf(vm.parentVm)}`,
          }
        : { id: `vm:${vm.id}`, at: vm.created, kind: 'created', vm: vm.id, snapshot: null, text: `${vm.name} started` },
    );
    if (vm.exit) {
      const why = vm.exit.message ? `: ${vm.exit.message}` : '';
      rows.push({
        id: `exit:${vm.id}`,
        at: null,
        kind: 'exited',
        vm: vm.id,
        snapshot: at,
        text: `${vm.name} ended (${vm.exit.reason}${why})`,
      });
    }
    for (const refusal of refusals[vm.id] ?? []) {
      const where = refusal.name ?? `${refusal.destination}${refusal.port ? `:${refusal.port}` : ''}`;
      rows.push({
        id: `refused:${vm.id}:${refusal.seq}`,
        at: refusal.at,
        kind: 'refused',
        vm: vm.id,
        snapshot: null,
        text: `${vm.name}: ${refusal.protocol} to ${where} refused (${refusal.rule})`,
      });
    }
  }
  for (const s of snapshots) {
    if (s.kind === 'base') continue; // the episode's creation
    const by = nameOf(s.vm);
    const [kind, text]: [ActivityKind, string] =
      s.kind === 'restore-point'
        ? ['restored', `${by} restored; where it was kept as ${s.name}`]
        : s.kind === 'fork'
          ? ['forked', `fork point ${s.name} of ${by}`]
          : s.kind === 'suspend'
            ? ['checkpointed', `${by} suspended to ${s.name}`]
            : ['checkpointed', `${by} checkpointed ${s.name}${s.kind === 'auto' ? ' (automatic)' : ''}`];
    const parent = s.parent ? snapName.get(s.parent) : undefined;
    rows.push({
      id: `snapshot:${s.id}`,
      at: s.created,
      kind,
      vm: s.vm,
      snapshot: s.id,
      text: parent && kind === 'checkpointed' ? `${text}, after ${parent}` : text,
    });
  }
  const time = (row: ActivityRow) => (row.at === null ? Infinity : Date.parse(row.at));
  return rows
    .map((row, i) => ({ row, i }))
    .sort((a, b) => time(a.row) - time(b.row) || a.i - b.i)
    .map((x) => x.row);
}

/** The rows of the chosen kinds whose text contains `query` (any case). */
export function filterActivity(
  rows: readonly ActivityRow[],
  kinds: ReadonlySet<ActivityKind>,
  query: string,
): ActivityRow[] {
  const needle = query.trim().toLowerCase();
  return rows.filter((row) => kinds.has(row.kind) && (!needle || row.text.toLowerCase().includes(needle)));
}
