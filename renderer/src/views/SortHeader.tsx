// A column header that sorts its list (sort-order.ts): a button, an arrow for the direction, aria-sort for readers.
import type { ReactNode } from 'react';
import type { SortOrder } from '../sort-order.js';

export function SortButton<C extends string>({
  column,
  order,
  choose,
  children,
}: {
  column: C;
  order: SortOrder<C>;
  choose: (column: C) => void;
  children: ReactNode;
}) {
  const active = order.column === column;
  return (
    <button
      className={`sort-button${active ? ' sorted' : ''}`}
      onClick={() => choose(column)}
      title={
        active
          ? `Sorted ${order.direction === 'asc' ? 'ascending' : 'descending'}: click to reverse`
          : 'Sort by this column'
      }
    >
      {children}
      <span className="sort-arrow" aria-hidden="true">
        {active ? (order.direction === 'asc' ? '▲' : '▼') : ''}
      </span>
    </button>
  );
}

/** The aria-sort value of `column`'s header. */
export function ariaSort<C extends string>(column: C, order: SortOrder<C>): 'ascending' | 'descending' | 'none' {
  return order.column !== column ? 'none' : order.direction === 'asc' ? 'ascending' : 'descending';
}

export function SortHeader<C extends string>({
  column,
  order,
  choose,
  className,
  children,
}: {
  column: C;
  order: SortOrder<C>;
  choose: (column: C) => void;
  className?: string;
  children: ReactNode;
}) {
  return (
    <th className={className} aria-sort={ariaSort(column, order)}>
      <SortButton column={column} order={order} choose={choose}>
        {children}
      </SortButton>
    </th>
  );
}
