// The compare view's address and sides: read back as written; each side a VM, a snapshot, or a message naming what
// is wrong; "Diff these" only for two snapshots of one episode, the older first, and why not otherwise.
import { describe, expect, it } from 'vitest';
import type { Snapshot, Vm } from '../../../src/api/schema.js';
import { emptyEngineState, type EngineState } from '../store/engine-state.js';
import { formatCompareRoute, parseCompareRoute } from './compare-route.js';
import { diffPair, episodeVm, sideOf } from './compare-sides.js';

const vm = (id: string, episode: string, state: Vm['state'] = 'running') => ({ id, episode, state }) as Vm;
const snap = (id: string, episode: string | null, created: string) =>
  ({ id, episode, created, name: id }) as unknown as Snapshot;

const engine: EngineState = {
  ...emptyEngineState(),
  vms: { 'vm-aaaaaaaaaa': vm('vm-aaaaaaaaaa', 'ep-one'), 'vm-bbbbbbbbbb': vm('vm-bbbbbbbbbb', 'ep-one', 'stopped') },
  snapshots: {
    'sn-aaaaaaaaaa': snap('sn-aaaaaaaaaa', 'ep-one', '2026-12-03T10:00:00Z'),
    'sn-bbbbbbbbbb': snap('sn-bbbbbbbbbb', 'ep-one', '2026-12-03T11:00:00Z'),
    'sn-cccccccccc': snap('sn-cccccccccc', 'ep-two', '2026-12-03T09:00:00Z'),
  },
  episodes: { 'ep-one': { vmIds: ['vm-bbbbbbbbbb', 'vm-aaaaaaaaaa'] } as EngineState['episodes'][string] },
};

describe('the compare view in the address', () => {
  it('reads back what it wrote; another address is not its', () => {
    const route = { a: 'vm-aaaaaaaaaa', b: 'sn-bbbbbbbbbb' };
    expect(formatCompareRoute(route)).toBe('#/compare?a=vm-aaaaaaaaaa&b=sn-bbbbbbbbbb');
    expect(parseCompareRoute(formatCompareRoute(route))).toEqual(route);
    expect(parseCompareRoute('#/compare')).toEqual({ a: null, b: null });
    expect(parseCompareRoute('#/compare?b=%20')).toEqual({ a: null, b: null });
    expect(parseCompareRoute('#/compared')).toBeNull();
    expect(parseCompareRoute('#/episodes/ep-one')).toBeNull();
  });
});

describe('a side', () => {
  it('is a VM, a snapshot, still loading, or a message that names the text', () => {
    expect(sideOf(engine, 'vm-aaaaaaaaaa', {}).kind).toBe('vm');
    expect(sideOf(engine, 'sn-aaaaaaaaaa', {}).kind).toBe('snapshot');
    expect(sideOf(engine, null, {})).toEqual({ kind: 'empty' });
    expect(sideOf(engine, 'sn-zzzzzzzzzz', {})).toEqual({ kind: 'loading', id: 'sn-zzzzzzzzzz' });
    expect(sideOf(engine, 'sn-zzzzzzzzzz', { 'sn-zzzzzzzzzz': 'No snapshot sn-zzzzzzzzzz' })).toMatchObject({
      kind: 'problem',
      message: 'No snapshot sn-zzzzzzzzzz',
    });
    const bad = sideOf(engine, '<script>', {});
    expect(bad.kind).toBe('problem');
    expect(bad.kind === 'problem' && bad.message).toContain('“<script>” is not a VM or snapshot id');
  });
});

describe('"Diff these"', () => {
  const side = (id: string) => sideOf(engine, id, {});
  it('takes two snapshots of one episode, the older one first whichever side it is on', () => {
    const pair = diffPair(side('sn-bbbbbbbbbb'), side('sn-aaaaaaaaaa'));
    expect(pair.ok && [pair.from.id, pair.to.id]).toEqual(['sn-aaaaaaaaaa', 'sn-bbbbbbbbbb']);
  });
  it('says why not for a VM, two episodes, or the same snapshot twice', () => {
    const why = (a: string, b: string) => {
      const pair = diffPair(side(a), side(b));
      return pair.ok ? 'ok' : pair.why;
    };
    expect(why('vm-aaaaaaaaaa', 'sn-aaaaaaaaaa')).toMatch(/a VM is not a point of it yet/);
    expect(why('sn-aaaaaaaaaa', 'sn-cccccccccc')).toMatch(/of one episode; these are of two episodes/);
    expect(why('sn-aaaaaaaaaa', 'sn-aaaaaaaaaa')).toMatch(/the same snapshot/);
  });
});

describe('an episode compared from the list', () => {
  it('stands for it by its live VM, else its first', () => {
    expect(episodeVm(engine, 'ep-one')).toBe('vm-aaaaaaaaaa');
    expect(episodeVm(engine, 'ep-nothing')).toBeNull();
  });
});
