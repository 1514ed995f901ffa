// The API's portable-machine calls (docs/smolmachine.md): pack a VM or snapshot into a .smolmachine file, and start
// an episode from one. Browser-safe (zod only). The paths are on the engine's host. The OpenAPI document inlines
// them (components come from schema.ts).
import { z } from 'zod';
import { Ref } from './schema.js';

const FilePath = z.string().min(1).max(4096).describe('a path on the engine’s host; relative to the engine’s cwd');

const RequestId = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,64}$/)
  .describe('a name the client chose for this request; the `progress` events of its work carry it as `request`');

export const PackMachineRequest = z
  .object({
    source: Ref.describe('a VM (a running one is checkpointed first) or a snapshot'),
    path: FilePath,
    requestId: RequestId.optional(),
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
    requestId: RequestId.optional(),
  })
  .strict();
export type OpenMachineRequest = z.infer<typeof OpenMachineRequest>;

export const InspectMachineRequest = z.object({ path: FilePath }).strict();
export type InspectMachineRequest = z.infer<typeof InspectMachineRequest>;

const Size = z.number().int();

/**
 * What a .smolmachine file holds, for deciding whether to open it (the UI's Open machine… shows it first): its
 * manifest less the chunk table and the console's text, with the CPU features this engine's host lacks. The file's
 * digest, manifest and the state and memory headers are checked; every chunk's checksum is checked when it is opened.
 * Nothing is written.
 */
export const InspectMachineResponse = z.object({
  path: z.string(),
  bytes: Size,
  format: z.number().int(),
  made: z.object({ smol: z.string(), host: z.string(), platform: z.string(), at: z.string(), from: z.string() }),
  snapshot: z.object({
    id: z.string(),
    name: z.string(),
    kind: z.string(),
    created: z.string(),
    cpus: z.number().int(),
    memoryBytes: Size,
  }),
  layers: z.number().int().describe('memory layers in the chain'),
  memoryData: Size.describe('bytes of guest RAM (non-zero pages) the file holds'),
  raw: Size,
  stored: Size,
  chunks: z.number().int(),
  boot: z.array(z.object({ role: z.string(), name: z.string(), bytes: Size })),
  disks: z.array(z.object({ kind: z.enum(['image', 'layer']), name: z.string(), bytes: Size })),
  console: z.boolean().describe('whether the VM’s console screen is in it'),
  cpu: z.object({
    vendor: z.string(),
    model: z.string(),
    features: z.number().int().describe('CPU features the state needs'),
    missing: z.array(z.string()).describe('of those, the ones this engine’s host lacks: opening is refused'),
  }),
  smolfile: z.object({ name: z.string(), text: z.string() }),
});
export type InspectMachineResponse = z.infer<typeof InspectMachineResponse>;
