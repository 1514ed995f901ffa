// The part of a recording the replay timeline shows (Timeline.tsx): `null` is the whole of it (and grows with the
// recording); a zoomed view is a window [from, to] of seconds inside [0, duration]. Zooming keeps the time under
// the pointer (or the replay position) where it is on the screen; panning slides the window and never past an end.

export interface TimelineView {
  from: number;
  to: number;
}

/** The narrowest window: a tenth of a second, or the whole recording if it is shorter. */
export const MIN_SPAN = 0.1;

/** The window shown: the view, or the whole recording. */
export function windowOf(view: TimelineView | null, duration: number): TimelineView {
  const span = Math.max(duration, 0.001);
  return view ?? { from: 0, to: span };
}

/** A window of `span` seconds with `from` moved inside [0, duration]; the whole recording (null) if it is no narrower. */
function placed(from: number, span: number, duration: number): TimelineView | null {
  if (span >= duration) return null;
  const start = Math.min(Math.max(0, from), duration - span);
  return { from: start, to: start + span };
}

/**
 * Zooms by `factor` (below 1: in) around `anchor`, a time that stays at the same place on the screen: at the same
 * fraction of the window before and after.
 */
export function zoomAround(
  view: TimelineView | null,
  duration: number,
  anchor: number,
  factor: number,
): TimelineView | null {
  const now = windowOf(view, duration);
  const span = now.to - now.from;
  const next = Math.min(duration, Math.max(Math.min(MIN_SPAN, duration), span * factor));
  const at = Math.min(Math.max(anchor, now.from), now.to);
  const fraction = span > 0 ? (at - now.from) / span : 0;
  return placed(at - fraction * next, next, duration);
}

/** Slides the window by `seconds` (negative: earlier). */
export function panBy(view: TimelineView | null, duration: number, seconds: number): TimelineView | null {
  if (!view) return null;
  return placed(view.from + seconds, view.to - view.from, duration);
}

/** A window of the same width centred on `time` (a click on the overview, a marker picked from the list). */
export function centreOn(view: TimelineView | null, duration: number, time: number): TimelineView | null {
  if (!view) return null;
  const span = view.to - view.from;
  return placed(time - span / 2, span, duration);
}

/** The window moved just enough that `time` is in it (playing past its edge turns the page, a tenth kept behind). */
export function keepInView(view: TimelineView | null, duration: number, time: number): TimelineView | null {
  if (!view || (time >= view.from && time <= view.to)) return view;
  const span = view.to - view.from;
  return placed(time - span * 0.1, span, duration);
}
