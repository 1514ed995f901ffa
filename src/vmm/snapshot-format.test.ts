// The engine's idea of the snapshot format is the VMM's: a bump in snapfile.h without one here would leave every
// Smolfile's cached base unrestorable (the VMM refuses it) instead of baking a new one.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { packageRoot } from '../package-root.js';
import { SNAPSHOT_FORMAT } from './snapshot-format.js';

it('SNAPSHOT_FORMAT is the VMM’s SNAP_VERSION', () => {
  const header = readFileSync(path.join(packageRoot, 'native', 'vmm', 'snapfile.h'), 'utf8');
  expect(Number(/^#define SNAP_VERSION (\d+)$/m.exec(header)?.[1])).toBe(SNAPSHOT_FORMAT);
});
