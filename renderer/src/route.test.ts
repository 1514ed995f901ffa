// The address a view is kept in: read back as written, and anything else in the hash (a mistyped or foreign link)
// opens the list rather than an id that was never checked.
import { describe, expect, it } from 'vitest';
import { formatRoute, parseRoute, routeEngine } from './route.js';

describe('the view in the address', () => {
  it('reads back what it wrote, and reads nothing from a hash it did not write', () => {
    const route = { episodeId: 'ep-abc123', vmId: 'vm-def456', snapshotId: 'sn-ghi789' };
    expect(formatRoute(route)).toBe('#/episodes/ep-abc123?vm=vm-def456&snapshot=sn-ghi789');
    expect(parseRoute(formatRoute(route))).toEqual(route);
    expect(parseRoute('#/episodes/ep-abc123')).toEqual({ episodeId: 'ep-abc123', vmId: null, snapshotId: null });
    const none = { episodeId: null, vmId: null, snapshotId: null };
    for (const hash of ['', '#/', '#/episodes/', '#/episodes/<script>', '#/episodes/ep-a/b', '#/elsewhere/ep-abc']) {
      expect(parseRoute(hash), hash).toEqual(none);
    }
    expect(parseRoute('#/episodes/ep-abc?vm=../../x&snapshot=sn-1')).toEqual({
      episodeId: 'ep-abc',
      vmId: null,
      snapshotId: 'sn-1',
    });
    expect(formatRoute(none)).toBe('#/');
  });
});

describe('a remote engine’s episode in the address', () => {
  it('belongs to that engine’s store only', () => {
    const route = { episodeId: 'ep-abc123', vmId: 'vm-def456', snapshotId: null };
    const none = { episodeId: null, vmId: null, snapshotId: null };
    const hash = formatRoute(route, 'node-b');
    expect(hash).toBe('#/engines/node-b/episodes/ep-abc123?vm=vm-def456');
    expect(routeEngine(hash)).toBe('node-b');
    expect(parseRoute(hash, 'node-b')).toEqual(route);
    expect(parseRoute(hash)).toEqual(none);
    expect(parseRoute(hash, 'node-c')).toEqual(none);
    expect(parseRoute(formatRoute(route), 'node-b')).toEqual(none);
    for (const bad of [
      '#/engines/local/episodes/ep-abc',
      '#/engines/%3Cx%3E/episodes/ep-abc',
      '#/engines//episodes/ep-a',
    ]) {
      expect(routeEngine(bad), bad).toBeNull();
    }
  });
});
