// New episode's editor for a Smolfile given as text (docs/ui.md, "New episode"): a textarea with line numbers, the
// examples to load into it, and the engine's problems (POST /api/v1/smolfiles/check, asked a moment after the last
// keystroke) marked at their lines in the gutter and listed below it. Start is offered only while the text the
// engine last checked is the text in the editor and it has no errors.
import { useEffect, useRef, useState } from 'react';
import type { SmolfileExamples } from '../../../src/api/schema.js';
import type { ResponseOf } from '../../../src/api/operations.js';
import type { Transport } from '../transport/transport.js';
import { call } from '../transport/transport.js';

/** How long typing pauses before the engine checks the text. */
const CHECK_DELAY_MS = 250;

export interface SmolfileDraft {
  text: string;
  /** Where relative paths start, on the engine's machine; '' for none (relative paths are then errors). */
  directory: string;
}

export interface DraftVerdict {
  /** The check answered for exactly this draft. */
  checked: boolean;
  ok: boolean;
  problems: ResponseOf<'checkSmolfile'>['problems'];
  /** The check itself failed (engine gone, a directory that is not absolute). */
  failure: string | null;
}

const folderOf = (file: string) => file.slice(0, Math.max(1, file.lastIndexOf('/')));

/** Checks `draft` against the engine a moment after it last changed; the verdict is for the current draft only. */
export function useSmolfileCheck(transport: Transport, draft: SmolfileDraft): DraftVerdict {
  const [verdict, setVerdict] = useState<{ for: SmolfileDraft; answer: DraftVerdict } | null>(null);
  useEffect(() => {
    let current = true;
    const timer = setTimeout(() => {
      const body = { text: draft.text, ...(draft.directory ? { directory: draft.directory } : {}) };
      call(transport, 'checkSmolfile', { body }).then(
        (answer) => current && setVerdict({ for: draft, answer: { checked: true, ...answer, failure: null } }),
        (error: Error) =>
          current &&
          setVerdict({ for: draft, answer: { checked: true, ok: false, problems: [], failure: error.message } }),
      );
    }, CHECK_DELAY_MS);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [transport, draft]);
  if (!verdict || verdict.for !== draft) return { checked: false, ok: false, problems: [], failure: null };
  return verdict.answer;
}

export function SmolfileEditor({
  draft,
  onChange,
  verdict,
  examples,
}: {
  draft: SmolfileDraft;
  onChange: (draft: SmolfileDraft) => void;
  verdict: DraftVerdict;
  examples: SmolfileExamples['examples'] | null;
}) {
  const area = useRef<HTMLTextAreaElement>(null);
  /** The example last loaded, shown in the menu (the text may have been edited since). */
  const [loaded, setLoaded] = useState('');
  const gutter = useRef<HTMLDivElement>(null);
  const lines = draft.text.split('\n').length;
  const byLine = new Map<number, DraftVerdict['problems']>();
  for (const problem of verdict.problems) byLine.set(problem.line, [...(byLine.get(problem.line) ?? []), problem]);
  const errors = verdict.problems.filter((p) => p.severity === 'error').length;
  const goTo = (line: number) => {
    const box = area.current;
    if (!box) return;
    const start =
      draft.text
        .split('\n')
        .slice(0, line - 1)
        .join('\n').length + (line > 1 ? 1 : 0);
    box.focus();
    box.setSelectionRange(start, start);
  };
  return (
    <div className="smolfile-editor">
      <div className="row">
        <label className="inline">
          Load an example
          <select
            aria-label="Load an example"
            value={loaded}
            onChange={(e) => {
              const example = examples?.find((x) => x.path === e.target.value);
              if (!example) return;
              setLoaded(example.path);
              onChange({ text: example.text, directory: folderOf(example.path) });
            }}
          >
            <option value="">{examples ? 'Choose…' : 'Loading…'}</option>
            {examples?.map((example) => (
              <option key={example.path} value={example.path}>
                {example.name}
              </option>
            ))}
          </select>
        </label>
      </div>
      <div className="editor-box">
        <div className="gutter" ref={gutter} aria-hidden="true">
          {Array.from({ length: lines }, (_, i) => {
            const here = byLine.get(i + 1);
            const kind = here?.some((p) => p.severity === 'error') ? 'error' : here ? 'warning' : '';
            return (
              <div key={i} className={`gutter-line ${kind}`} title={here?.map((p) => p.message).join('\n')}>
                {i + 1}
              </div>
            );
          })}
        </div>
        <textarea
          ref={area}
          aria-label="Smolfile text"
          spellCheck={false}
          wrap="off"
          value={draft.text}
          placeholder={'kernel = "/abs/path/guest.elf"\nmemory = 16 # MiB'}
          onChange={(e) => onChange({ ...draft, text: e.target.value })}
          onScroll={(e) => {
            if (gutter.current) gutter.current.scrollTop = e.currentTarget.scrollTop;
          }}
          rows={14}
        />
      </div>
      <label>
        Relative paths start from (a folder on the engine’s machine; empty: relative paths are errors)
        <input
          value={draft.directory}
          onChange={(e) => onChange({ ...draft, directory: e.target.value })}
          aria-label="Relative paths start from"
          placeholder="/home/me/project"
          spellCheck={false}
        />
      </label>
      <div className="problems" role="status" aria-label="Smolfile problems">
        {!verdict.checked && <p className="muted">Checking…</p>}
        {verdict.failure && <p className="error">The engine could not check it: {verdict.failure}</p>}
        {verdict.checked && !verdict.failure && verdict.problems.length === 0 && (
          <p className="ok">No problems: ready to start.</p>
        )}
        {verdict.problems.length > 0 && (
          <ul>
            {verdict.problems.map((problem, i) => (
              <li key={i} className={problem.severity}>
                <button type="button" className="link" onClick={() => goTo(problem.line)}>
                  Line {problem.line}
                </button>{' '}
                {problem.severity}: {problem.message}
              </li>
            ))}
          </ul>
        )}
        {errors > 0 && (
          <p className="muted">
            {errors} {errors === 1 ? 'error' : 'errors'}: fix {errors === 1 ? 'it' : 'them'} to start.
          </p>
        )}
      </div>
    </div>
  );
}
