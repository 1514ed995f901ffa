import { describe, expect, it } from 'vitest';
import type { Snapshot } from '../../../src/api/schema.js';
import { classifyMarker, markerOf, outputIndexAt, parseAsciicast, snapshotAt } from './asciicast.js';

const cast = [
  '{"version":2,"width":100,"height":30,"timestamp":1764568800}',
  '[0.0,"m","boot"]',
  '[0.5,"o","hello\\r\\n"]',
  '[1.0,"m","checkpoint step-1: before the install"]',
  '[1.5,"i","ls\\r"]',
  '[2.0,"o","a b c\\r\\n"]',
  '[3.0,"m","fork ×3 at fork-1"]',
  '[3.0,"m","fork fork-1"]',
  '[4.0,"m","restore step-1"]',
  '[4.2,"o","rest',
].join('\n');

const snap = (name: string): Snapshot => ({
  ...{ id: `sn-${name.replace(/\W/g, 'a').padEnd(10, 'a').slice(0, 10)}`, episode: 'ep-aaaaaaaaaa', parent: null },
  ...{ layerParent: null, vm: 'vm-aaaaaaaaaa', kind: 'manual', name, note: '', created: '', diskBytes: 0 },
  ...{ memoryBytes: 0, cpus: 1, deleted: false },
});

describe('console recordings', () => {
  it('reads output and markers, and counts a line cut mid-write as skipped', () => {
    const recording = parseAsciicast(cast);
    expect(recording).toMatchObject({ width: 100, height: 30, duration: 4, skipped: 1 });
    expect(recording.output.map((o) => o.data)).toEqual(['hello\r\n', 'a b c\r\n']);
    expect(recording.markers.map((m) => [m.kind, m.snapshotName])).toEqual([
      ['other', null],
      ['checkpoint', 'step-1'],
      ['fork', 'fork-1'],
      ['fork', 'fork-1'],
      ['restore', 'step-1'],
    ]);
    expect(() => parseAsciicast('not json')).toThrow(/no asciicast v2 header/);
  });

  it('names the snapshot of every marker the engine writes', () => {
    expect(classifyMarker('before-restore restore-point-2')).toEqual({
      kind: 'restore',
      snapshotName: 'restore-point-2',
    });
    expect(classifyMarker('forked from main at fork-1')).toEqual({ kind: 'fork', snapshotName: 'fork-1' });
    expect(classifyMarker('auto auto-3')).toEqual({ kind: 'checkpoint', snapshotName: 'auto-3' });
    expect(classifyMarker('exit poweroff')).toEqual({ kind: 'other', snapshotName: null });
  });

  it('finds what is on screen and which snapshot a moment belongs to', () => {
    const recording = parseAsciicast(cast);
    expect(outputIndexAt(recording, 0.4)).toBe(0);
    expect(outputIndexAt(recording, 0.5)).toBe(1);
    expect(outputIndexAt(recording, 10)).toBe(2);
    const snapshots = [snap('step-1'), snap('fork-1')];
    expect(snapshotAt(recording, 0.9, snapshots)).toBeNull();
    expect(snapshotAt(recording, 2.5, snapshots)?.snapshot.name).toBe('step-1');
    expect(snapshotAt(recording, 3.5, snapshots)?.snapshot.name).toBe('fork-1');
    expect(markerOf(recording, snapshots[1]!)?.time).toBe(3);
  });
});

describe('a renamed snapshot', () => {
  it('is still found by the moment its marker was written', () => {
    const recording = parseAsciicast(
      ['{"version":2,"width":80,"height":24,"timestamp":1000}', '[5.0,"m","checkpoint step-1: note"]'].join('\n'),
    );
    const renamed: Snapshot = { ...snap('kept'), created: new Date(1005_400).toISOString() };
    const other: Snapshot = { ...snap('other'), id: 'sn-bbbbbbbbbb', created: new Date(1100_000).toISOString() };
    expect(markerOf(recording, renamed)?.time).toBe(5);
    expect(markerOf(recording, other)).toBeNull();
    expect(snapshotAt(recording, 6, [other, renamed])?.snapshot.name).toBe('kept');
  });
  it('is not another snapshot taken within seconds of it', () => {
    // Two checkpoints 3 s apart: "second"'s marker is its own, not "first"'s (which is near its creation time too).
    const recording = parseAsciicast(
      [
        '{"version":2,"width":80,"height":24,"timestamp":1000}',
        '[5.0,"m","checkpoint first"]',
        '[8.0,"m","checkpoint second"]',
      ].join('\n'),
    );
    const second: Snapshot = { ...snap('second'), created: new Date(1008_000).toISOString() };
    const first: Snapshot = { ...snap('first'), id: 'sn-bbbbbbbbbb', created: new Date(1005_000).toISOString() };
    expect(markerOf(recording, second)?.time).toBe(8);
    expect(markerOf(recording, first)?.time).toBe(5);
  });
});
