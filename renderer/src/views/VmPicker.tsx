// The VMs of an episode with many of them (VM_PICKER_FROM or more, docs/ui.md "Many VMs"): instead of a strip of
// tabs that runs off the side, a search box that opens a list of the VMs, sortable by name, state or creation, with
// the selected VM's tab beside it so it is always in view. The list is a combobox's listbox: type to filter, the
// arrow keys move, Enter picks, Esc closes; a click picks too. A label column (one label of the VMs', chosen) shows,
// sorts by (VMs without it last) and filters by its value (`reward>0.5` in the search box; docs/labels.md).
import { useEffect, useId, useRef, useState } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useApp, useAppState } from '../app-context.js';
import { sortBy, useSortOrder, type SortOrder } from '../sort-order.js';
import { selectVm } from '../store/selection.js';
import { formatLabelValue, labelQuery } from '../tree/label-scale.js';
import { SortButton } from './SortHeader.js';
import { StateBadge, UnknownState } from './StateBadge.js';
import { useAway } from '../engines/engine-stores.js';

/** From this many VMs on, the episode shows the picker instead of one tab per VM. */
export const VM_PICKER_FROM = 20;

const COLUMNS = ['name', 'state', 'created', 'label'] as const;
type Column = (typeof COLUMNS)[number];
const BY_CREATION: SortOrder<Column> = { column: 'created', direction: 'asc' };

