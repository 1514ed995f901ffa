// Reading a console recording (asciicast v2, docs/engine.md "Consoles"): a header line, then `[time, type, data]`
// events: output "o", input "i", marker "m", resize "r". Markers name the snapshots the engine took.
import type { Snapshot } from '../../../src/api/schema.js';

export interface Recording {
  width: number;
  height: number;
  /** The header's start time (seconds since the epoch), when it has one. */
  timestamp: number | null;
  /** Seconds from the start to the last event. */
  duration: number;
  /** Output events in time order. */
  output: { time: number; data: string }[];
  markers: Marker[];
  /** Lines that did not parse (a recording cut mid-line while it was being written, say). */
  skipped: number;
}

export type MarkerKind = 'checkpoint' | 'fork' | 'restore' | 'other';

export interface Marker {
  time: number;
  label: string;
  kind: MarkerKind;
  /** The snapshot name the label mentions, if any. */
  snapshotName: string | null;
}

const MARKER_PATTERNS: [RegExp, MarkerKind][] = [
  [/^fork ×\d+ at (\S+)/, 'fork'],
  [/^forked from .* at (\S+)$/, 'fork'],
  [/^forked from (\S+)$/, 'fork'],
  [/^restore (\S+)/, 'restore'],
  [/^before-restore ([^\s:]+)/, 'restore'],
  [/^(?:checkpoint|auto) ([^\s:]+)/, 'checkpoint'],
  [/^fork ([^\s:]+)/, 'fork'],
  [/^(?:base|suspend) ([^\s:]+)/, 'other'],
  [/^resume from (\S+)/, 'other'],
];

export function classifyMarker(label: string): { kind: MarkerKind; snapshotName: string | null } {
  for (const [pattern, kind] of MARKER_PATTERNS) {
    const match = pattern.exec(label);
    if (match) return { kind, snapshotName: match[1] ?? null };
  }
  return { kind: 'other', snapshotName: null };
}

export function parseAsciicast(text: string): Recording {
  const lines = text.split('\n');
  let header: { width?: number; height?: number; timestamp?: number } = {};
  try {
    header = JSON.parse(lines[0] ?? '') as typeof header;
  } catch {
    throw new Error('the recording has no asciicast v2 header');
  }
  const recording: Recording = {
    width: header.width ?? 80,
    height: header.height ?? 24,
    timestamp: typeof header.timestamp === 'number' ? header.timestamp : null,
    duration: 0,
    output: [],
    markers: [],
    skipped: 0,
  };
  for (const line of lines.slice(1)) {
    if (line.trim() === '') continue;
    let event: unknown;
    try {
      event = JSON.parse(line);
    } catch {
      recording.skipped++;
      continue;
    }
    if (!Array.isArray(event) || typeof event[0] !== 'number' || typeof event[2] !== 'string') {
      recording.skipped++;
      continue;
    }
    const [time, type, data] = event as [number, string, string];
    recording.duration = Math.max(recording.duration, time);
    if (type === 'o') recording.output.push({ time, data });
    else if (type === 'm') recording.markers.push({ time, label: data, ...classifyMarker(data) });
  }
  return recording;
}

/** The index of the first output event after `time` (everything before it is on screen at `time`). */
export function outputIndexAt(recording: Recording, time: number): number {
  let lo = 0;
  let hi = recording.output.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (recording.output[mid]!.time <= time) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const TAKEN = /^(?:checkpoint|auto|fork|before-restore|base|suspend) ([^\s:]+)(?::|$)/;
/** How far a marker's time may be from a snapshot's creation time to stand for it when the names differ. */
const SAME_MOMENT_S = 3;

/**
 * The snapshot a marker stands for: by the name it was written with, else (the snapshot was renamed since) the
 * snapshot taken at the marker's moment.
 */
export function markerSnapshot(recording: Recording, marker: Marker, snapshots: readonly Snapshot[]): Snapshot | null {
  if (!marker.snapshotName) return null;
  const named = snapshots.filter((s) => s.name === marker.snapshotName);
  if (named.length === 1) return named[0]!;
  if (recording.timestamp === null || !TAKEN.test(marker.label)) return named[0] ?? null;
  const at = recording.timestamp + marker.time;
  let best: Snapshot | null = null;
  for (const snapshot of snapshots) {
    const distance = Math.abs(Date.parse(snapshot.created) / 1000 - at);
    if (distance <= SAME_MOMENT_S && (!best || distance < Math.abs(Date.parse(best.created) / 1000 - at)))
      best = snapshot;
  }
  return best;
}

/** The snapshot a marker at or before `time` names, latest first: what "restore here" and "fork here" use. */
export function snapshotAt(
  recording: Recording,
  time: number,
  snapshots: readonly Snapshot[],
): { marker: Marker; snapshot: Snapshot } | null {
  for (let i = recording.markers.length - 1; i >= 0; i--) {
    const marker = recording.markers[i]!;
    if (marker.time > time) continue;
    const snapshot = markerSnapshot(recording, marker, snapshots);
    if (snapshot) return { marker, snapshot };
  }
  return null;
}

/** The marker written when the snapshot was taken (`checkpoint NAME: note`, `fork NAME`, …), for its last screen. */
export function markerOf(recording: Recording, snapshot: Snapshot): Marker | null {
  const taken = recording.markers.filter((m) => TAKEN.test(m.label));
  // By its name first (the latest, should a deleted snapshot's name have been used again): another snapshot's
  // marker written within seconds of this one's must not stand for it (two checkpoints 3 s apart showed the first's
  // screen for the second).
  const named = taken.filter((m) => m.snapshotName === snapshot.name);
  if (named.length) return named.at(-1)!;
  // Renamed since: the marker written at its moment, the nearest.
  const at = Date.parse(snapshot.created) / 1000;
  let best: Marker | null = null;
  for (const m of taken) {
    if (markerSnapshot(recording, m, [snapshot])?.id !== snapshot.id) continue;
    const distance = (marker: Marker) => Math.abs((recording.timestamp ?? 0) + marker.time - at);
    if (!best || distance(m) < distance(best)) best = m;
  }
  return best;
}
