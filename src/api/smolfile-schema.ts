// Checking a Smolfile given as text (docs/smolfile.md, "A Smolfile as text"): what the app's editor asks as the
// user types. Browser-safe (zod only).
import { z } from 'zod';
import { SmolfileText } from './schema.js';

export const CheckSmolfileRequest = z
  .object({ text: SmolfileText.text, directory: SmolfileText.directory })
  .strict()
  .meta({ id: 'CheckSmolfileRequest' });
export type CheckSmolfileRequest = z.infer<typeof CheckSmolfileRequest>;

export const SmolfileProblem = z
  .object({
    severity: z.enum(['error', 'warning']),
    key: z.string().describe('the dotted key path (`health.interval`, `env[2]`); empty for the file as a whole'),
    line: z.number().int().describe('1-based'),
    column: z.number().int().describe('1-based'),
    message: z.string(),
  })
  .meta({ id: 'SmolfileProblem' });

export const CheckSmolfileResponse = z
  .object({
    /** No errors (warnings may remain): createEpisode with the same text and directory gets past the Smolfile. */
    ok: z.boolean(),
    /** Errors and warnings in file order, each at its line and column. */
    problems: z.array(SmolfileProblem),
  })
  .meta({ id: 'CheckSmolfileResponse' });
export type CheckSmolfileResponse = z.infer<typeof CheckSmolfileResponse>;
