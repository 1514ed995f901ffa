// The Back control of a view that is only an address (images, side by side): it names where it goes, the view it
// was opened from (route.ts openView), or the episodes list when it was opened from a link.
import { leaveView, useBackName } from '../route.js';

export function ViewBack() {
  const name = useBackName();
  return (
    <button onClick={leaveView} aria-label={`Back to ${name}`}>
      ← {name.charAt(0).toUpperCase()}
      {name.slice(1)}
    </button>
  );
}
