// The tree coloured by a label: which labels can colour it, the colour of a value, the legend's range and the best
// branch a person is shown (label-scale.ts).
import { describe, expect, it } from 'vitest';
import {
  bestBranch,
  colourOf,
  labelQuery,
  labelRange,
  labelValueOf,
  numericLabelKeys,
  scaleColour,
  type Labelled,
} from './label-scale.js';

//        root
//       /    \
//      a      b (reward 0.9)
//     / \      \
//    c   d      e (reward 0.2)
//  (0.5) (1.4)
const tree: Labelled[] = [
  { id: 'root', parent: null, labels: { task: 'fix-1' } },
  { id: 'a', parent: 'root' },
  { id: 'b', parent: 'root', labels: { reward: 0.9 } },
  { id: 'c', parent: 'a', labels: { reward: 0.5, steps: 12 } },
  { id: 'd', parent: 'a', labels: { reward: 1.4 } },
  { id: 'e', parent: 'b', labels: { reward: 0.2, task: 'fix-2' } },
];

describe('colouring the tree by a label', () => {
  it('offers only labels some snapshot holds a number under', () => {
    expect(numericLabelKeys(tree)).toEqual(['reward', 'steps']);
  });

  it('the legend spans the lowest to the highest value and counts the snapshots without one', () => {
    expect(labelRange(tree, 'reward')).toEqual({ key: 'reward', min: 0.2, max: 1.4, valued: 4, missing: 2 });
    expect(labelRange(tree, 'task')).toBeNull(); // text only
    expect(labelRange(tree, 'absent')).toBeNull();
  });

  it('the lowest value gets the scale’s first colour, the highest its last, and between them it moves', () => {
    const range = { min: 0.2, max: 1.4 };
    expect(colourOf(0.2, range)).toBe(scaleColour(0));
    expect(colourOf(1.4, range)).toBe(scaleColour(1));
    expect(scaleColour(0)).toBe('rgb(59, 82, 139)');
    expect(scaleColour(1)).toBe('rgb(253, 231, 37)');
    const middle = colourOf(0.8, range);
    expect(middle).not.toBe(scaleColour(0));
    expect(middle).not.toBe(scaleColour(1));
    // Values out of range (none here, but a NaN must not give "rgb(NaN, …)") are clamped.
    expect(scaleColour(Number.NaN)).toBe(scaleColour(0));
    expect(scaleColour(7)).toBe(scaleColour(1));
  });

  it('a label with one value colours every valued snapshot as the highest', () => {
    expect(colourOf(3, { min: 3, max: 3 })).toBe(scaleColour(1));
  });
});

describe('the best branch', () => {
  it('is the path from the root to the highest value', () => {
    expect(bestBranch(tree, 'reward', 'high')).toEqual({ best: 'd', value: 1.4, path: ['root', 'a', 'd'] });
  });

  it('or to the lowest, when the toggle says so', () => {
    expect(bestBranch(tree, 'reward', 'low')).toEqual({ best: 'e', value: 0.2, path: ['root', 'b', 'e'] });
  });

  it('among equal values is the first one’s, and none without a number', () => {
    const tied: Labelled[] = [...tree, { id: 'f', parent: 'e', labels: { reward: 1.4 } }];
    expect(bestBranch(tied, 'reward', 'high')!.best).toBe('d');
    expect(bestBranch(tree, 'task', 'high')).toBeNull();
  });

  it('ends at a parent that is not shown, and survives a cycle in a corrupt store', () => {
    expect(bestBranch([{ id: 'x', parent: 'gone', labels: { r: 1 } }], 'r', 'high')!.path).toEqual(['x']);
    const cycle: Labelled[] = [
      { id: 'p', parent: 'q', labels: { r: 1 } },
      { id: 'q', parent: 'p' },
    ];
    expect(bestBranch(cycle, 'r', 'high')!.path).toEqual(['q', 'p']);
  });
});

describe('labels typed by a person', () => {
  it('a value that reads as a number is one, as smol label reads it', () => {
    expect(labelValueOf('0.83')).toBe(0.83);
    expect(labelValueOf('-2')).toBe(-2);
    expect(labelValueOf('1e3')).toBe(1000);
    expect(labelValueOf('fix-1234')).toBe('fix-1234');
    expect(labelValueOf('0x10')).toBe('0x10');
    expect(labelValueOf('')).toBe('');
  });

  it('a search such as reward>0.5 filters by the value; other text is no label search', () => {
    const above = labelQuery('reward>0.5')!;
    expect(above({ reward: 0.9 })).toBe(true);
    expect(above({ reward: 0.5 })).toBe(false);
    expect(above({ reward: 'high' })).toBe(false);
    expect(above({})).toBe(false);
    expect(labelQuery('reward <= 0.5')!({ reward: 0.5 })).toBe(true);
    expect(labelQuery('task=fix-1')!({ task: 'fix-1' })).toBe(true);
    expect(labelQuery('task!=fix-1')!({})).toBe(true);
    expect(labelQuery('echo-1')).toBeNull();
  });
});
