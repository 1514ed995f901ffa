// The API's portable-machine calls (docs/smolmachine.md): pack a VM or snapshot into a .smolmachine file, and start
// an episode from one. Browser-safe (zod only). The paths are on the engine's host. The OpenAPI document inlines
// them (components come from schema.ts).
import { z } from 'zod';
import { Ref } from './schema.js';

const FilePath = z.string().min(1).max(4096).describe('a path on the engine’s host; relative to the engine’s cwd');

export const PackMachineRequest = z
  .object({
    source: Ref.describe('a VM (a running one is checkpointed first) or a snapshot'),
    path: FilePath,
  })
  .strict();
export type PackMachineRequest = z.infer<typeof PackMachineRequest>;

export const PackMachineResponse = z.object({
  path: z.string(),
  bytes: z.number().int(),
  /** The packed snapshot (of a running VM: the checkpoint pack took). */
  snapshot: z.object({ id: z.string(), name: z.string(), note: z.string() }),
  /** Bytes of guest RAM (non-zero pages) the file holds, over the snapshot chain. */
  memoryData: z.number().int(),
  layers: z.number().int().describe('memory layers in the chain'),
});
export type PackMachineResponse = z.infer<typeof PackMachineResponse>;

export const OpenMachineRequest = z
  .object({
    path: FilePath,
    name: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/)
      .optional(),
  })
  .strict();
export type OpenMachineRequest = z.infer<typeof OpenMachineRequest>;
