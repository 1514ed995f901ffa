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
    // Which boot a Linux guest (the app marks them on a host whose KVM cannot run one) and which a bare kernel.
    const linux = examples.filter((example) => example.linux).map((example) => example.name);
    expect(linux).toEqual(['debian.smolfile', 'shell.smolfile']);
  });
});
