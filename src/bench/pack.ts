// Benchmark `pack` (docs/smolmachine.md): through two real engines in throwaway data dirs, the dirty guest with N MiB
// of its RAM touched is checkpointed in one; each run packs that snapshot into a .smolmachine (time, file size),
// opens it in the other data dir (`up --from`) until the restored guest has checked all its touched pages, and, in
// the same run, restores the same snapshot from that store (a fork of it) until the same answer. Runs interleave;
// the opened episode is deleted after each run so the next one unpacks again.
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Smol } from '../../sdk/typescript/smol.js';
import { median } from './stats.js';
import { withThrowawayEngine } from './throwaway-engine.js';
import { benchHost, summarize, type BenchMetric, type BenchResult } from './vm-create.js';

export interface PackBenchOptions {
  runs: number;
  /** Guest RAM sizes, MiB. */
  memoryMiB: number[];
  /** MiB of RAM the guest writes before the checkpoint (one word per page, so every page is non-zero). */
  touchedMiB: number[];
  guestDir: string;
  progress: (line: string) => void;
}

export interface PackMetric extends BenchMetric {
  inputs: { memoryMiB: number; touchedMiB: number };
  values?: Record<string, number>;
}

export interface PackBenchResult extends BenchResult {
  results: PackMetric[];
  notes: string[];
}

const WARMUP_RUNS = 1;

/** Until the guest (restored from a checkpoint after `d`) says every touched page holds round 1. */
async function verified(smol: Smol, vm: string): Promise<void> {
  const answer = smol.waitForOutput(vm, /verify=(ok|bad)/, 120_000);
  await smol.write(vm, 'v');
  const [, result] = await answer;
  if (result !== 'ok') throw new Error(`the restored guest's memory is not what was packed (verify=${result})`);
}

export async function benchPack(options: PackBenchOptions): Promise<PackBenchResult> {
  const host = benchHost();
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'smol-bench-pack-'));
  const results: PackMetric[] = [];
  const notes: string[] = [];
  try {
    await withThrowawayEngine('pack-a', (a) =>
      withThrowawayEngine('pack-b', async (b) => {
        for (const memoryMiB of options.memoryMiB) {
          for (const touchedMiB of options.touchedMiB) {
            if (touchedMiB + 8 > memoryMiB) continue; // the guest writes from 8 MiB up
            const inputs = { memoryMiB, touchedMiB };
            options.progress(`${memoryMiB} MiB guest, ${touchedMiB} MiB touched`);
            const smolfile = path.join(scratch, `dirty-${memoryMiB}-${touchedMiB}.smolfile`);
            const kernel = path.join(options.guestDir, 'dirty.elf');
            writeFileSync(smolfile, `kernel = "${kernel}"\ncmdline = "mib=${touchedMiB}"\nmemory = ${memoryMiB}\n`);
            const { episode, vm } = await a.up(smolfile, { name: `dirty-${memoryMiB}-${touchedMiB}` });
            const dirtied = a.waitForOutput(vm.id, /dirty=1\b/, 600_000);
            await a.write(vm.id, 'd');
            await dirtied;
            const snapshot = await a.checkpoint(vm.id, {});
            const file = path.join(scratch, `m-${memoryMiB}-${touchedMiB}.smolmachine`);
            const samples = { pack: [] as number[], open: [] as number[], store: [] as number[] };
            let bytes = 0;
            let memoryData = 0;
            for (let run = 0; run < WARMUP_RUNS + options.runs; run++) {
              rmSync(file, { force: true });
              const t0 = performance.now();
              const packed = await a.pack(snapshot.id, file);
              const t1 = performance.now();
              bytes = statSync(file).size;
              memoryData = packed.memoryData;
              const opened = await b.upFrom(file);
              await verified(b, opened.vm.id);
              const t2 = performance.now();
              const { children } = await b.fork(snapshot.id, 1, 'snapshot');
              await verified(b, children[0]!.id);
              const t3 = performance.now();
              await b.destroy(opened.episode.id);
              if (run < WARMUP_RUNS) continue;
              samples.pack.push(t1 - t0);
              samples.open.push(t2 - t1);
              samples.store.push(t3 - t2);
            }
            await a.destroy(episode.id);
            const values = { fileBytes: bytes, memoryDataBytes: memoryData };
            results.push({ ...summarize('pack (snapshot to file)', samples.pack), inputs, values });
            results.push({ ...summarize('up --from until the guest verified its memory', samples.open), inputs });
            results.push({ ...summarize('restore from the store until verified', samples.store), inputs });
            const ratio = median(samples.open) / median(samples.store);
            results.push({
              metric: 'ratio open/store (p50)',
              p50_ms: Math.round(ratio * 100) / 100,
              p90_ms: Math.round(ratio * 100) / 100,
              samples_ms: [],
              inputs,
              values: { goal: 1.5 },
            });
          }
        }
      }),
    );
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  notes.push(
    'open = verify the whole file (sha256), decompress every chunk (libzstd in the addon, two at once) into the store, restore; ' +
      'store = a fork of the same snapshot in the same engine. Both end when the guest has read every touched page.',
  );
  return { name: 'pack', runs: options.runs, warmup: WARMUP_RUNS, guest: 'dirty.elf', results, host, notes };
}

export function formatPackBenchResult(result: PackBenchResult): string {
  const lines = [`smol bench pack: ${result.runs} runs after ${result.warmup} warm-up, p50 / p90 ms`];
  for (const r of result.results) {
    const what = `${r.inputs.memoryMiB} MiB RAM, ${r.inputs.touchedMiB} MiB touched`;
    const kib = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
    const extra = r.values?.fileBytes
      ? `  file ${kib(r.values.fileBytes)} for ${kib(r.values.memoryDataBytes!)} of non-zero RAM pages`
      : '';
    const figure = r.metric.startsWith('ratio') ? `${r.p50_ms} (goal ≤ 1.5)` : `${r.p50_ms} / ${r.p90_ms}`;
    lines.push(`  ${what.padEnd(30)} ${r.metric.padEnd(48)} ${figure}${extra}`);
  }
  for (const note of result.notes) lines.push(`  note: ${note}`);
  return lines.join('\n') + '\n';
}
