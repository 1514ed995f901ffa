// `smol diff A B` (docs/diff.md): two snapshots of an episode compared. Each writable disk's chain at each point is
// exported by the episode's vmhost (the native module lives there) as a sparse raw image into a private directory
// under SMOL_HOME/run, read there by the sandboxed reader (disk-diff.ts), and removed; the console output between
// the two points is cut from the VM's asciicast recording at the points' markers.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { chmod, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { DiffResponse, DiskDiff } from '../api/diff-schema.js';
import type { Snapshot } from '../api/schema.js';
import { diffDisks, type DiffCaps } from './disk-diff.js';
import { DiskReadError, type ReaderOptions } from './disk-reader.js';
import { DEFAULT_LIMITS, SandboxUnavailable } from './reader-sandbox.js';

/** The console output given at most (the rest is cut, and the note says so). */
const CONSOLE_BYTES = 1024 * 1024;

export interface DiffPoint {
  snapshot: Snapshot;
  /** The marker its checkpoint left in the recording ("checkpoint NAME"). */
  marker: string;
  /** Each writable disk's frozen top layer, by device. */
  disks: Array<{ device: string; layer: string }>;
}

export interface DiffContext {
  /** The episode's run/ directory (episodeRunDir): the exported disks go there while the diff reads them. */
  runDir: string;
  /** Writes the chain at `layer` as a sparse raw image `out` (the episode's vmhost does it). */
  exportDisk(layer: string, out: string): Promise<void>;
  /** The asciicast recording of a VM, or null when the engine has none. */
  recording(vm: string): string | null;
  env: NodeJS.ProcessEnv;
}

function readerOptions(env: NodeJS.ProcessEnv): { reader: ReaderOptions; caps: DiffCaps } {
  const number = (name: string, fallback: number) => {
    const value = env[name];
    if (value === undefined || value === '') return fallback;
    if (!/^[1-9][0-9]{0,9}$/.test(value)) throw new Error(`${name}=${value}: expected a whole number above 0`);
    return Number(value);
  };
  return {
    reader: { limits: DEFAULT_LIMITS, maxEntries: number('SMOL_DIFF_MAX_ENTRIES', 500_000), maxDepth: 256 },
    caps: { textBytes: number('SMOL_DIFF_TEXT_BYTES', 64 * 1024), textFiles: 1000, files: 100_000 },
  };
}

export async function diffPoints(context: DiffContext, from: DiffPoint, to: DiffPoint): Promise<DiffResponse> {
  const { reader, caps } = readerOptions(context.env);
  // In the episode's run/ directory: the episode's vmhost writes the exported disks there (its root shows no other).
  const dir = path.join(context.runDir, `diff-${randomBytes(6).toString('hex')}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const disks: DiskDiff[] = [];
  let exportMs = 0;
  let readMs = 0;
  try {
    const devices = [...new Set([...from.disks, ...to.disks].map((d) => d.device))];
    for (const device of devices) {
      const a = from.disks.find((d) => d.device === device);
      const b = to.disks.find((d) => d.device === device);
      const empty = { device, added: 0, removed: 0, changed: 0, files: [], truncated: false, problems: [] };
      if (!a || !b) {
        disks.push({ ...empty, error: `${device} is a disk at only one of the two points` });
        continue;
      }
      const started = performance.now();
      const images = [path.join(dir, `${device}-from.raw`), path.join(dir, `${device}-to.raw`)] as const;
      await context.exportDisk(a.layer, images[0]);
      await context.exportDisk(b.layer, images[1]);
      // The directory is the engine's (0700); the reader, nobody in its sandbox, is shown only these files.
      for (const image of images) await chmod(image, 0o444);
      const exported = performance.now();
      exportMs += exported - started;
      try {
        disks.push({
          device,
          error: null,
          ...(await diffDisks(images[0], images[1], path.join(dir, device), reader, caps)),
        });
      } catch (error) {
        if (!(error instanceof DiskReadError) && !(error instanceof SandboxUnavailable)) throw error;
        disks.push({ ...empty, error: `${device}: ${error.message}` });
      }
      readMs += performance.now() - exported;
      for (const image of images) await rm(image, { force: true });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const point = (p: DiffPoint) => ({ id: p.snapshot.id, name: p.snapshot.name, vm: p.snapshot.vm });
  return {
    from: point(from),
    to: point(to),
    disks,
    console: consoleBetween(context, from, to),
    timings: { exportMs: Math.round(exportMs), readMs: Math.round(readMs) },
  };
}

/** The output events between the two points' markers in the VM's recording. */
function consoleBetween(context: DiffContext, from: DiffPoint, to: DiffPoint): DiffResponse['console'] {
  const vm = from.snapshot.vm;
  if (!vm || vm !== to.snapshot.vm) {
    return { text: null, note: 'the two points were taken on different VMs: no one recording holds what is between' };
  }
  const recording = context.recording(vm);
  if (recording === null) return { text: null, note: `the engine has no recording of ${vm}` };
  const isMarker = (label: string, marker: string) => label === marker || label.startsWith(`${marker}: `);
  let state: 'before' | 'inside' | 'after' = 'before';
  let text = '';
  let cut = false;
  for (const line of recording.split('\n').slice(1)) {
    let event: unknown;
    try {
      event = JSON.parse(line);
    } catch {
      continue;
    }
    if (!Array.isArray(event) || typeof event[2] !== 'string') continue;
    const [, kind, data] = event as [number, string, string];
    if (kind === 'm' && state === 'before' && isMarker(data, from.marker)) state = 'inside';
    else if (kind === 'm' && state === 'inside' && isMarker(data, to.marker)) state = 'after';
    else if (kind === 'o' && state === 'inside' && !cut) {
      text += data;
      if (text.length > CONSOLE_BYTES) [text, cut] = [text.slice(0, CONSOLE_BYTES), true];
    }
    if (state === 'after') break;
  }
  if (state === 'before') return { text: null, note: `the recording has no marker for ${from.snapshot.name}` };
  if (state === 'inside')
    return { text: null, note: `${to.snapshot.name} comes before ${from.snapshot.name} (or has no marker)` };
  return { text, note: cut ? `cut at ${CONSOLE_BYTES} characters` : null };
}

/** A recording the engine has no console hub for any more (its VM removed), from SMOL_HOME/consoles. */
export function readRecording(home: string, vm: string): string | null {
  try {
    return readFileSync(path.join(home, 'consoles', `${vm}.cast`), 'utf8');
  } catch {
    return null;
  }
}
