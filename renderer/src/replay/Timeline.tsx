// The replay's timeline (docs/ui.md, "Replay"): the position slider with a marker for every checkpoint, fork and
// restore, zoomable (the wheel or a pinch over it zooms around the pointer, a sideways or Shift wheel pans, the − and
// + buttons zoom around the position), with an overview of the whole recording while zoomed (drag it, or use the
// arrow keys on it, to move the window); and the markers as a list to jump from (MarkerList).
import { useEffect, useRef, useState } from 'react';
import { formatClock } from '../format.js';
import type { Marker } from './asciicast.js';
import { centreOn, keepInView, panBy, windowOf, zoomAround, type TimelineView } from './timeline-view.js';

/** Half of the range's thumb: its centre travels from this far inside the range's left edge to as far inside its right. */
const THUMB_HALF = 8;

/** Markers in view get their snapshot's name under them while neighbours are at least this far apart (px). */
const LABEL_ROOM = 72;

export function Timeline({
  time,
  duration,
  markers,
  seek,
}: {
  time: number;
  duration: number;
  markers: Marker[];
  seek: (time: number) => void;
}) {
  const [view, setView] = useState<TimelineView | null>(null);
  const shown = windowOf(view, duration);
  const span = Math.max(shown.to - shown.from, 0.001);
  const bar = useRef<HTMLDivElement>(null);
  const range = useRef<HTMLInputElement>(null);
  const [width, setWidth] = useState(800);
  // The wheel handler is a native one (React's are passive: they cannot keep the page from scrolling); it reads
  // what it needs from here.
  const latest = useRef({ view, duration, time });
  latest.current = { view, duration, time };

  // A position that leaves the window (playing on, a jump) moves the window with it; a recording that grew (a new
  // marker) does not, so a window the user panned away from the position stays where it is.
  const followed = useRef(time);
  useEffect(() => {
    if (time === followed.current) return;
    followed.current = time;
    setView((v) => keepInView(v, duration, time));
  }, [time, duration]);

  useEffect(() => {
    const element = bar.current!;
    const observer = new ResizeObserver(() => setWidth(element.clientWidth || 800));
    observer.observe(element);
    const onWheel = (event: WheelEvent) => {
      const { view: v, duration: d } = latest.current;
      // The time under the pointer: where the thumb would be drawn for it on the range's track.
      const box = range.current!.getBoundingClientRect();
      const track = Math.max(box.width - 2 * THUMB_HALF, 1);
      const now = windowOf(v, d);
      const sideways = event.shiftKey || Math.abs(event.deltaX) > Math.abs(event.deltaY);
      event.preventDefault();
      if (sideways) {
        const delta = event.shiftKey && !event.deltaX ? event.deltaY : event.deltaX;
        setView(panBy(v, d, (delta / track) * (now.to - now.from)));
      } else {
        const fraction = Math.min(1, Math.max(0, (event.clientX - box.left - THUMB_HALF) / track));
        const { time: position } = latest.current;
        const thumb = box.left + THUMB_HALF + ((position - now.from) / (now.to - now.from)) * track;
        // Over the thumb, the position itself stays put (not the time a pixel beside it, which zooming moves away).
        const anchor =
          Math.abs(event.clientX - thumb) <= THUMB_HALF ? position : now.from + fraction * (now.to - now.from);
        // A pinch arrives as a wheel with ctrlKey and small deltas: the same zoom, a finer step.
        const factor = Math.exp(Math.max(-4, Math.min(4, event.deltaY * (event.ctrlKey ? 0.01 : 0.002))));
        setView(zoomAround(v, d, anchor, factor));
      }
    };
    element.addEventListener('wheel', onWheel, { passive: false });
    return () => {
      observer.disconnect();
      element.removeEventListener('wheel', onWheel);
    };
  }, []);

  const inView = markers.filter((m) => m.time >= shown.from && m.time <= shown.to);
  const x = (t: number) => ((t - shown.from) / span) * 100;
  const gaps = inView.map((m, i) => {
    const before = inView[i - 1];
    const after = inView[i + 1];
    const room = (other: Marker | undefined) => (other ? (Math.abs(other.time - m.time) / span) * width : Infinity);
    return Math.min(room(before), room(after));
  });
  const zoom = (factor: number) => setView(zoomAround(view, duration, time, factor));
  return (
    <div className="timeline">
      <div className="timeline-zoom small">
        <button onClick={() => zoom(2)} disabled={!view} aria-label="Zoom the timeline out" title="Zoom out (wheel)">
          −
        </button>
        <button
          onClick={() => zoom(0.5)}
          disabled={span <= Math.min(0.1, duration) + 1e-9}
          aria-label="Zoom the timeline in"
          title="Zoom in around the position (wheel or pinch over the timeline: around the pointer)"
        >
          +
        </button>
        <button onClick={() => setView(null)} disabled={!view}>
          Whole recording
        </button>
        <span className="clock" data-testid="timeline-window">
          {view ? `${formatClock(shown.from)} – ${formatClock(shown.to)}` : 'all'} of {formatClock(duration)}
        </span>
        <span className="muted">
          {inView.length} of {markers.length} markers in view
        </span>
      </div>
      <div className="scrubber" ref={bar}>
        <input
          ref={range}
          type="range"
          min={shown.from}
          max={shown.to}
          // Any value: a zoomed window of a second is a thousand pixels, and a step would snap the thumb off the
          // position. The arrow keys move by a fiftieth of the window, Page Up and Down by a tenth.
          step="any"
          value={Math.min(shown.to, Math.max(shown.from, time))}
          onKeyDown={(e) => {
            const by = { ArrowLeft: -1, ArrowDown: -1, ArrowRight: 1, ArrowUp: 1, PageDown: -5, PageUp: 5 }[e.key];
            if (by !== undefined) {
              e.preventDefault();
              seek(time + (by * span) / 50);
            }
          }}
          aria-label="Replay position"
          aria-valuetext={formatClock(time)}
          onChange={(e) => seek(Number(e.target.value))}
        />
        <div className="markers">
          {inView.map((marker, i) => (
            <button
              key={`${marker.time}-${i}`}
              className={`marker marker-${marker.kind}`}
              style={{ left: `${x(marker.time)}%` }}
              title={`${formatClock(marker.time)} ${marker.label}`}
              aria-label={`Marker: ${marker.label} at ${formatClock(marker.time)}`}
              onClick={() => seek(marker.time)}
            />
          ))}
        </div>
        {inView.some((_, i) => gaps[i]! >= LABEL_ROOM) && (
          <div className="marker-labels small" aria-hidden="true">
            {inView.map((marker, i) =>
              gaps[i]! >= LABEL_ROOM ? (
                <span key={`${marker.time}-${i}`} style={{ left: `${x(marker.time)}%` }}>
                  {marker.snapshotName ?? marker.label}
                </span>
              ) : null,
            )}
          </div>
        )}
      </div>
      {view && <Overview view={view} duration={duration} time={time} markers={markers} setView={setView} />}
    </div>
  );
}

