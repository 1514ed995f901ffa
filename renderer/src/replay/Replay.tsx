// The timeline of one VM: its console recording replayed in a read-only terminal, a scrubber with a marker for
// every checkpoint, fork and restore (zoomable, Timeline.tsx) and the markers as a list to jump from, play at 1x to
// 16x, and "restore here" / "fork here" for the snapshot the scrub position belongs to.
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { useEffect, useMemo, useRef, useState } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useApp, useAppState } from '../app-context.js';
import { TERMINAL_THEME } from '../console/console-sessions.js';
import { useImplicitCr } from '../console/implicit-cr.js';
import { formatClock } from '../format.js';
import { snapshotsOf } from '../store/engine-state.js';
import { openDialog } from '../store/selection.js';
import { outputIndexAt, snapshotAt, type Recording } from './asciicast.js';
import { MarkerList, Timeline } from './Timeline.js';
import { useRecording } from './use-recording.js';

const SPEEDS = [1, 2, 4, 8, 16];

export function Replay({ vmId }: { vmId: string }) {
  const vm = useAppState((s) => s.engine.vms[vmId]);
  const episodeId = vm?.episode ?? '';
  // A new snapshot of this episode adds a marker: fetch the recording again.
  const count = useAppState((s) => s.engine.timeline[episodeId]?.length ?? 0);
  const result = useRecording(vmId, count);
  return (
    <section className="replay" aria-label={`Replay of ${vm?.name ?? vmId}`}>
      {result.state === 'loading' && <p className="muted pad">Loading the recording…</p>}
      {result.state === 'failed' && (
        <p className="error pad" role="alert">
          The recording could not be loaded: {result.message} <button onClick={result.reload}>Retry</button>
        </p>
      )}
      {result.state === 'ready' && (
        <Player
          recording={result.recording}
          problem={result.problem}
          vmId={vmId}
          episodeId={episodeId}
          reload={result.reload}
        />
      )}
    </section>
  );
}

