// Benchmark `reset`: through a real engine (its own throwaway data dir), how long `reset` takes to give a clean
// running machine from the Smolfile's base snapshot, and how long until that machine answers on its console; plus
// the API's round trip. README, "Benchmarks"; docs/engine.md, "Base snapshots".
import { performance } from 'node:perf_hooks';
import { withThrowawayEngine } from './throwaway-engine.js';
import { benchHost, summarize, type BenchResult } from './vm-create.js';

export interface ResetBenchOptions {
  smolfile: string;
  runs: number;
  progress: (line: string) => void;
}

export interface ResetBenchResult extends BenchResult {
  notes: string[];
}

const WARMUP_RUNS = 2;

/** A console probe that the guest answers: the shell computes 6*7; the echo guest echoes a byte. */
function probe(linux: boolean, n: number): { input: string; answer: RegExp } {
  return linux
    ? { input: `echo "ans-$((${n} * 6 * 7))"\n`, answer: new RegExp(`ans-${n * 42}\\b`) }
    : { input: `p${n}q`, answer: new RegExp(`p${n}q`) };
}

export async function benchReset(options: ResetBenchOptions): Promise<ResetBenchResult> {
  return withThrowawayEngine('reset', async (smol) => {
    options.progress(`starting an episode of ${options.smolfile} (the first boot bakes the base snapshot)`);
    const { episode, vm } = await smol.up(options.smolfile, { name: 'bench' });
    const linux = episode.base !== null;
    const samples = {
      reset: [] as number[],
      answer: [] as number[],
      agent: [] as number[],
      health: [] as number[],
      vm: [] as number[],
    };
    for (let run = 0; run < WARMUP_RUNS + options.runs; run++) {
      const { input, answer } = probe(linux, run + 1);
      const start = performance.now();
      await smol.reset(vm.id);
      const running = performance.now();
      const answered = smol.waitForOutput(vm.id, answer, 60_000);
      await smol.write(vm.id, input);
      // The guest agent too (an image has one): in parallel with the console, both from the same reset.
      const agentReady = linux ? smol.exec(vm.id, ['true']).then(() => performance.now()) : null;
      await answered;
      const done = performance.now();
      const agentDone = agentReady ? await agentReady : null;
      const t0 = performance.now();
      await smol.api.call('health');
      const t1 = performance.now();
      await smol.vm(vm.id);
      const t2 = performance.now();
      if (run < WARMUP_RUNS) continue;
      samples.reset.push(running - start);
      samples.answer.push(done - start);
      if (agentDone !== null) samples.agent.push(agentDone - start);
      samples.health.push(t1 - t0);
      samples.vm.push(t2 - t1);
      options.progress(`run ${run + 1 - WARMUP_RUNS}/${options.runs}: reset ${(running - start).toFixed(1)} ms`);
    }
    const what = linux ? 'base snapshot restored' : 'bare kernel booted afresh (no base snapshot)';
    return {
      name: 'reset',
      runs: options.runs,
      warmup: WARMUP_RUNS,
      guest: options.smolfile,
      results: [
        summarize(`reset → running (${what})`, samples.reset),
        summarize(`reset → console answers (${linux ? 'shell runs a command' : 'guest echoes'})`, samples.answer),
        ...(linux ? [summarize('reset → the guest agent runs a command (smol exec)', samples.agent)] : []),
        summarize('API round trip: GET /api/v1/health', samples.health),
        summarize('API round trip: GET /api/v1/vms/:vm', samples.vm),
      ],
      host: benchHost(),
      notes: [
        'through the engine over its Unix socket: the CLI, SDK and UI pay the same',
        'target: reset → running at most 5 ms p50 on hardware KVM',
      ],
    };
  });
}
