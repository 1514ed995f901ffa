// The example Smolfiles shipped in smolfiles/ (their README lists them): what the UI offers for a new episode,
// since a page cannot hand the engine a path from a file picker. Each with its absolute path and the first line of
// its leading comment.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { bootsBareKernel } from '../api/schema.js';
import { packageRoot } from '../package-root.js';

export interface SmolfileExample {
  name: string;
  path: string;
  description: string;
  /** Its text, for the app's editor. */
  text: string;
  /** It boots a Linux guest (an image), not a bare kernel: a host whose KVM cannot run Linux cannot run it. */
  linux: boolean;
}

export function smolfileExamples(dir = path.join(packageRoot, 'smolfiles')): SmolfileExample[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.smolfile') || name === 'Smolfile')
    .sort()
    .map((name) => {
      const file = path.join(dir, name);
      const comment: string[] = [];
      const source = readFileSync(file, 'utf8');
      for (const line of source.split('\n')) {
        if (!line.startsWith('#')) break;
        comment.push(line.replace(/^#\s?/, ''));
      }
      // The first sentence of the leading comment, without a colon that leads into the next.
      const text = comment.join(' ').trim();
      const description = (/^(.*?\.)(\s|$)/.exec(text)?.[1] ?? text).replace(/:$/, '');
      return { name, path: file, description, text: source, linux: !bootsBareKernel(source) };
    });
}