function Player({
  recording,
  vmId,
  episodeId,
  reload,
  problem,
}: {
  recording: Recording;
  vmId: string;
  episodeId: string;
  reload: () => void;
  problem: string | undefined;
}) {
  const { store } = useApp();
  const host = useRef<HTMLDivElement>(null);
  /** The terminal and what it shows: output events [0, shown) of `drawn`, a recording this one continues. */
  const term = useRef<{ terminal: Terminal; fit: FitAddon; shown: number; drawn: Recording } | null>(null);
  // Opens at the end (what the console shows now); a recording fetched again (a new marker) keeps the position.
  const [time, setTime] = useState(recording.duration);
  const [playing, setPlaying] = useState(false);
  const [speed, setSpeed] = useState(1);
  const base = useAppState((s) => s.engine.episodes[episodeId]?.base ?? null);
  const timeline = useAppState(useShallow((s) => s.engine.timeline[episodeId] ?? []));
  const byId = useAppState((s) => s.engine.snapshots);
  const snapshots = useMemo(() => snapshotsOf(base, timeline, byId), [base, timeline, byId]);
  // The terminal is made once per VM (the Player is keyed by it): every recording of one VM has the same size.
  const size = useRef({ cols: recording.width, rows: recording.height });
  // As the live console takes the bytes (console/implicit-cr.ts); set before the first write.
  const implicitCr = useImplicitCr(vmId);
  const convertEol = useRef(implicitCr);
  convertEol.current = implicitCr;
  const duration = recording.duration;

  useEffect(() => {
    const terminal = new Terminal({
      ...size.current,
      convertEol: convertEol.current,
      disableStdin: true,
      theme: TERMINAL_THEME,
      fontSize: 12,
      scrollback: 2000,
      fontFamily: 'ui-monospace, "JetBrains Mono", "DejaVu Sans Mono", monospace',
    });
    const fit = new FitAddon();
    terminal.loadAddon(fit);
    terminal.open(host.current!);
    terminal.textarea?.setAttribute('aria-label', 'Replayed console (read only)');
    term.current = { terminal, fit, shown: 0, drawn: recording };
    const observer = new ResizeObserver(() => host.current?.clientWidth && fit.fit());
    observer.observe(host.current!);
    return () => {
      observer.disconnect();
      terminal.dispose();
      term.current = null;
    };
    // Made once per VM (see `size`): `recording` is only the first one drawn.
  }, []);

  // Draw the screen at `time`: forward by writing what came since, backward (or onto a recording that does not
  // continue the one drawn) by starting over.
  useEffect(() => {
    const t = term.current;
    if (!t) return;
    if (t.drawn !== recording) {
      if (!continues(recording, t.drawn, t.shown)) {
        t.terminal.reset();
        t.shown = 0;
      }
      t.drawn = recording;
    }
    const upTo = outputIndexAt(recording, time);
    if (upTo < t.shown) {
      t.terminal.reset();
      t.shown = 0;
    }
    if (upTo > t.shown) {
      t.terminal.write(
        recording.output
          .slice(t.shown, upTo)
          .map((o) => o.data)
          .join(''),
      );
      t.shown = upTo;
    }
  }, [recording, time]);

  // Playing: each frame moves the position by the time since the last frame, times the speed. The position is read
  // from a ref the frame keeps, not from a state updater's closure (which React runs later).
  const position = useRef(time);
  position.current = time;
  useEffect(() => {
    if (!playing) return;
    let last = performance.now();
    let frame = requestAnimationFrame(function tick(now) {
      const elapsed = Math.max(0, now - last) / 1000;
      last = now;
      const next = Math.min(duration, position.current + elapsed * speed);
      position.current = next;
      setTime(next);
      if (next >= duration) setPlaying(false);
      else frame = requestAnimationFrame(tick);
    });
    return () => cancelAnimationFrame(frame);
  }, [playing, speed, duration]);

  const here = snapshotAt(recording, time, snapshots);
  const seek = (to: number) => {
    setPlaying(false);
    setTime(Math.min(duration, Math.max(0, to)));
  };
  return (
    <div className="player">
      <div className="toolbar small">
        <button
          onClick={() => {
            if (!playing && time >= duration) setTime(0);
            setPlaying(!playing);
          }}
          aria-label={playing ? 'Pause replay' : 'Play replay'}
        >
          {playing ? '❚❚' : '▶'}
        </button>
        <label>
          Speed{' '}
          <select value={speed} onChange={(e) => setSpeed(Number(e.target.value))} aria-label="Replay speed">
            {SPEEDS.map((s) => (
              <option key={s} value={s}>
                {s}x
              </option>
            ))}
          </select>
        </label>
        <span className="clock" aria-live="off">
          {formatClock(time)} / {formatClock(duration)}
        </span>
        <div className="spacer" />
        <button
          disabled={!here}
          title={
            here ? `The VM moves to ${here.snapshot.name} (${here.marker.label})` : 'No snapshot before this point'
          }
          onClick={() => here && openDialog(store, { kind: 'restore', vmId, snapshotId: here.snapshot.id })}
        >
          {here ? `Restore here (${here.snapshot.name})` : 'Restore here'}
        </button>
        <button
          disabled={!here}
          onClick={() => here && openDialog(store, { kind: 'fork', vmId: null, snapshotId: here.snapshot.id })}
        >
          Fork here
        </button>
        <button onClick={reload} aria-label="Load the recording again">
          ⟳
        </button>
      </div>
      <Timeline time={time} duration={duration} markers={recording.markers} seek={seek} />
      {problem && (
        <p className="error small" role="alert">
          Fetching the recording again failed ({problem}): this is the recording as it was.
        </p>
      )}
      {recording.skipped > 0 && (
        <p className="muted small">{recording.skipped} unreadable line(s) of the recording were skipped.</p>
      )}
      <div className="player-body">
        <div className="replay-host" ref={host} data-testid="replay" />
        <MarkerList markers={recording.markers} time={time} seek={seek} />
      </div>
    </div>
  );
}

/** Whether `next` starts with the first `shown` output events of `drawn` (a recording fetched again only grows). */
function continues(next: Recording, drawn: Recording, shown: number): boolean {
  if (shown === 0) return true;
  if (next.output.length < shown) return false;
  const a = next.output[shown - 1]!;
  const b = drawn.output[shown - 1]!;
  return a.time === b.time && a.data === b.data;
}
