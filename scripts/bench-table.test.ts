// The README's benchmark table (scripts/bench-table.js): each row from the `smol bench --json` file that measures
// it, recognized by content; the boot ratio only from a lab boot file; the table only between its markers.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript script, no declarations
import { BEGIN, END, readResults, renderTable, replaceTable } from './bench-table.js';

const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'bench-table.js');
let dir: string;
beforeEach(() => (dir = mkdtempSync(path.join(tmpdir(), 'smol-bench-table-'))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const host = (extra = {}) => ({
  kvm: { implementation: 'pvm', apiVersion: 12 },
  inLab: false,
  cpus: 2,
  cpuModel: 'x',
  kernel: 'k',
  node: 'v20',
  measuredAt: '2026-12-02T07:00:00.000Z',
  loadAverageAtStart: [0.5, 0.4, 0.3],
  ...extra,
});
const metric = (name: string, p50: number) => ({ metric: name, p50_ms: p50, p90_ms: p50 * 2, samples_ms: [p50] });
function write(file: string, name: string, metrics: [string, number][], extra: object = {}): void {
  const result = { name, runs: 1, warmup: 2, guest: 'g', results: metrics.map(([m, v]) => metric(m, v)), host: host() };
  writeFileSync(path.join(dir, file), JSON.stringify({ ...result, ...extra }));
}
function writeAll(): void {
  write('a.json', 'restore', [['256 MiB restore to a running guest', 1.6]]);
  write('b.json', 'restore', [['2048 MiB restore to a running guest', 3.2]]);
  write('c.json', 'fork', [['256 MiB fork to a running child', 2]]);
  write('d.json', 'fork', [['2048 MiB fork to a running child', 6]]);
  write('e.json', 'fanout', [
    ['256 MiB fork(64) resolved', 20],
    ['256 MiB fork(64) all echoed', 32],
  ]);
  write('f.json', 'vm-create', [['create-to-first-byte', 2.07]]);
  write('g.json', 'snapshot', [
    ['256 MiB diff 10 MiB dirty: pause', 5.6],
    ['256 MiB diff 10 MiB dirty: write', 14],
    ['2048 MiB diff 10 MiB dirty: pause', 5.1],
    ['2048 MiB diff 10 MiB dirty: write', 16],
  ]);
}
const row = (table: string, start: string) => table.split('\n').find((l) => l.startsWith(`| ${start}`));

describe('the README benchmark table', () => {
  it('fills each row from the file that measures it and says which goals were met', () => {
    writeAll();
    const table = renderTable(readResults(dir)) as string;
    expect(table).toContain('Measured 2026-12-02 07:00 UTC on pvm (7 `smol bench … --json` files, load average 0.5');
    expect(row(table, 'restore')).toContain('| 8.7 / 8.2 ms | 1.60 / 3.20 ms |');
    expect(row(table, 'restore')).toMatch(/\| met \|$/);
    // 2048 MiB misses 5 ms: the row is missed, not met.
    expect(row(table, 'fork to')).toContain('2.00 / 6.00 ms');
    expect(row(table, 'fork to')).toMatch(/\*\*missed\*\* \|$/);
    // 32 / (64 × 2) = 0.25: within 0.3.
    expect(row(table, '`fork(64)`')).toContain('32.0 ms (resolved 20.0 ms) = 0.25 × 64 × `fork(1)`');
    expect(row(table, '`fork(64)`')).toMatch(/\| met \|$/);
    expect(row(table, 'checkpoint write')).toContain('| 25 / 32 ms | 14.0 / 16.0 ms |');
    expect(row(table, 'checkpoint write')).toMatch(/\*\*missed\*\* \|$/);
    expect(row(table, 'boot')).toContain('no lab boot JSON given');
  });

  it('takes the boot ratio from a lab boot file only', () => {
    writeAll();
    write('boot-here.json', 'boot', [['ours: create-to-ready', 100]], { ratio: { p50: 0.9, p90: 1 } });
    expect(row(renderTable(readResults(dir)) as string, 'boot')).toContain('no lab boot JSON given');
    write('boot-lab.json', 'boot', [['ours: create-to-ready', 100]], {
      ratio: { p50: 0.45, p90: 0.5 },
      host: host({ inLab: true, measuredAt: '2026-12-02T08:00:00.000Z' }),
    });
    const table = renderTable(readResults(dir)) as string;
    expect(row(table, 'boot')).toContain('| 0.45 (2026-12-02) |');
    expect(row(table, 'boot')).toMatch(/\| met \|$/);
    expect(table).toContain('on pvm and the KVM lab');
  });

  it('refuses two files with the same figure, and a file that is not a bench result', () => {
    writeAll();
    write('z.json', 'restore', [['256 MiB restore to a running guest', 9]]);
    expect(() => renderTable(readResults(dir))).toThrow(/two files measure "256 MiB restore to a running guest"/);
    rmSync(path.join(dir, 'z.json'));
    writeFileSync(path.join(dir, 'y.json'), '{"hello": 1}');
    expect(() => readResults(dir)).toThrow(/y\.json: not a smol bench --json result/);
  });

  it('writes the table between the markers and nowhere else, and names a README without them', () => {
    writeAll();
    const readme = path.join(dir, 'README.md');
    writeFileSync(readme, `# x\n\nbefore\n${BEGIN}\nold table\n${END}\nafter\n`);
    const run = spawnSync(process.execPath, [script, '--dir', dir, '--readme', readme], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const text = readFileSync(readme, 'utf8');
    expect(text.startsWith(`# x\n\nbefore\n${BEGIN}\nMeasured `)).toBe(true);
    expect(text.endsWith(`|\n${END}\nafter\n`)).toBe(true);
    expect(text).not.toContain('old table');
    expect(() => replaceTable('no markers', 'table', 'R.md')).toThrow(/R\.md has no .* markers/);
    const bad = spawnSync(process.execPath, [script, '--dir', dir, '--readme', readme, '--runs', 'x'], {
      encoding: 'utf8',
    });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('--runs takes a whole number');
  });
});
