import { describe, expect, it } from 'vitest';
import { ApiFailure } from '../api/engine-api.js';
import { changedLabels } from './labels.js';

const refusal = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ApiFailure);
    return { status: (error as ApiFailure).status, message: (error as Error).message };
  }
  throw new Error('not refused');
};

describe('labels on a VM or snapshot', () => {
  it('sets keys, removes those given null and keeps the others', () => {
    const labels = changedLabels(undefined, { reward: 0.83, task: 'fix-1234' }, 'vm-1');
    expect(labels).toEqual({ reward: 0.83, task: 'fix-1234' });
    expect(changedLabels(labels, { reward: 1, 'eval.pass': 'yes', task: null }, 'vm-1')).toEqual({
      reward: 1,
      'eval.pass': 'yes',
    });
    expect(labels).toEqual({ reward: 0.83, task: 'fix-1234' }); // not changed in place
  });

  it('refuses a bad key, value or count, naming it and what it labels', () => {
    expect(refusal(() => changedLabels({}, { 'has space': 1 }, 'sn-1'))).toEqual({
      status: 400,
      message: expect.stringMatching(/^labels of sn-1: has space: a label key takes letters/),
    });
    expect(refusal(() => changedLabels({}, { reward: Number.NaN }, 'sn-1')).message).toMatch(
      /reward: a label is a finite number or a string of at most 256 characters \(null removes it\), not NaN$/,
    );
    expect(refusal(() => changedLabels({}, { long: 'x'.repeat(257) }, 'sn-1')).message).toMatch(
      /^labels of sn-1: long/,
    );
    expect(refusal(() => changedLabels({}, { nested: { a: 1 } }, 'sn-1')).status).toBe(400);
    const many = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`k${i}`, i]));
    expect(Object.keys(changedLabels({}, many, 'vm-1'))).toHaveLength(64);
    expect(refusal(() => changedLabels(many, { one: 'more' }, 'vm-1')).message).toBe(
      'labels of vm-1: at most 64 labels',
    );
  });
});