/** The whole recording while zoomed: its markers, the position, and the window shown, which a drag moves. */
function Overview({
  view,
  duration,
  time,
  markers,
  setView,
}: {
  view: TimelineView;
  duration: number;
  time: number;
  markers: Marker[];
  setView: (view: TimelineView | null) => void;
}) {
  const span = Math.max(duration, 0.001);
  const pc = (t: number) => `${(t / span) * 100}%`;
  const step = (view.to - view.from) / 4;
  const at = (event: { clientX: number }, element: Element) => {
    const box = element.getBoundingClientRect();
    return ((event.clientX - box.left) / Math.max(box.width, 1)) * span;
  };
  return (
    <div
      className="timeline-overview"
      role="slider"
      tabIndex={0}
      aria-label="Part of the recording shown"
      aria-valuemin={0}
      aria-valuemax={span}
      aria-valuenow={view.from}
      aria-valuetext={`${formatClock(view.from)} to ${formatClock(view.to)}`}
      onKeyDown={(e) => {
        const by = { ArrowLeft: -step, ArrowRight: step, PageUp: -4 * step, PageDown: 4 * step }[e.key];
        if (by !== undefined) {
          e.preventDefault();
          setView(panBy(view, duration, by));
        }
      }}
      onPointerDown={(e) => {
        const element = e.currentTarget;
        element.setPointerCapture(e.pointerId);
        setView(centreOn(view, duration, at(e, element)));
        const move = (event: PointerEvent) => setView(centreOn(view, duration, at(event, element)));
        const up = () => {
          element.removeEventListener('pointermove', move);
          element.removeEventListener('pointerup', up);
        };
        element.addEventListener('pointermove', move);
        element.addEventListener('pointerup', up);
      }}
    >
      {markers.map((m, i) => (
        <span key={i} className={`overview-tick marker-${m.kind}`} style={{ left: pc(m.time) }} />
      ))}
      <span className="overview-window" style={{ left: pc(view.from), width: pc(view.to - view.from) }} />
      <span className="overview-position" style={{ left: pc(time) }} />
    </div>
  );
}

/** The markers as a list: a click jumps there; the one the position is at (or after) is marked. */
export function MarkerList({ markers, time, seek }: { markers: Marker[]; time: number; seek: (time: number) => void }) {
  const list = useRef<HTMLOListElement>(null);
  const at = markers.findLastIndex((m) => m.time <= time + 1e-6);
  useEffect(() => {
    list.current?.querySelector('[aria-current="true"]')?.scrollIntoView({ block: 'nearest' });
  }, [at]);
  return (
    <nav className="marker-list" aria-label="Markers">
      <div className="marker-list-head small muted">{markers.length} markers</div>
      <ol ref={list}>
        {markers.map((marker, i) => (
          <li key={`${marker.time}-${i}`}>
            <button
              aria-current={i === at ? 'true' : undefined}
              aria-label={`Jump to ${marker.label} at ${formatClock(marker.time)}`}
              onClick={() => seek(marker.time)}
            >
              <span className={`marker-dot marker-${marker.kind}`} aria-hidden="true" />
              <span className="clock">{formatClock(marker.time)}</span>
              <span className="marker-list-label">{marker.label}</span>
            </button>
          </li>
        ))}
        {markers.length === 0 && <li className="muted pad">No snapshots in this recording yet.</li>}
      </ol>
    </nav>
  );
}
