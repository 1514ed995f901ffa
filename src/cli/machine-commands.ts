// `smol pack VM|SNAPSHOT -o FILE.smolmachine`, `smol up --from FILE` (episode-commands.ts) and `smol inspect FILE`:
// portable machines (docs/smolmachine.md). Packing and opening run in the engine (it owns the store); the progress
// line comes from its `progress` events. Inspecting reads and checks the file here, without an engine.
import { randomUUID } from 'node:crypto';
import type { Smol } from '../../sdk/typescript/smol.js';
import { ProgressDisplay } from '../guest-build/build-progress.js';
import { openMachine } from '../engine/smolmachine-file.js';
import type { MachineManifest } from '../engine/smolmachine-format.js';
import { bytes, helpOr, JSON_FLAG, parseCommand, printJson, withEngine } from './engine-cli.js';
import { CommandError } from './errors.js';

type Run = (argv: string[]) => Promise<number>;

/**
 * Runs `work` with a progress line drawn from the engine's `progress` events of `operation` that carry the request id
 * `work` is given to send (so another client's pack or open at the same time does not move this bar).
 */
export async function withProgress<T>(
  smol: Smol,
  operation: string,
  step: string,
  work: (requestId: string) => Promise<T>,
): Promise<T> {
  const requestId = `cli-${randomUUID()}`;
  const display = new ProgressDisplay(process.stderr);
  let opened = () => {};
  const open = new Promise<void>((resolve) => (opened = resolve));
  const events = smol.api.events(
    (event) => {
      if (event.type !== 'progress' || event.operation !== operation || event.request !== requestId) return;
      if (event.total <= 0) return;
      const detail = `${bytes(event.done)} of ${bytes(event.total)}`;
      display.report({ step, detail, fraction: event.done / event.total });
    },
    { onOpen: opened, onClose: opened },
  );
  try {
    await open; // so that no progress event is missed

    return await work(requestId);
  } finally {
    events.close();
    display.finish();
  }
}

export const runPack: Run = async (argv) => {
  const HELP = `Usage: smol pack VM|SNAPSHOT -o FILE.smolmachine [--json]

Packs a VM or a snapshot into one self-contained file (docs/smolmachine.md): its memory (without zero pages), vCPU
and device state, Smolfile, a bare kernel's kernel, the console screen. A running VM is checkpointed first and
pauses only as long as that. Start it anywhere with smol up --from FILE.
`;
  const { flags, args, help } = parseCommand(
    'pack',
    argv,
    { ...JSON_FLAG, output: { type: 'string', short: 'o' } },
    { min: 1, max: 1, names: 'a VM or a snapshot' },
  );
  if (helpOr(help, HELP)) return 0;
  if (!flags.output) throw new CommandError('pack: -o FILE.smolmachine is required', 2);
  const out = flags.output;
  const result = await withEngine((smol) =>
    withProgress(smol, 'pack', 'pack', (requestId) => smol.pack(args[0]!, out, { requestId })),
  );
  if (flags.json) printJson(result);
  else
    process.stdout.write(
      `${result.path} ${bytes(result.bytes)} (${result.snapshot.id} ${result.snapshot.name}, ` +
        `${bytes(result.memoryData)} of guest RAM in ${result.layers} layer${result.layers > 1 ? 's' : ''})\n`,
    );
  return 0;
};

export const runInspect: Run = async (argv) => {
  const HELP = `Usage: smol inspect FILE.smolmachine [--json]

Checks a .smolmachine file (its digest, manifest and every chunk's checksum) and prints its manifest: format,
what made it and when, the CPU features it needs, the Smolfile, its snapshots and sizes. No engine is needed.
`;
  const { flags, args, help } = parseCommand('inspect', argv, JSON_FLAG, { min: 1, max: 1, names: 'a file' });
  if (helpOr(help, HELP)) return 0;
  let manifest: MachineManifest;
  let size: number;
  try {
    const machine = await openMachine(args[0]!);
    try {
      manifest = machine.manifest;
      size = machine.bytes;
      await machine.checkSnapshotHeaders();
      for (let i = 0; i < manifest.chunks.length; i++) await machine.readChunk(i, `chunk ${i}`);
    } finally {
      await machine.close();
    }
  } catch (error) {
    throw new CommandError(`inspect: ${(error as Error).message}`, 1);
  }
  if (flags.json) {
    printJson({ file: args[0], bytes: size, verified: true, manifest });
    return 0;
  }
  const top = manifest.snapshots[manifest.snapshots.length - 1]!.manifest;
  const lines = [
    `${args[0]}: .smolmachine format ${manifest.format}, ${bytes(size)}, every chunk verified`,
    `made:      by smol ${manifest.made.smol} on ${manifest.made.host} (${manifest.made.platform}) at ${manifest.made.at}, from ${manifest.made.from}`,
    `snapshot:  ${top.id} ${top.name} (${top.kind}), ${top.cpus} vCPU, ${bytes(top.memoryBytes)} RAM, taken ${top.created}`,
    `layers:    ${manifest.snapshots.map((s) => s.manifest.id).join(' <- ')}`,
    `memory:    ${bytes(manifest.totals.memoryData)} of non-zero pages; ${bytes(manifest.totals.raw)} raw, ${bytes(manifest.totals.stored)} stored in ${manifest.chunks.length} zstd chunks`,
    `boot:      ${manifest.boot.map((b) => `${b.role} ${b.name} (${bytes(b.file.size)})`).join(', ') || 'none'}`,
    `console:   ${manifest.console ? `a screen of ${manifest.console.screen.length} characters` : 'none'}`,
    `cpu:       ${manifest.cpu.vendor} ${manifest.cpu.model}; needs ${manifest.cpu.flags.length} features (${manifest.cpu.source} at pack time): ${manifest.cpu.flags.join(' ')}`,
    `smolfile:  ${manifest.smolfile.name}`,
    ...manifest.smolfile.text
      .trimEnd()
      .split('\n')
      .map((line) => `  ${line}`),
  ];
  process.stdout.write(lines.join('\n') + '\n');
  return 0;
};
