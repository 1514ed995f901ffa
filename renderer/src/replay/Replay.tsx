// The timeline of one VM: its console recording replayed in a read-only terminal, a scrubber with a marker for
// every checkpoint, fork and restore, play at 1x to 16x, and "restore here" / "fork here" for the snapshot the
// scrub position belongs to.
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { useEffect, useMemo, useRef, useState } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useApp, useAppState } from '../app-context.js';
import { TERMINAL_THEME } from '../console/console-sessions.js';
import { formatClock } from '../format.js';
import { snapshotsOf } from '../store/engine-state.js';
import { outputIndexAt, snapshotAt, type Recording } from './asciicast.js';
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
        <Player recording={result.recording} vmId={vmId} episodeId={episodeId} reload={result.reload} />
      )}
    </section>
  );
}

function Player({
  recording,
  vmId,
  episodeId,
  reload,
}: {
  recording: Recording;
  vmId: string;
  episodeId: string;
  reload: () => void;
}) {
  const { store } = useApp();
  const host = useRef<HTMLDivElement>(null);
  const term = useRef<{ terminal: Terminal; fit: FitAddon; shown: number } | null>(null);
  const [time, setTime] = useState(recording.duration);
  const [playing, setPlaying] = useState(false);
  const [speed, setSpeed] = useState(1);
  const base = useAppState((s) => s.engine.episodes[episodeId]?.base ?? null);
  const timeline = useAppState(useShallow((s) => s.engine.timeline[episodeId] ?? []));
  const byId = useAppState((s) => s.engine.snapshots);
  const snapshots = useMemo(() => snapshotsOf(base, timeline, byId), [base, timeline, byId]);

  useEffect(() => {
    const terminal = new Terminal({
      cols: recording.width,
      rows: recording.height,
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
    term.current = { terminal, fit, shown: 0 };
    const observer = new ResizeObserver(() => host.current?.clientWidth && fit.fit());
    observer.observe(host.current!);
    return () => {
      observer.disconnect();
      terminal.dispose();
      term.current = null;
    };
  }, [recording]);

  // Draw the screen at `time`: forward by writing what came since, backward by starting over.
  useEffect(() => {
    const t = term.current;
    if (!t) return;
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

  useEffect(() => {
    if (!playing) return;
    let last = performance.now();
    let frame = requestAnimationFrame(function tick(now) {
      const next = (current: number) => Math.min(recording.duration, current + ((now - last) / 1000) * speed);
      last = now;
      setTime((current) => {
        const t = next(current);
        if (t >= recording.duration) setPlaying(false);
        return t;
      });
      frame = requestAnimationFrame(tick);
    });
    return () => cancelAnimationFrame(frame);
  }, [playing, speed, recording]);

  const here = snapshotAt(recording, time, snapshots);
  const duration = Math.max(recording.duration, 0.001);
  return (
    <div className="player">
      <div className="toolbar small">
        <button
          onClick={() => {
            if (!playing && time >= recording.duration) setTime(0);
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
          {formatClock(time)} / {formatClock(recording.duration)}
        </span>
        <div className="spacer" />
        <button
          disabled={!here}
          title={
            here ? `The VM moves to ${here.snapshot.name} (${here.marker.label})` : 'No snapshot before this point'
          }
          onClick={() => here && store.setState({ dialog: { kind: 'restore', vmId, snapshotId: here.snapshot.id } })}
        >
          {here ? `Restore here (${here.snapshot.name})` : 'Restore here'}
        </button>
        <button
          disabled={!here}
          onClick={() => here && store.setState({ dialog: { kind: 'fork', vmId: null, snapshotId: here.snapshot.id } })}
        >
          Fork here
        </button>
        <button onClick={reload} aria-label="Load the recording again">
          ⟳
        </button>
      </div>
      <div className="scrubber">
        <input
          type="range"
          min={0}
          max={duration}
          step={0.01}
          value={time}
          aria-label="Replay position"
          aria-valuetext={formatClock(time)}
          onChange={(e) => {
            setPlaying(false);
            setTime(Number(e.target.value));
          }}
        />
        <div className="markers">
          {recording.markers.map((marker, i) => (
            <button
              key={i}
              className={`marker marker-${marker.kind}`}
              style={{ left: `${(marker.time / duration) * 100}%` }}
              title={`${formatClock(marker.time)} ${marker.label}`}
              aria-label={`Marker: ${marker.label} at ${formatClock(marker.time)}`}
              onClick={() => {
                setPlaying(false);
                setTime(marker.time);
              }}
            />
          ))}
        </div>
      </div>
      {recording.skipped > 0 && (
        <p className="muted small">{recording.skipped} unreadable line(s) of the recording were skipped.</p>
      )}
      <div className="replay-host" ref={host} data-testid="replay" />
    </div>
  );
}
