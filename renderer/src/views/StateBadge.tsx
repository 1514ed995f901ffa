import type { EpisodeState, VmState } from '../../../src/api/schema.js';

/** A state as a coloured dot and its word (the colour is never the only cue). */
export function StateBadge({ state }: { state: VmState | EpisodeState }) {
  return (
    <span className={`state state-${state}`}>
      <span className="dot" aria-hidden="true" />
      {state}
    </span>
  );
}

/**
 * A state that cannot be known now, its engine out of reach (docs/remote.md, "In the app"): a hollow dot and
 * "unknown", with the state last seen dimmed beside it (`under`: below it, as the list's rows have it).
 */
export function UnknownState({ last, why, under = false }: { last: string; why: string; under?: boolean }) {
  const seen = `last seen ${last}`;
  return (
    <>
      <span className="state state-unknown" title={why}>
        <span className="dot" aria-hidden="true" />
        unknown
      </span>
      {under ? (
        <div className="sub last-seen" title={seen}>
          {seen}
        </div>
      ) : (
        <span className="muted last-seen" title={seen}>
          {seen}
        </span>
      )}
    </>
  );
}
