#!/usr/bin/env node
// The README's benchmark table (issue 16, item 4), regenerated from `smol bench … --json` files: each row of the
// issue's table with the figure the issue was filed with ("at filing") and the one measured, dated, with the host's
// load. The boot ratio comes from the KVM lab; its row is filled when a `bench boot --json` file from the lab is in
// the directory, and says so when none is.
//
//   node scripts/bench-table.js [--dir DIR] [--readme FILE] [--run] [--runs N] [--smol FILE] [--print]
//
// --run first runs each benchmark into DIR (`node SMOL bench NAME --json`, SMOL default bin/smol.js), one after
// another; without it the JSON files already in DIR are read, each recognized by its content (its `name` and the
// guest RAM of its metrics), whatever its file name. The table goes between the markers below in README.md (or
// --readme); --print writes it to stdout instead.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const BEGIN = '<!-- bench-table:begin (scripts/bench-table.js writes this table) -->';
export const END = '<!-- bench-table:end -->';

/** The benchmarks the table needs, as run by --run: file name and the `smol bench` arguments. */
export const RUNS = [
  { file: 'restore-256.json', args: ['restore', '--memory', '256'] },
  { file: 'restore-2048.json', args: ['restore', '--memory', '2048'] },
  { file: 'fork-256.json', args: ['fork', '--memory', '256'] },
  { file: 'fork-2048.json', args: ['fork', '--memory', '2048'] },
  { file: 'fanout-256.json', args: ['fanout', '--memory', '256', '--forks', '64'] },
  { file: 'vm-create.json', args: ['vm-create'] },
  { file: 'snapshot-256.json', args: ['snapshot', '--memory', '256'] },
  { file: 'snapshot-2048.json', args: ['snapshot', '--memory', '2048'] },
];

/** A benchmark result file: its parsed JSON, where it came from, and the date it was measured. */
function readResults(dir) {
  const found = [];
  for (const name of readdirSync(dir).sort()) {
    if (!name.endsWith('.json')) continue;
    const file = path.join(dir, name);
    let result;
    try {
      result = JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new Error(`${file}: not JSON (${err.message})`);
    }
    if (typeof result?.name !== 'string' || !Array.isArray(result.results)) {
      throw new Error(`${file}: not a smol bench --json result (no name and results)`);
    }
    found.push({ file, result, measuredAt: result.host?.measuredAt ?? statSync(file).mtime.toISOString() });
  }
  return found;
}

/** The p50 of the metric named `metric` in the one result of benchmark `name` that has it, with that result. */
function pick(found, name, metric) {
  const hits = found.filter((f) => f.result.name === name && f.result.results.some((m) => m.metric === metric));
  if (hits.length > 1) {
    throw new Error(`two files measure "${metric}": ${hits.map((h) => h.file).join(' and ')}; keep one`);
  }
  if (hits.length === 0) return null;
  const m = hits[0].result.results.find((x) => x.metric === metric);
  if (typeof m.p50_ms !== 'number') throw new Error(`${hits[0].file}: "${metric}" has no p50_ms`);
  return { p50: m.p50_ms, from: hits[0] };
}

const fmt = (ms) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));
const pair = (a, b) => `${a ? fmt(a.p50) : '—'} / ${b ? fmt(b.p50) : '—'}`;
const met = (ok) => (ok === null ? '' : ok ? 'met' : '**missed**');

/** The boot ratio from a lab `bench boot --json` file, if there is one. */
function bootRatio(found) {
  const boots = found.filter((f) => f.result.name === 'boot' && typeof f.result.ratio?.p50 === 'number');
  const lab = boots.filter((f) => f.result.host?.inLab === true);
  if (lab.length > 1) throw new Error(`two lab boot results: ${lab.map((h) => h.file).join(' and ')}; keep one`);
  return lab[0] ?? null;
}

