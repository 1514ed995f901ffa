// How a list is sorted (docs/ui.md, "Sorting"): a column and a direction, chosen by clicking a column's header
// (again: the other way) and kept in localStorage under `smol.sort.<list>`, so a reload sorts the same way. A stored
// value that names no column of the list (an older version's, or edited by hand) gives the list's default.
import { useCallback, useState } from 'react';

export type Direction = 'asc' | 'desc';

export interface SortOrder<C extends string> {
  column: C;
  direction: Direction;
}

const KEY = (list: string) => `smol.sort.${list}`;

function storage(): Storage | null {
  try {
    return typeof localStorage === 'undefined' ? null : localStorage;
  } catch {
    return null; // a page whose storage is off
  }
}

/** The stored order of `list`, if it names one of `columns`; else `fallback`. */
export function readSortOrder<C extends string>(
  list: string,
  columns: readonly C[],
  fallback: SortOrder<C>,
): SortOrder<C> {
  try {
    const value = JSON.parse(storage()?.getItem(KEY(list)) ?? 'null') as Partial<SortOrder<C>> | null;
    if (value && columns.includes(value.column as C) && (value.direction === 'asc' || value.direction === 'desc')) {
      return { column: value.column as C, direction: value.direction };
    }
  } catch {
    // not JSON: the default
  }
  return fallback;
}

/** A click on `column`'s header: that column, ascending; the same column again: the other direction. */
export function nextSortOrder<C extends string>(
  order: SortOrder<C>,
  column: C,
  first: Direction = 'asc',
): SortOrder<C> {
  if (order.column !== column) return { column, direction: first };
  return { column, direction: order.direction === 'asc' ? 'desc' : 'asc' };
}

/**
 * Sorts `items` by `key` in `direction`; ties by `tie` in the same direction when given, else they keep their order
 * (Array.prototype.sort is stable).
 */
export function sortBy<T>(
  items: readonly T[],
  key: (item: T) => string | number,
  direction: Direction,
  tie?: (item: T) => number,
): T[] {
  const sign = direction === 'asc' ? 1 : -1;
  const keyed = items.map((item) => ({ item, key: key(item), tie: tie ? tie(item) : 0 }));
  keyed.sort((a, b) => {
    const order =
      typeof a.key === 'number' && typeof b.key === 'number'
        ? a.key - b.key
        : String(a.key).localeCompare(String(b.key), undefined, { numeric: true, sensitivity: 'base' });
    return (order || a.tie - b.tie) * sign;
  });
  return keyed.map((k) => k.item);
}

/** The order of one list and the header click that changes it; the choice survives a reload. */
export function useSortOrder<C extends string>(
  list: string,
  columns: readonly C[],
  fallback: SortOrder<C>,
): [SortOrder<C>, (column: C) => void] {
  const [order, setOrder] = useState(() => readSortOrder(list, columns, fallback));
  const choose = useCallback(
    (column: C) =>
      setOrder((current) => {
        const next = nextSortOrder(current, column);
        storage()?.setItem(KEY(list), JSON.stringify(next));
        return next;
      }),
    [list],
  );
  return [order, choose];
}
