import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../package-root.js';
import { smolfileExamples } from './smolfile-examples.js';

describe('the example Smolfiles the UI offers', () => {
  it('lists each one with its absolute path and the first sentence of its comment', () => {
    const examples = smolfileExamples();
    const echo = examples.find((example) => example.name === 'echo.smolfile');
    expect(echo?.path).toBe(path.join(packageRoot, 'smolfiles', 'echo.smolfile'));
    expect(echo?.description).toMatch(/^A bare kernel that echoes what is typed on its console: .*\.$/);
    expect(examples.map((example) => example.name)).toEqual([...examples.map((example) => example.name)].sort());
    for (const example of examples) expect(example.description, example.name).not.toMatch(/^$|:$/);
  });
});
