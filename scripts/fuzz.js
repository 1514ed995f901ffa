#!/usr/bin/env node
// `npm run fuzz [-- --seconds N | --executions N] [--target NAME | --except NAME]`: builds the fuzzers
// (`make -C native fuzz`: clang, libFuzzer, ASan and UBSan), writes their seed corpora and runs each for N seconds
// (default 60), or for N executions each (`--executions 1000000`: the long run, docs/fuzzing.md), over its corpus in
// native/out/fuzz, which grows from run to run: the snapshot loader (`snapshot`, docs/snapshots.md, "Fuzzing"),
// virtqueue handling (`virtq`, docs/vmm.md, "Virtio"), virtio-vsock (`vsock`, docs/vmm.md, "vsock"), the network
// policy (`net-policy`, docs/network.md, "Fuzzing") and the guest agent's decoder of host requests (`agent-proto`,
// docs/agent.md). A crash, leak, UB report or hang fails the run and names the input libFuzzer kept, which
// reproduces it: `native/out/fuzz/fuzz_<target> <input>`. The .smolmachine reader is TypeScript, so its target
// (`machine`, docs/smolmachine.md, "Fuzzing") is a mutation fuzzer run through vitest for N seconds from a fresh
// seed, as are the Smolfile parser's (`smolfile`), the host side of the agent protocol's (`agent`: what a guest's
// agent sends) and the API request parser's (`api`: an in-process engine), docs/fuzzing.md; a mutant that breaks its
// property is kept in native/out/fuzz/crashes/ and named.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const out = path.join('native', 'out', 'fuzz'); // relative to root, so messages name short paths
const crashes = path.join(out, 'crashes');

/** Each fuzzer: its binary, the program that writes its seeds, its corpus, and what it covers. */
const targets = [
  {
    name: 'snapshot',
    what: 'the snapshot loader',
    fuzzer: 'fuzz_snapshot',
    seedsBin: 'snapshot_seeds',
    corpus: 'corpus',
  },
  { name: 'virtq', what: 'virtqueue handling', fuzzer: 'fuzz_virtq', seedsBin: 'virtq_seeds', corpus: 'corpus-virtq' },
  { name: 'vsock', what: 'virtio-vsock', fuzzer: 'fuzz_vsock', seedsBin: 'vsock_seeds', corpus: 'corpus-vsock' },
  {
    name: 'net-policy',
    what: 'the network policy',
    fuzzer: 'fuzz_net_policy',
    seedsBin: 'net_policy_seeds',
    corpus: 'corpus-net-policy',
  },
  {
    name: 'agent-proto',
    what: "the guest agent's decoder of host requests",
    fuzzer: 'fuzz_agent_proto',
    seedsBin: 'agent_proto_seeds',
    corpus: 'corpus-agent-proto',
  },
  { name: 'machine', what: 'the .smolmachine reader', test: 'src/engine/smolmachine-fuzz.test.ts' },
  { name: 'smolfile', what: 'the Smolfile parser', test: 'src/smolfile/smolfile-fuzz.test.ts' },
  { name: 'agent', what: 'the host side of the agent protocol', test: 'src/agent-client/agent-fuzz.test.ts' },
  { name: 'api', what: "the API's request parser", test: 'src/engine/api-fuzz.test.ts' },
];

function say(message) {
  process.stdout.write(`fuzz: ${message}\n`);
}

/** The last line scripts/test.js reads the reason from. */
function fail(message) {
  process.stderr.write(`fuzz failed: ${message}\n`);
  return 1;
}

function parseSeconds(argv) {
  const at = argv.indexOf('--seconds');
  if (at < 0) return 60;
  const seconds = Number(argv[at + 1]);
  return Number.isInteger(seconds) && seconds > 0 ? seconds : null;
}

/** `--executions N`: a count instead of a time (null when not given, NaN when not a whole number above 0). */
function parseExecutions(argv) {
  const at = argv.indexOf('--executions');
  if (at < 0) return null;
  const executions = Number(argv[at + 1]);
  return Number.isInteger(executions) && executions > 0 ? executions : NaN;
}

function parseTarget(argv) {
  const at = argv.indexOf('--target');
  // `--except NAME`: every target but that one (npm test runs the Smolfile fuzzer's 3,000 mutants as a unit test).
  const except = argv.indexOf('--except');
  if (at < 0 && except >= 0) {
    const rest = targets.filter((t) => t.name !== argv[except + 1]);
    return rest.length < targets.length ? rest : null;
  }
  if (at < 0) return targets;
  const chosen = targets.filter((t) => t.name === argv[at + 1]);
  return chosen.length ? chosen : null;
}

function runFuzzer(target, { seconds, executions }, logFile) {
  const args = [
    executions ? `-runs=${executions}` : `-max_total_time=${seconds}`,
    '-max_len=65536', // the 2-vCPU snapshot seed is 15 KiB, the virtqueue seeds 40 KiB
    '-timeout=10',
    `-artifact_prefix=${crashes}/`,
    '-print_final_stats=1',
    path.join(out, target.corpus),
    path.join(out, `seeds-${target.name}`),
  ];
  return new Promise((resolve) => {
    const log = fs.openSync(path.join(root, logFile), 'w');
    const child = spawn(path.join(root, out, target.fuzzer), args, { cwd: root, stdio: ['ignore', log, log] });
    // libFuzzer stops itself after max_total_time or its runs; this only guards against a hang outside any input.
    const guard = setTimeout(() => child.kill('SIGKILL'), executions ? 12 * 3600_000 : (seconds + 120) * 1000);
    child.on('error', (error) => (clearTimeout(guard), fs.closeSync(log), resolve({ status: null, error })));
    child.on('close', (status, signal) => (clearTimeout(guard), fs.closeSync(log), resolve({ status, signal })));
  });
}