/** The table's rows: [figure, at filing, measured, anchor, goal, met], and the files they came from. */
export function tableRows(found) {
  const used = new Set();
  const use = (x) => {
    if (x) used.add(x.from);
    return x;
  };
  const restore = [256, 2048].map((m) => use(pick(found, 'restore', `${m} MiB restore to a running guest`)));
  const fork = [256, 2048].map((m) => use(pick(found, 'fork', `${m} MiB fork to a running child`)));
  const fanResolved = use(pick(found, 'fanout', '256 MiB fork(64) resolved'));
  const fanEchoed = use(pick(found, 'fanout', '256 MiB fork(64) all echoed'));
  const create = use(pick(found, 'vm-create', 'create-to-first-byte'));
  const pause = [256, 2048].map((m) => use(pick(found, 'snapshot', `${m} MiB diff 10 MiB dirty: pause`)));
  const write = [256, 2048].map((m) => use(pick(found, 'snapshot', `${m} MiB diff 10 MiB dirty: write`)));
  const boot = bootRatio(found);
  if (boot) used.add(boot);

  const all = (xs, ok) => (xs.every(Boolean) ? xs.every((x) => ok(x.p50)) : null);
  let fanout = '—';
  let fanoutMet = null;
  if (fanEchoed) {
    fanout = `${fmt(fanEchoed.p50)} ms (resolved ${fanResolved ? fmt(fanResolved.p50) : '—'} ms)`;
    if (fork[0]) {
      const ratio = fanEchoed.p50 / (64 * fork[0].p50);
      fanout += ` = ${ratio.toFixed(2)} × 64 × \`fork(1)\``;
      fanoutMet = ratio <= 0.3;
    }
  }
  const rows = [
    [
      'restore to a running guest, 256 MiB / 2 GiB',
      '8.7 / 8.2 ms',
      `${pair(...restore)} ms`,
      'Firecracker 2–9 ms, zeroboot 0.79 ms',
      '≤ 5 ms',
      met(all(restore, (v) => v <= 5)),
    ],
    [
      'fork to a running child, 256 MiB / 2 GiB',
      '7.8 / 7.1 ms',
      `${pair(...fork)} ms`,
      'zeroboot 0.79 ms',
      '≤ 5 ms',
      met(all(fork, (v) => v <= 5)),
    ],
    [
      '`fork(64)` until all run (echoed a byte), 256 MiB',
      '515 ms: each child costs a whole `fork(1)`',
      fanout,
      'zeroboot 1,000 in 815 ms, forkd 100 in 101 ms',
      '≤ 0.3 × 64 × `fork(1)`',
      met(fanoutMet),
    ],
    [
      'create to first byte of a tiny guest',
      '10.2 ms',
      create ? `${fmt(create.p50)} ms` : '—',
      "Firecracker's boot budget is 125 ms for Linux",
      '≤ 5 ms',
      met(create ? create.p50 <= 5 : null),
    ],
    [
      'checkpoint pause with 10 MiB dirty, 256 MiB / 2 GiB',
      '4.5 / 5.9 ms',
      `${pair(...pause)} ms`,
      'smolvm 24–48 ms',
      'keep ≤ 10 ms',
      met(all(pause, (v) => v <= 10)),
    ],
    [
      'checkpoint write with 10 MiB dirty, 256 MiB / 2 GiB',
      '25 / 32 ms',
      `${pair(...write)} ms`,
      'Firecracker diff 70 ms',
      '≤ 15 ms',
      met(all(write, (v) => v <= 15)),
    ],
    [
      'boot to ready against QEMU microvm (lab), ratio',
      '0.88 and 0.96 in two runs; 0.64 on 2026-11-30',
      boot ? `${boot.result.ratio.p50.toFixed(2)} (${boot.measuredAt.slice(0, 10)})` : 'no lab boot JSON given',
      'Firecracker ≤ 125 ms',
      '≤ 0.5',
      met(boot ? boot.result.ratio.p50 <= 0.5 : null),
    ],
  ];
  return { rows, used: [...used] };
}

