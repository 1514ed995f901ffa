// Over the fork tree: "Colour by" a numeric label of its snapshots, the legend of that colouring (lowest to highest,
// and how many have no value, drawn as such on their cards), and the best branch (the path from the root to the
// highest or lowest value), whose end is a click away. docs/ui.md "Labels on the tree".
import type { Snapshot } from '../../../src/api/schema.js';
import { useApp, useAppState } from '../app-context.js';
import { selectSnapshot } from '../store/selection.js';
import { colourTreeBy, showBestBranch } from '../store/tree-colour.js';
import {
  SCALE_GRADIENT,
  formatLabelValue,
  numericLabelKeys,
  type BestBranch,
  type BestOf,
  type LabelRange,
} from './label-scale.js';

export function TreeLabels({
  snapshots,
  range,
  best,
}: {
  snapshots: readonly Snapshot[];
  range: LabelRange | null;
  best: BestBranch | null;
}) {
  const { store } = useApp();
  const colourBy = useAppState((s) => s.treeColour.label);
  const bestOf = useAppState((s) => s.treeColour.bestOf);
  const bestName = useAppState((s) => (best ? (s.engine.snapshots[best.best]?.name ?? best.best) : null));
  const keys = numericLabelKeys(snapshots);
  // A label chosen before its last value went keeps its place in the list (the legend then says none has it).
  if (colourBy && !keys.includes(colourBy)) keys.push(colourBy);
  if (keys.length === 0) return null;
  return (
    <div className="tree-labels nodrag nopan nowheel small" role="group" aria-label="Colour the tree by a label">
      <label className="choice">
        <span className="muted">Colour by</span>
        <select
          aria-label="Colour by label"
          value={colourBy ?? ''}
          onChange={(e) => colourTreeBy(store, e.target.value || null)}
        >
          <option value="">kind</option>
          {keys.map((key) => (
            <option key={key} value={key}>
              {key}
            </option>
          ))}
        </select>
      </label>
      {colourBy && (
        <>
          <div className="legend" role="img" aria-label={legendText(colourBy, range)}>
            {range ? (
              <>
                <span data-testid="legend-min">{formatLabelValue(range.min)}</span>
                <span className="legend-bar" style={{ background: SCALE_GRADIENT }} />
                <span data-testid="legend-max">{formatLabelValue(range.max)}</span>
              </>
            ) : (
              <span className="muted">no snapshot has a number for {colourBy}</span>
            )}
            {range && range.missing > 0 && (
              <span className="legend-missing" title={`Snapshots without a number for ${colourBy}`}>
                <span className="swatch unvalued" /> no {colourBy}: {range.missing}
              </span>
            )}
          </div>
          <label className="choice">
            <span className="muted">Best branch</span>
            <select
              aria-label="Best branch"
              value={bestOf ?? ''}
              onChange={(e) => showBestBranch(store, (e.target.value || null) as BestOf | null)}
            >
              <option value="">off</option>
              <option value="high">highest</option>
              <option value="low">lowest</option>
            </select>
          </label>
          {best && (
            <button
              className="link"
              title="Select the snapshot at the end of the best branch"
              onClick={() => selectSnapshot(store, best.best)}
            >
              {bestOf === 'low' ? 'lowest' : 'highest'}: {bestName} ({colourBy}={formatLabelValue(best.value)})
            </button>
          )}
        </>
      )}
    </div>
  );
}

function legendText(key: string, range: LabelRange | null): string {
  if (!range) return `Coloured by ${key}: no snapshot has a number for it`;
  const missing = range.missing ? `, ${range.missing} without one` : '';
  return `Coloured by ${key}, from ${formatLabelValue(range.min)} to ${formatLabelValue(range.max)}${missing}`;
}