/** A TypeScript fuzzer: its vitest file for `seconds` or `executions`, from a fresh seed (printed, to run it again). */
function fuzzScript(target, { seconds, executions }) {
  const seed = Number(process.env.SMOL_FUZZ_SEED ?? Date.now() % 2 ** 31);
  const budget = executions ? { SMOL_FUZZ_RUNS: String(executions) } : { SMOL_FUZZ_SECONDS: String(seconds) };
  say(`running ${target.test} for ${executions ? `${executions} mutants` : `${seconds} s`} from seed ${seed}`);
  const run = spawnSync('npx', ['vitest', 'run', '--project', 'unit', target.test], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, ...budget, SMOL_FUZZ_SEED: String(seed) },
  });
  if (run.status === 0) return 0;
  const again = Object.entries(budget).map(([k, v]) => `${k}=${v}`);
  return fail(
    `${target.what} failed (a mutant that broke its property is named above, else the test says why); again: ` +
      `${again} SMOL_FUZZ_SEED=${seed} npx vitest run --project unit ${target.test}`,
  );
}

/** Runs one fuzzer; returns 0, or 1 after saying why it failed. */
async function fuzzOne(target, budget) {
  if (target.test) return fuzzScript(target, budget);
  const seeds = path.join(out, `seeds-${target.name}`);
  const logFile = path.join(out, `fuzz-${target.name}.log`);
  fs.rmSync(path.join(root, seeds), { recursive: true, force: true });
  fs.mkdirSync(path.join(root, seeds), { recursive: true });
  fs.mkdirSync(path.join(root, out, target.corpus), { recursive: true });
  if (spawnSync(path.join(root, out, target.seedsBin), [seeds], { cwd: root, stdio: 'inherit' }).status !== 0) {
    return fail(`could not write the seed corpus of ${target.what}`);
  }

  const { seconds, executions } = budget;
  const started = Date.now();
  say(
    `running ${path.join(out, target.fuzzer)} for ${executions ? `${executions} runs` : `${seconds} s`} (log: ${logFile})`,
  );
  const result = await runFuzzer(target, budget, logFile);
  const took = Math.round((Date.now() - started) / 1000);
  const log = fs.readFileSync(path.join(root, logFile), 'utf8');
  const stat = (name) => new RegExp(`^stat::${name}:\\s+(\\d+)`, 'm').exec(log)?.[1] ?? '?';
  const done = /^#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)\/(\S+)/m.exec(log);
  if (done) {
    say(
      `${target.name}: ${done[1]} runs in ${took} s (${stat('average_exec_per_sec')} exec/s); coverage: ` +
        `${done[2]} edges, ${done[3]} features; corpus: ${done[4]} inputs (${done[5]}), ` +
        `${stat('new_units_added')} new this run`,
    );
  }
  const kept = /Test unit written to (\S+)/.exec(log)?.[1];
  if (result.status === 0 && !kept) return 0;

  // The sanitizer's or libFuzzer's report: from its first line to the end of the log.
  const lines = log.split('\n');
  const first = lines.findIndex((l) => /==\d+==\s*ERROR|runtime error:|invariant broken|ALARM|out-of-memory/.test(l));
  process.stderr.write(`${lines.slice(first >= 0 ? first : -40).join('\n')}\n`);
  if (!kept)
    return fail(`the fuzzer ended with ${result.error?.message ?? result.signal ?? `status ${result.status}`}`);
  const kind = path.basename(kept).split('-')[0]; // crash, leak, timeout, oom, slow-unit
  return fail(`${kind} in ${target.what}, input ${kept}; reproduce with: ${path.join(out, target.fuzzer)} ${kept}`);
}

async function main() {
  const argv = process.argv.slice(2);
  const seconds = parseSeconds(argv);
  if (seconds === null) return fail('--seconds needs a whole number of seconds above 0');
  const executions = parseExecutions(argv);
  if (Number.isNaN(executions)) return fail('--executions needs a whole number above 0');
  if (executions && argv.includes('--seconds')) return fail('give --seconds or --executions, not both');
  const chosen = parseTarget(argv);
  if (!chosen) return fail(`--target and --except take one of: ${targets.map((t) => t.name).join(', ')}`);
  if (chosen.some((t) => !t.test)) {
    if (spawnSync('clang', ['--version'], { stdio: 'ignore' }).error) {
      return fail(
        'clang is not installed; run `bash scripts/setup-system.sh` (it installs clang and libclang-rt-14-dev)',
      );
    }
    if (spawnSync('make', ['-C', 'native', 'fuzz'], { cwd: root, stdio: 'inherit' }).status !== 0) {
      return fail("`make -C native fuzz` failed (libFuzzer's runtime comes with libclang-rt-14-dev)");
    }
  }
  fs.mkdirSync(path.join(root, crashes), { recursive: true });
  for (const target of chosen) {
    if ((await fuzzOne(target, { seconds, executions })) !== 0) return 1;
  }
  return 0;
}

process.exitCode = await main();
