// The labels of a VM or a snapshot in the details pane (docs/labels.md): each as key=value with a button that removes
// it, and one field that sets a label (key=value, a number where the value reads as one, as `smol label` does) or
// changes one already there. Saved with PATCH; the engine's event brings the labels back.
import { useState } from 'react';
import type { Labels, LabelsChange } from '../../../src/api/schema.js';
import { useAppState } from '../app-context.js';
import { connected } from '../store/selection.js';
import { formatLabelValue, labelValueOf } from '../tree/label-scale.js';

export function LabelsEditor({
  what,
  labels,
  busyKey,
  save,
}: {
  /** "VM echo-1", "snapshot step-3": for the controls' names. */
  what: string;
  labels: Labels | undefined;
  /** The key of the save's busy and failure state (operations.ts). */
  busyKey: string;
  save: (change: LabelsChange) => Promise<unknown>;
}) {
  const busy = useAppState((s) => s.busy[busyKey]);
  const failure = useAppState((s) => s.failures[busyKey]);
  const online = useAppState(connected);
  const [text, setText] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const entries = Object.entries(labels ?? {}).sort(([a], [b]) => a.localeCompare(b));
  const set = () => {
    const eq = text.indexOf('=');
    if (eq <= 0) return setProblem(`“${text}”: write key=value, such as reward=0.83`);
    setProblem(null);
    void save({ [text.slice(0, eq).trim()]: labelValueOf(text.slice(eq + 1).trim()) }).then((done) => {
      if (done) setText('');
    });
  };
  return (
    <div className="labels" aria-label={`Labels of ${what}`} role="group">
      {entries.length > 0 ? (
        <ul className="labels-list">
          {entries.map(([key, value]) => (
            <li key={key} className="label-chip" title={typeof value === 'number' ? 'a number' : 'text'}>
              {key}={formatLabelValue(value)}
              <button
                disabled={!!busy || !online}
                aria-label={`Remove label ${key} of ${what}`}
                title={`Remove ${key}`}
                onClick={() => void save({ [key]: null })}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      ) : (
        <p className="muted small">No labels.</p>
      )}
      <form
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          if (text.trim()) set();
        }}
      >
        <input
          value={text}
          placeholder="key=value"
          aria-label={`New label for ${what}`}
          onChange={(e) => setText(e.target.value)}
        />
        <button type="submit" disabled={!text.trim() || !!busy || !online}>
          {busy ?? 'Set label'}
        </button>
      </form>
      {(problem ?? failure) && (
        <p className="error" role="alert">
          {problem ?? failure}
        </p>
      )}
    </div>
  );
}
