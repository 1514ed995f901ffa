// The named actions for colouring the fork tree by a label and showing its best branch (STYLE.md: components never
// call setState; docs/ui.md "Labels on the tree").
import type { BestOf } from '../tree/label-scale.js';
import type { AppStore } from './app-store.js';

/** Colours the tree by the numeric label `label`, or by kind only (null, which hides the best branch too). */
export function colourTreeBy(store: AppStore, label: string | null): void {
  store.setState((s) => ({ treeColour: { label, bestOf: label === null ? null : s.treeColour.bestOf } }));
}

/** Shows the path from the root to the highest or lowest value of the colouring label, or no path (null). */
export function showBestBranch(store: AppStore, bestOf: BestOf | null): void {
  store.setState((s) => ({ treeColour: { ...s.treeColour, bestOf } }));
}
