// Benchmark `sdk`: the Python SDK (sdk/python) against the TypeScript SDK, in the same run, on the same engine (its own
// throwaway data dir) and VM, taking turns each run: a round trip (a command through the agent when the Smolfile's
// guest has one, else typing into the console until the guest echoes it, which is what a tiny guest on PVM can do),
// a fork of 8 until the children run, and the API's round trip alone (GET /health: little engine work, so mostly
// the client's own cost). The Python side is a worker process (sdk/python/bench/sdk_worker.py) that times its own
// calls, as this process times the TypeScript ones. docs/python-sdk.md, "Measured".
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import type { Smol } from '../../sdk/typescript/smol.js';
import { packageRoot } from '../package-root.js';
import { median } from './stats.js';
import { withThrowawayEngine } from './throwaway-engine.js';
import { benchHost, summarize, type BenchResult } from './vm-create.js';

export interface SdkBenchOptions {
  smolfile: string;
  runs: number;
  forks: number;
  progress: (line: string) => void;
}

export interface SdkBenchResult extends BenchResult {
  /** Python p50 / TypeScript p50 per operation (goal: at most 1.2). */
  ratios: Record<string, number>;
  notes: string[];
}

const WARMUP_RUNS = 2;
const WORKER = path.join(packageRoot, 'sdk', 'python', 'bench', 'sdk_worker.py');

/** Debian's python3 (where the tests run, with python3-wsproto), else python3 on PATH; SMOL_PYTHON overrides. */
function python(): string {
  return process.env.SMOL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
}

interface Worker {
  time(request: Record<string, unknown>): Promise<number>;
  version: string;
  close(): void;
}

async function startWorker(home: string): Promise<Worker> {
  const child = spawn(python(), [WORKER, home], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  let exited = '';
  child.on('exit', (code, signal) => (exited = signal ? `signal ${signal}` : `exit code ${code}`));
  const next = async () => {
    const line = await lines.next();
    if (line.done) throw new Error(`the Python worker (${python()} ${WORKER}) ended (${exited || 'no output'})`);
    return JSON.parse(line.value) as { ms?: number; error?: string; ready?: boolean; python?: string };
  };
  const hello = await next();
  if (!hello.ready) throw new Error(`the Python worker did not start: ${JSON.stringify(hello)}`);
  return {
    version: hello.python ?? '?',
    async time(request) {
      child.stdin.write(`${JSON.stringify(request)}\n`);
      const answer = await next();
      if (answer.error !== undefined || answer.ms === undefined) {
        throw new Error(`python ${String(request.op)}: ${answer.error}`);
      }
      return answer.ms;
    },
    close: () => child.stdin.end(),
  };
}

/** The TypeScript SDK doing what the worker does, timed the same way. */
async function tsTime(smol: Smol, request: { op: string; vm: string; n: number }): Promise<number> {
  const t0 = performance.now();
  if (request.op === 'console') {
    const echoed = smol.waitForOutput(request.vm, new RegExp(`p${request.n}q`), 60_000);
    await smol.write(request.vm, `p${request.n}q`);
    await echoed;
    return performance.now() - t0;
  }
  if (request.op === 'health') {
    await smol.api.call('health');
    return performance.now() - t0;
  }
  if (request.op === 'exec') {
    const { exitCode } = await smol.exec(request.vm, ['true']);
    if (exitCode !== 0) throw new Error(`true exited ${exitCode}`);
    return performance.now() - t0;
  }
  const { children } = await smol.fork(request.vm, request.n);
  const ms = performance.now() - t0;
  for (const child of children) await smol.removeVm(child.id);
  return ms;
}

export async function benchSdk(options: SdkBenchOptions): Promise<SdkBenchResult> {
  if (!existsSync(WORKER)) throw new Error(`the Python SDK's bench worker is missing: ${WORKER}`);
  return withThrowawayEngine('sdk', async (smol, home) => {
    options.progress(`starting an episode of ${options.smolfile}`);
    const { episode, vm } = await smol.up(options.smolfile, { name: 'bench' });
    const agent = episode.base !== null;
    if (agent) await smol.exec(vm.id, ['true']); // the first exec waits for the agent to connect
    const worker = await startWorker(home);
    const trip = agent ? 'exec' : 'console';
    const samples: Record<string, { ts: number[]; py: number[] }> = {
      [trip]: { ts: [], py: [] },
      fork: { ts: [], py: [] },
      health: { ts: [], py: [] },
    };
    let n = 0;
    try {
      for (let run = 0; run < WARMUP_RUNS + options.runs; run++) {
        // Alternate which SDK goes first, so neither always finds the engine just warmed (or just busied).
        const order = run % 2 === 0 ? (['ts', 'py'] as const) : (['py', 'ts'] as const);
        const measured: Record<string, { ts: number; py: number }> = {};
        for (const op of [trip, 'fork', 'health']) {
          measured[op] = { ts: 0, py: 0 };
          for (const side of order) {
            const request = { op, vm: vm.id, n: op === 'fork' ? options.forks : ++n };
            measured[op]![side] = side === 'ts' ? await tsTime(smol, request) : await worker.time(request);
          }
        }
        if (run < WARMUP_RUNS) continue;
        for (const [op, m] of Object.entries(measured)) {
          samples[op]!.ts.push(m.ts);
          samples[op]!.py.push(m.py);
        }
        const line = Object.entries(measured)
          .map(([op, m]) => `${op} ts ${m.ts.toFixed(1)} ms py ${m.py.toFixed(1)} ms`)
          .join(', ');
        options.progress(`run ${run + 1 - WARMUP_RUNS}/${options.runs}: ${line}`);
      }
    } finally {
      worker.close();
    }
    const tripName = agent ? 'exec round trip (true, through the agent)' : 'console round trip (type, see the echo)';
    const ratios: Record<string, number> = {};
    for (const [op, s] of Object.entries(samples)) ratios[op] = Math.round((median(s.py) / median(s.ts)) * 1000) / 1000;
    return {
      name: 'sdk',
      runs: options.runs,
      warmup: WARMUP_RUNS,
      guest: options.smolfile,
      results: [
        summarize(`${tripName}: TypeScript SDK`, samples[trip]!.ts),
        summarize(`${tripName}: Python SDK`, samples[trip]!.py),
        summarize(`fork(${options.forks}) until the children run: TypeScript SDK`, samples.fork!.ts),
        summarize(`fork(${options.forks}) until the children run: Python SDK`, samples.fork!.py),
        summarize('API round trip GET /api/v1/health: TypeScript SDK', samples.health!.ts),
        summarize('API round trip GET /api/v1/health: Python SDK', samples.health!.py),
      ],
      host: benchHost(),
      ratios,
      notes: [
        `ratio Python/TypeScript (p50): ${trip} ${ratios[trip]}, fork ${ratios.fork}, health ${ratios.health} (goal: at most 1.2)`,
        `Python ${worker.version} (${python()}), each SDK over the engine's Unix socket, taking turns every run`,
        ...(agent ? [] : ['this guest has no agent (a bare kernel): the round trip is the console one, not exec']),
      ],
    };
  });
}
