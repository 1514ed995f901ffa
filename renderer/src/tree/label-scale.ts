// Labels on the fork tree, outside React (docs/labels.md, docs/ui.md "Labels on the tree"): which numeric labels the
// snapshots carry, the colour of a value on a scale from the lowest to the highest, and the best branch: the path
// from the root to the snapshot with the highest (or lowest) value of a label.
import type { Labels } from '../../../src/api/schema.js';

export interface Labelled {
  id: string;
  parent: string | null;
  labels?: Labels;
}

export type BestOf = 'high' | 'low';

/** The label keys that at least one of `nodes` holds a number under, in key order. */
export function numericLabelKeys(nodes: readonly Labelled[]): string[] {
  const keys = new Set<string>();
  for (const node of nodes) {
    for (const [key, value] of Object.entries(node.labels ?? {})) if (typeof value === 'number') keys.add(key);
  }
  return [...keys].sort((a, b) => a.localeCompare(b));
}

/** The number under `key`, or null: a string value, or none, is no value to colour by. */
export function numberOf(node: Labelled | undefined, key: string): number | null {
  const value = node?.labels?.[key];
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

export interface LabelRange {
  key: string;
  min: number;
  max: number;
  /** Nodes with a number under the key, and without one. */
  valued: number;
  missing: number;
}

/** The lowest and highest value of `key` over `nodes`; null when none has a number there. */
export function labelRange(nodes: readonly Labelled[], key: string): LabelRange | null {
  let [min, max, valued] = [Infinity, -Infinity, 0];
  for (const node of nodes) {
    const value = numberOf(node, key);
    if (value === null) continue;
    [min, max, valued] = [Math.min(min, value), Math.max(max, value), valued + 1];
  }
  return valued === 0 ? null : { key, min, max, valued, missing: nodes.length - valued };
}

/** The scale's stops, low to high (dark blue, teal, green, yellow: readable on the dark and the light theme). */
const STOPS: readonly (readonly [number, number, number])[] = [
  [59, 82, 139],
  [33, 145, 140],
  [94, 201, 98],
  [253, 231, 37],
];

/** The colour at `t` along the scale (0 the lowest, 1 the highest; clamped), as `rgb(r, g, b)`. */
export function scaleColour(t: number): string {
  const at = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(at));
  const [a, b, f] = [STOPS[i]!, STOPS[i + 1]!, at - i];
  const mix = (k: number) => Math.round(a[k]! + (b[k]! - a[k]!) * f);
  return `rgb(${mix(0)}, ${mix(1)}, ${mix(2)})`;
}

/** The colour of `value` in `range`: a range of one value colours it as the highest. */
export function colourOf(value: number, range: Pick<LabelRange, 'min' | 'max'>): string {
  return scaleColour(range.max === range.min ? 1 : (value - range.min) / (range.max - range.min));
}

/** The CSS gradient of the whole scale, low to high, for a legend. */
export const SCALE_GRADIENT = `linear-gradient(to right, ${STOPS.map((_, i) => scaleColour(i / (STOPS.length - 1))).join(', ')})`;

export interface BestBranch {
  /** The snapshot with the best value (the first one in `nodes` order among equals). */
  best: string;
  value: number;
  /** From the root down to `best`, both included. */
  path: string[];
}

/**
 * The path from the root to the node with the highest (`high`) or lowest (`low`) number under `key`; null when none
 * has one. A parent not among `nodes` ends the path there (that node is its root), and so does a cycle.
 */
export function bestBranch(nodes: readonly Labelled[], key: string, bestOf: BestOf): BestBranch | null {
  let best: Labelled | null = null;
  let bestValue = 0;
  for (const node of nodes) {
    const value = numberOf(node, key);
    if (value === null) continue;
    if (best === null || (bestOf === 'high' ? value > bestValue : value < bestValue)) [best, bestValue] = [node, value];
  }
  if (best === null) return null;
  const byId = new Map(nodes.map((node) => [node.id, node]));
  const path: string[] = [];
  const seen = new Set<string>();
  for (let node: Labelled | undefined = best; node && !seen.has(node.id); node = byId.get(node.parent ?? '')) {
    seen.add(node.id);
    path.push(node.id);
  }
  return { best: best.id, value: bestValue, path: path.reverse() };
}

/** A label value typed by a person, as `smol label` reads it: a number where it reads as one, else the text. */
export function labelValueOf(text: string): number | string {
  return /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(text) && Number.isFinite(Number(text)) ? Number(text) : text;
}

/** A value as a card or a legend shows it: numbers with at most 4 significant digits past the point. */
export function formatLabelValue(value: number | string): string {
  if (typeof value === 'string') return value;
  return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(4)));
}

/**
 * A search for a label, as typed in a list's search box: `reward>0.5`, `reward<=0`, `task=fix-1` (a number compares as
 * one, text as equal text); null when `query` is not one, so it is searched as text.
 */
export function labelQuery(query: string): ((labels: Labels | undefined) => boolean) | null {
  const match = /^\s*([A-Za-z_][A-Za-z0-9_.:-]*)\s*(>=|<=|!=|>|<|=)\s*(.*?)\s*$/.exec(query);
  if (!match) return null;
  const [, key, op, text] = match as unknown as [string, string, string, string];
  const wanted = labelValueOf(text);
  return (labels) => {
    const value = labels?.[key];
    if (value === undefined) return op === '!=';
    if (op === '=' || op === '!=') return (String(value) === String(wanted)) === (op === '=');
    if (typeof value !== 'number' || typeof wanted !== 'number') return false;
    return op === '>' ? value > wanted : op === '<' ? value < wanted : op === '>=' ? value >= wanted : value <= wanted;
  };
}
