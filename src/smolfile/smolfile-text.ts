// A Smolfile given as text rather than as a file (the app's editor, createEpisode with `text`; docs/smolfile.md,
// "A Smolfile as text"): its relative paths start from the directory the caller names, and without one they are
// errors, since a pasted text has no directory of its own.
import path from 'node:path';
import { parseSmolfile, type SmolfileResult } from './smolfile.js';

/** The name an episode started from text records as its Smolfile's path; nothing is written there. */
export const PASTED_SMOLFILE_NAME = 'pasted.smolfile';

export interface SmolfileTextSource {
  text: string;
  /** Absolute, on the engine's machine; undefined: relative paths are errors. */
  directory?: string | undefined;
}

/** The path such a Smolfile goes by: `DIRECTORY/pasted.smolfile`, or `/pasted.smolfile` without a directory. */
export function pastedSmolfilePath(source: SmolfileTextSource): string {
  return path.join(source.directory ?? '/', PASTED_SMOLFILE_NAME);
}

export function parseSmolfileText(source: SmolfileTextSource): SmolfileResult {
  return parseSmolfile(source.text, {
    path: pastedSmolfilePath(source),
    relativeFrom: source.directory === undefined ? null : path.resolve(source.directory),
  });
}

/** What the editor shows: whether it would start, and every problem at its line. */
export function checkSmolfileText(source: SmolfileTextSource): { ok: boolean; problems: SmolfileResult['problems'] } {
  const { smolfile, problems } = parseSmolfileText(source);
  return { ok: smolfile !== null, problems };
}
