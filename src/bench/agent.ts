// Benchmarks `exec` and `files`: the guest agent through a real engine (its own throwaway data dir) and a real Linux
// guest. exec: a command's round trip through the API, and how soon the agent answers in a fork child. files: a
// file written into and read out of the guest, in MiB/s. README, "Benchmarks"; docs/agent.md.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Smol } from '../../sdk/typescript/smol.js';
import { withThrowawayEngine } from './throwaway-engine.js';
import { benchHost, summarize, type BenchResult } from './vm-create.js';

export interface AgentBenchOptions {
  smolfile: string;
  runs: number;
  /** files: the size of each transfer. */
  fileMiB: number;
  progress: (line: string) => void;
}

export interface AgentBenchResult extends BenchResult {
  notes: string[];
}

const WARMUP_RUNS = 2;

/** Runs `work` against a fresh engine with one episode of `smolfile` whose agent answers. */
function withEpisode<T>(options: AgentBenchOptions, work: (smol: Smol, vm: string) => Promise<T>): Promise<T> {
  return withThrowawayEngine('agent', async (smol) => {
    options.progress(`starting an episode of ${options.smolfile} (the first boot bakes the base snapshot)`);
    const { vm } = await smol.up(options.smolfile, { name: 'bench' });
    await waitForAgent(smol, vm.id);
    return await work(smol, vm.id);
  });
}

/** Resolves once the VM's agent answers a command (the first exec waits for it to connect). */
async function waitForAgent(smol: Smol, vm: string): Promise<void> {
  const { exitCode } = await smol.exec(vm, ['true']);
  if (exitCode !== 0) throw new Error(`the agent of ${vm} ran true with exit status ${exitCode}`);
}

export async function benchExec(options: AgentBenchOptions): Promise<AgentBenchResult> {
  return withEpisode(options, async (smol, vm) => {
    const samples = { exec: [] as number[], output: [] as number[], fork: [] as number[] };
    for (let run = 0; run < WARMUP_RUNS + options.runs; run++) {
      const t0 = performance.now();
      await smol.exec(vm, ['true']);
      const t1 = performance.now();
      const { stdout } = await smol.exec(vm, ['head', '-c', '65536', '/dev/zero']);
      const t2 = performance.now();
      if (stdout.length !== 65536) throw new Error(`head -c 65536 gave ${stdout.length} bytes`);
      const { children } = await smol.fork(vm, 1);
      const forked = performance.now();
      await waitForAgent(smol, children[0]!.id);
      const ready = performance.now();
      await smol.removeVm(children[0]!.id);
      if (run < WARMUP_RUNS) continue;
      samples.exec.push(t1 - t0);
      samples.output.push(t2 - t1);
      samples.fork.push(ready - forked);
      options.progress(`run ${run + 1 - WARMUP_RUNS}/${options.runs}: exec true ${(t1 - t0).toFixed(1)} ms`);
    }
    return {
      name: 'exec',
      runs: options.runs,
      warmup: WARMUP_RUNS,
      guest: options.smolfile,
      results: [
        summarize('exec true: round trip through the API (WebSocket, agent over vsock)', samples.exec),
        summarize('exec head -c 64KiB /dev/zero: round trip with its output', samples.output),
        summarize('fork answered → the child’s agent runs a command', samples.fork),
      ],
      host: benchHost(),
      notes: ['through the engine over its Unix socket, as the CLI and SDK do'],
    };
  });
}

export async function benchFiles(options: AgentBenchOptions): Promise<AgentBenchResult> {
  return withEpisode(options, async (smol, vm) => {
    const data = randomBytes(options.fileMiB << 20);
    const samples = { write: [] as number[], read: [] as number[] };
    for (let run = 0; run < WARMUP_RUNS + options.runs; run++) {
      const t0 = performance.now();
      await smol.writeFile(vm, '/tmp/bench.bin', data);
      const t1 = performance.now();
      const back = await smol.readFile(vm, '/tmp/bench.bin');
      const t2 = performance.now();
      if (!back.equals(data)) throw new Error('the file read back differs from the one written');
      if (run < WARMUP_RUNS) continue;
      samples.write.push(t1 - t0);
      samples.read.push(t2 - t1);
      options.progress(`run ${run + 1 - WARMUP_RUNS}/${options.runs}: write ${(t1 - t0).toFixed(0)} ms`);
    }
    const rate = (ms: number[]) => {
      const sorted = [...ms].sort((a, b) => a - b);
      return ((options.fileMiB * 1000) / sorted[Math.floor(sorted.length / 2)]!).toFixed(1);
    };
    return {
      name: 'files',
      runs: options.runs,
      warmup: WARMUP_RUNS,
      guest: options.smolfile,
      results: [
        summarize(`write ${options.fileMiB} MiB into the guest (PUT /files)`, samples.write),
        summarize(`read ${options.fileMiB} MiB out of the guest (GET /files)`, samples.read),
      ],
      host: benchHost(),
      notes: [
        `median rates: write ${rate(samples.write)} MiB/s, read ${rate(samples.read)} MiB/s`,
        'into tmpfs in the guest; checked byte for byte each run',
      ],
    };
  });
}