/** The table as Markdown, with where and when its figures were measured. */
export function renderTable(found) {
  const { rows, used } = tableRows(found);
  if (used.length === 0) throw new Error('none of the files measures a figure of the table');
  const dates = used.map((f) => f.measuredAt).sort();
  const loads = used.map((f) => f.result.host?.loadAverageAtStart?.[0]).filter((l) => typeof l === 'number');
  const hosts = [
    ...new Set(
      used.map((f) => (f.result.host?.inLab ? 'the KVM lab' : (f.result.host?.kvm?.implementation ?? 'unknown'))),
    ),
  ];
  const day = (iso) => iso.slice(0, 16).replace('T', ' ');
  const span = day(dates[0]) === day(dates.at(-1)) ? day(dates[0]) : `${day(dates[0])} to ${day(dates.at(-1))}`;
  const dated = used.every((f) => f.result.host?.measuredAt) ? '' : ' (files without measuredAt: their mtime)';
  const lines = [
    `Measured ${span} UTC${dated} on ${hosts.join(' and ')} ` +
      `(${used.length} \`smol bench … --json\` files${loads.length ? `, load average ${Math.min(...loads)}–${Math.max(...loads)} at their start` : ''}); ` +
      'p50 of each; "at filing" is what issue 16 was filed with.',
    '',
    '| figure | at filing (p50) | measured (p50) | anchor | goal | |',
    '| --- | --- | --- | --- | --- | --- |',
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ];
  return lines.join('\n');
}

/** README text with the table between the markers replaced. */
export function replaceTable(readme, table, where = 'README.md') {
  const begin = readme.indexOf(BEGIN);
  const end = readme.indexOf(END);
  if (begin < 0 || end < 0 || end < begin) {
    throw new Error(`${where} has no ${BEGIN} … ${END} markers to write the table between`);
  }
  return `${readme.slice(0, begin + BEGIN.length)}\n${table}\n${readme.slice(end)}`;
}

function parseArgs(argv) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const o = {
    dir: null,
    readme: path.join(root, 'README.md'),
    run: false,
    runs: null,
    smol: path.join(root, 'bin', 'smol.js'),
    print: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--dir') o.dir = path.resolve(value());
    else if (a === '--readme') o.readme = path.resolve(value());
    else if (a === '--smol') o.smol = path.resolve(value());
    else if (a === '--run') o.run = true;
    else if (a === '--print') o.print = true;
    else if (a === '--runs') {
      o.runs = Number(value());
      if (!Number.isInteger(o.runs) || o.runs < 1)
        throw new Error(`--runs takes a whole number of at least 1 (got ${argv[i]})`);
    } else throw new Error(`unknown option ${a} (known: --dir, --readme, --run, --runs, --smol, --print)`);
  }
  if (!o.dir) throw new Error('--dir DIR: where the --json files are (or go, with --run)');
  return o;
}

function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.run) {
    mkdirSync(o.dir, { recursive: true });
    for (const { file, args } of RUNS) {
      const full = [o.smol, 'bench', ...args, '--json', ...(o.runs ? ['--runs', String(o.runs)] : [])];
      process.stderr.write(`bench-table: node ${full.join(' ')}\n`);
      const run = spawnSync(process.execPath, full, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
      if (run.status !== 0) throw new Error(`smol bench ${args.join(' ')} failed (status ${run.status})`);
      writeFileSync(path.join(o.dir, file), run.stdout);
    }
  }
  const table = renderTable(readResults(o.dir));
  if (o.print) process.stdout.write(`${table}\n`);
  else writeFileSync(o.readme, replaceTable(readFileSync(o.readme, 'utf8'), table, o.readme));
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    main();
  } catch (err) {
    process.stderr.write(`bench-table: ${err.message}\n`);
    process.exit(1);
  }
}

export { readResults };
