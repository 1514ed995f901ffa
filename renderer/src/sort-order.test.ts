// @vitest-environment happy-dom
// A list's sort order: a header click sorts by it, again the other way; a stored order that names no column of the
// list is not used.
import { afterEach, describe, expect, it } from 'vitest';
import { nextSortOrder, readSortOrder, sortBy } from './sort-order.js';

const COLUMNS = ['name', 'size'] as const;
const FALLBACK = { column: 'name' as const, direction: 'asc' as const };

afterEach(() => localStorage.clear());

describe('sort order', () => {
  it('a click on a new column sorts ascending by it, a second click descending, a third ascending again', () => {
    const first = nextSortOrder(FALLBACK, 'size');
    expect(first).toEqual({ column: 'size', direction: 'asc' });
    expect(nextSortOrder(first, 'size')).toEqual({ column: 'size', direction: 'desc' });
    expect(nextSortOrder(nextSortOrder(first, 'size'), 'size')).toEqual(first);
  });

  it('sorts numbers as numbers and names as a person reads them, ties in their order', () => {
    const rows = [
      { name: 'vm-10', size: 2 },
      { name: 'vm-9', size: 10 },
      { name: 'VM-1', size: 2 },
    ];
    expect(sortBy(rows, (r) => r.name, 'asc').map((r) => r.name)).toEqual(['VM-1', 'vm-9', 'vm-10']);
    expect(sortBy(rows, (r) => r.size, 'desc').map((r) => r.name)).toEqual(['vm-9', 'vm-10', 'VM-1']);
  });

  it('reads back what was stored, and the default for anything else', () => {
    localStorage.setItem('smol.sort.things', JSON.stringify({ column: 'size', direction: 'desc' }));
    expect(readSortOrder('things', COLUMNS, FALLBACK)).toEqual({ column: 'size', direction: 'desc' });
    localStorage.setItem('smol.sort.things', JSON.stringify({ column: 'colour', direction: 'desc' }));
    expect(readSortOrder('things', COLUMNS, FALLBACK)).toEqual(FALLBACK);
    localStorage.setItem('smol.sort.things', '{not json');
    expect(readSortOrder('things', COLUMNS, FALLBACK)).toEqual(FALLBACK);
    expect(readSortOrder('other', COLUMNS, FALLBACK)).toEqual(FALLBACK);
  });
});
