// The diff of two snapshots of one episode (GET /api/v1/diff, docs/diff.md), under the compare view's sides: per
// disk the files added, removed and changed (with a text diff where the engine gave one), its problems or its error,
// and the console output between the two points (escape sequences taken out for reading here).
import { useEffect, useState } from 'react';
import type { ResponseOf } from '../../../src/api/operations.js';
import type { Snapshot } from '../../../src/api/schema.js';
import { useApp } from '../app-context.js';
import { call } from '../transport/transport.js';

type DiffResponse = ResponseOf<'diff'>;

const MARK = { added: '+', removed: '-', changed: '~' } as const;
// CSI and OSC sequences and the other escapes: the console text is shown as text.
// eslint-disable-next-line no-control-regex
const ESCAPES = /\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])|\r/g;

export function DiffPanel({ from, to, close }: { from: Snapshot; to: Snapshot; close: () => void }) {
  const { transport } = useApp();
  const [result, setResult] = useState<{ diff: DiffResponse } | { error: string } | null>(null);
  useEffect(() => {
    let current = true;
    setResult(null);
    call(transport, 'diff', { query: { from: from.id, to: to.id } }).then(
      (diff) => current && setResult({ diff }),
      (error: Error) => current && setResult({ error: error.message }),
    );
    return () => {
      current = false;
    };
  }, [transport, from.id, to.id]);
  return (
    <section className="compare-diff" aria-label="Diff">
      <div className="compare-side-bar">
        <h3>
          Diff: {from.name} → {to.name}
        </h3>
        <div className="spacer" />
        <button onClick={close} aria-label="Close the diff">
          ×
        </button>
      </div>
      {result === null ? (
        <p className="muted" role="status">
          Comparing (the engine exports each disk and reads it in a sandbox)…
        </p>
      ) : 'error' in result ? (
        <p className="error" role="alert">
          The engine could not diff them: {result.error}
        </p>
      ) : (
        <DiffBody diff={result.diff} />
      )}
    </section>
  );
}

function DiffBody({ diff }: { diff: DiffResponse }) {
  const consoleText = diff.console.text?.replace(ESCAPES, '') ?? null;
  return (
    <>
      <h4>Disks</h4>
      {diff.disks.length === 0 ? (
        <p className="muted small">No writable disks to compare (this guest has none).</p>
      ) : (
        diff.disks.map((disk) => (
          <div key={disk.device} className="diff-disk" aria-label={`Disk ${disk.device}`} role="group">
            <strong>{disk.device}</strong>{' '}
            {disk.error ? (
              <span className="error">{disk.error}</span>
            ) : (
              <span className="muted">
                {disk.added} added, {disk.removed} removed, {disk.changed} changed
                {disk.truncated && ' (more than shown)'}
              </span>
            )}
            {disk.problems.length > 0 && <p className="muted small">Not read: {disk.problems.join('; ')}</p>}
            <ul className="diff-files">
              {disk.files.map((file) => (
                <li key={file.path} className={`diff-${file.change}`}>
                  <code>
                    {MARK[file.change]} {file.path}
                  </code>
                  {file.change === 'changed' && <span className="muted small"> {file.fields.join(', ')}</span>}
                  {file.diff && <pre className="diff-text">{file.diff}</pre>}
                  {file.diffNote && <span className="muted small"> ({file.diffNote})</span>}
                </li>
              ))}
            </ul>
          </div>
        ))
      )}
      <h4>Console between the two points</h4>
      {consoleText !== null ? (
        <pre className="screen-text" aria-label="Console between the two points">
          {consoleText || '(no output)'}
        </pre>
      ) : null}
      {diff.console.note && <p className="muted small">{diff.console.note}</p>}
      <p className="muted small">
        Exported in {Math.round(diff.timings.exportMs)} ms, read and compared in {Math.round(diff.timings.readMs)} ms.
      </p>
    </>
  );
}
