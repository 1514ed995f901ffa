// bootsBareKernel (src/api/schema.ts) reads a Smolfile's text where the page has only the text: it must say what the
// Smolfile parser says (`image` null), or a Linux console would get CRs it never asked for, or a bare guest's stairs.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseSmolfile } from '../smolfile/smolfile.js';
import { bootsBareKernel } from './schema.js';

const examples = path.resolve(import.meta.dirname, '..', '..', 'smolfiles');

describe('which consoles take LF as CR LF', () => {
  it('agrees with the Smolfile parser on every example and on the shapes a Smolfile takes', () => {
    const texts: [string, string][] = readdirSync(examples)
      .filter((name) => name.endsWith('.smolfile'))
      .map((name) => [path.join(examples, name), readFileSync(path.join(examples, name), 'utf8')]);
    texts.push(
      ['/x/a.smolfile', 'cpus = 1\n'], // the builtin image
      ['/x/b.smolfile', '# kernel = "k"\nimage = "builtin"\n'],
      ['/x/c.smolfile', 'image = "builtin"\nkernel = "/bin/sh"\n[snapshots]\nkeep = 2\nauto_checkpoint = "1m"\n'],
      ['/x/d.smolfile', '  kernel = "/bin/sh"\ncmdline = "[x]"\n'],
    );
    let bare = 0;
    for (const [file, text] of texts) {
      const parsed = parseSmolfile(text, { path: file });
      if (!parsed.smolfile) continue; // a kernel that is not there here: the parser refuses it
      expect(bootsBareKernel(text), file).toBe(parsed.smolfile.image === null);
      if (parsed.smolfile.image === null) bare++;
    }
    expect(bare).toBeGreaterThanOrEqual(3); // count, echo, hello
  });
});
