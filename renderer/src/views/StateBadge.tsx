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
