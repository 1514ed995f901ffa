// `smol bench <name>`: performance figures, printed as medians and p90 (never pass/fail).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { benchVmCreate, type BenchResult } from '../bench/vm-create.js';
import { tinyGuestDir } from '../smol-dirs.js';
import { parseFlags, parseIntegerFlag } from './args.js';
import { CommandError, UsageError } from './errors.js';

export const BENCHMARKS = ['vm-create'] as const;
export const DEFAULT_BENCH_GUEST = path.join(tinyGuestDir, 'hello.elf');

export const BENCH_HELP = `Usage: smol bench <name> [--json] [--runs N] [--kernel FILE]

Benchmarks:
  vm-create   create → first serial byte of a printing guest, and a create+kill cycle

Options:
  --runs N       measured runs per metric, 1 to 10000 (default 20; one warm-up run is not counted)
  --kernel FILE  guest that prints to COM1 (default ${path.relative(process.cwd(), DEFAULT_BENCH_GUEST)})
  --json         print the results as JSON
  -h, --help     show this help

Prints the median (p50) and p90 of each metric. Absolute times mean something only on hardware
KVM; under PVM or in the lab compare ratios. Exit status: 0 done, 1 the benchmark failed, 2 usage error.
`;

export interface BenchArgs {
  name: (typeof BENCHMARKS)[number];
  json: boolean;
  runs: number;
  kernel: string;
}

export function parseBenchArgs(argv: string[]): BenchArgs | 'help' {
  const [name, ...rest] = argv;
  if (name === undefined) throw new UsageError('bench', `name a benchmark: ${BENCHMARKS.join(', ')}`);
  if (name === '--help' || name === '-h') return 'help';
  if (name.startsWith('-')) throw new UsageError('bench', `the benchmark name comes first (got ${name})`);
  if (!(BENCHMARKS as readonly string[]).includes(name)) {
    throw new UsageError('bench', `unknown benchmark ${name} (known: ${BENCHMARKS.join(', ')})`);
  }
  const flags = parseFlags('bench', rest, {
    json: { type: 'boolean', default: false },
    runs: { type: 'string' },
    kernel: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (flags.help) return 'help';
  if (flags.kernel === '') throw new UsageError('bench', '--kernel needs a file');
  return {
    name: name as BenchArgs['name'],
    json: flags.json,
    runs: parseIntegerFlag('bench', '--runs', flags.runs, { min: 1, max: 10_000, default: 20 }),
    kernel: path.resolve(flags.kernel ?? DEFAULT_BENCH_GUEST),
  };
}

export function formatBenchResult(result: BenchResult): string {
  const { kvm, inLab } = result.host;
  const where = `KVM ${kvm.implementation}${inLab ? ', in the lab' : ''}`;
  const width = Math.max('metric'.length, ...result.results.map((r) => r.metric.length));
  const lines = [
    `${result.name}: ${result.runs} runs after ${result.warmup} warm-up, guest ${result.guest} (${where})`,
    `${'metric'.padEnd(width)}  ${'p50 ms'.padStart(9)}  ${'p90 ms'.padStart(9)}`,
    ...result.results.map(
      (r) => `${r.metric.padEnd(width)}  ${r.p50_ms.toFixed(3).padStart(9)}  ${r.p90_ms.toFixed(3).padStart(9)}`,
    ),
  ];
  return lines.join('\n') + '\n';
}

export async function runBench(argv: string[]): Promise<number> {
  const args = parseBenchArgs(argv);
  if (args === 'help') {
    process.stdout.write(BENCH_HELP);
    return 0;
  }
  if (!existsSync(args.kernel)) {
    const fix = args.kernel === DEFAULT_BENCH_GUEST ? '; run make -C native guests' : '';
    throw new CommandError(`guest ${args.kernel} does not exist${fix}`);
  }
  const result = await benchVmCreate({ guest: args.kernel, runs: args.runs });
  process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : formatBenchResult(result));
  return 0;
}