export function VmPicker({ vmIds, selected }: { vmIds: string[]; selected: string | null }) {
  const { store } = useApp();
  const list = useId();
  const input = useRef<HTMLInputElement>(null);
  const [open, setOpen] = useState(false);
  const [query, setQuery] = useState('');
  const [order, sortOn] = useSortOrder('vms', COLUMNS, BY_CREATION);
  // The labels the VMs have, for the label column's choice; the column shows the chosen one (the first by default).
  const labelKeys = useAppState(
    useShallow((s) => [...new Set(vmIds.flatMap((id) => Object.keys(s.engine.vms[id]?.labels ?? {})))].sort()),
  );
  const [chosenLabel, setLabel] = useState<string | null>(null);
  const label = chosenLabel && labelKeys.includes(chosenLabel) ? chosenLabel : (labelKeys[0] ?? null);
  const shown = useAppState(
    useShallow((s) => {
      const needle = query.trim().toLowerCase();
      const byLabel = labelQuery(query);
      const matching = vmIds.filter((id) => {
        const vm = s.engine.vms[id];
        if (!vm) return false;
        if (byLabel) return byLabel(vm.labels);
        const at = vm.snapshot ? (s.engine.snapshots[vm.snapshot]?.name ?? '') : '';
        const labels = Object.entries(vm.labels ?? {}).map(([key, value]) => `${key}=${value}`);
        return !needle || [vm.name, vm.id, vm.state, at, ...labels].some((text) => text.toLowerCase().includes(needle));
      });
      if (order.column === 'label') {
        // VMs without the label come last whichever way it sorts.
        const value = (id: string) => (label ? s.engine.vms[id]!.labels?.[label] : undefined);
        const valued = matching.filter((id) => value(id) !== undefined);
        return [
          ...sortBy(valued, (id) => value(id)!, order.direction),
          ...matching.filter((id) => !valued.includes(id)),
        ];
      }
      return sortBy(
        matching,
        (id) =>
          order.column === 'created'
            ? vmIds.indexOf(id)
            : order.column === 'name'
              ? s.engine.vms[id]!.name
              : s.engine.vms[id]!.state,
        order.direction,
      );
    }),
  );
  // The option the arrow keys are on: the selected VM when the list opens.
  const [active, setActive] = useState<string | null>(null);
  const current =
    active && shown.includes(active) ? active : shown.includes(selected ?? '') ? selected : (shown[0] ?? null);
  useEffect(() => {
    if (open && current) document.getElementById(`${list}-${current}`)?.scrollIntoView({ block: 'nearest' });
  }, [open, current, list, order.column, order.direction]);

  const pick = (id: string) => {
    selectVm(store, id);
    setOpen(false);
    setQuery('');
    setActive(null);
  };
  const move = (by: number) => {
    if (shown.length === 0) return;
    const at = current ? shown.indexOf(current) : -1;
    setActive(shown[Math.min(shown.length - 1, Math.max(0, at + by))]!);
  };
  return (
    <div
      className="vm-picker"
      onBlur={(e) => {
        if (!e.currentTarget.contains(e.relatedTarget as Node | null)) setOpen(false);
      }}
    >
      <input
        ref={input}
        id="vm-search"
        type="search"
        role="combobox"
        aria-label="Find a VM"
        aria-expanded={open}
        aria-controls={list}
        aria-autocomplete="list"
        aria-activedescendant={open && current ? `${list}-${current}` : undefined}
        placeholder={`Find a VM (${vmIds.length})  /`}
        value={query}
        onFocus={() => setOpen(true)}
        onClick={() => setOpen(true)}
        onChange={(e) => {
          setQuery(e.target.value);
          setActive(null);
          setOpen(true);
        }}
        onKeyDown={(e) => {
          if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
            e.preventDefault();
            if (!open) setOpen(true);
            else move(e.key === 'ArrowDown' ? 1 : -1);
          } else if (e.key === 'Home' && open) {
            e.preventDefault();
            setActive(shown[0] ?? null);
          } else if (e.key === 'End' && open) {
            e.preventDefault();
            setActive(shown.at(-1) ?? null);
          } else if (e.key === 'Enter' && open && current) {
            e.preventDefault();
            pick(current);
          } else if (e.key === 'Escape' && open) {
            e.preventDefault();
            e.stopPropagation();
            setOpen(false);
          }
        }}
      />
      {open && (
        <div className="vm-picker-pop" role="group" aria-label="VMs of this episode">
          <div className="vm-picker-head small" role="group" aria-label="Sort the VMs">
            <SortButton column="name" order={order} choose={sortOn}>
              Name
            </SortButton>
            <SortButton column="state" order={order} choose={sortOn}>
              State
            </SortButton>
            <SortButton column="created" order={order} choose={sortOn}>
              Created
            </SortButton>
            {label && (
              <>
                <SortButton column="label" order={order} choose={sortOn}>
                  {label}
                </SortButton>
                {labelKeys.length > 1 && (
                  <select aria-label="Label column" value={label} onChange={(e) => setLabel(e.target.value)}>
                    {labelKeys.map((key) => (
                      <option key={key}>{key}</option>
                    ))}
                  </select>
                )}
              </>
            )}
            <span className="muted">
              {shown.length} of {vmIds.length}
            </span>
          </div>
          <ul className="vm-picker-list" id={list} role="listbox" aria-label="VMs">
            {shown.map((id) => (
              <VmOption
                key={id}
                id={`${list}-${id}`}
                vmId={id}
                selected={id === selected}
                active={id === current}
                label={label}
                pick={() => pick(id)}
              />
            ))}
            {shown.length === 0 && <li className="muted pad">No VM matches “{query}”.</li>}
          </ul>
        </div>
      )}
    </div>
  );
}

function VmOption({
  id,
  vmId,
  selected,
  active,
  label,
  pick,
}: {
  id: string;
  vmId: string;
  selected: boolean;
  active: boolean;
  /** The label column's key. */
  label: string | null;
  pick: () => void;
}) {
  const vm = useAppState((s) => s.engine.vms[vmId]);
  const away = useAway();
  const at = useAppState((s) => {
    const snapshot = s.engine.vms[vmId]?.snapshot;
    return snapshot ? (s.engine.snapshots[snapshot]?.name ?? null) : null;
  });
  if (!vm) return null;
  return (
    <li
      id={id}
      role="option"
      aria-selected={selected}
      className={`vm-option${active ? ' active' : ''}${selected ? ' selected' : ''}`}
      // Keep the focus in the search box: the click picks.
      onMouseDown={(e) => e.preventDefault()}
      onClick={pick}
    >
      <span className="vm-tab-name">{vm.name}</span>
      {away ? <UnknownState last={vm.state} why={away} /> : <StateBadge state={vm.state} />}
      <span className="muted small">{at ? `at ${at}` : ''}</span>
      {label && (
        <span className="vm-option-label small" data-testid="vm-label" title={label}>
          {vm.labels?.[label] === undefined ? '—' : formatLabelValue(vm.labels[label])}
        </span>
      )}
    </li>
  );
}
