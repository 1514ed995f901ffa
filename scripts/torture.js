#!/usr/bin/env node
// `npm run torture -- [--iterations N] [--seed S] [--home DIR] [--keep] [--json]`: the crash-point harness
// (docs/engine.md, "Crash points"; src/torture/torture.ts) over the built engine (npm run build). It kills the
// engine, a vmhost or both with SIGKILL at named points and random moments, N times (default 30), and after each
// kill checks that the next engine starts, the store checks clean and every snapshot restores and runs. Exit 0 when
// every kill was survived, 1 otherwise (the data dir is kept and named).
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';

const entry = new URL('../dist/src/torture/torture.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('torture: not built yet; run npm run build\n');
  process.exit(2);
}
let values;
try {
  ({ values } = parseArgs({
    options: {
      iterations: { type: 'string', default: '30' },
      seed: { type: 'string' },
      home: { type: 'string' },
      keep: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  }));
} catch (error) {
  process.stderr.write(`torture: ${error.message}\n`);
  process.exit(2);
}
const iterations = Number(values.iterations);
if (!Number.isInteger(iterations) || iterations < 1) {
  process.stderr.write(`torture: --iterations takes a whole number of at least 1 (got ${values.iterations})\n`);
  process.exit(2);
}
const { torture } = await import(entry.href);
const report = await torture({
  iterations,
  ...(values.seed !== undefined && { seed: Number(values.seed) }),
  ...(values.home !== undefined && { home: values.home }),
  keep: values.keep,
  log: values.json ? undefined : (line) => process.stdout.write(`${line}\n`),
});
if (values.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
else {
  process.stdout.write(`\ntorture: seed ${report.seed}, ${report.iterations} iterations\n`);
  for (const [point, p] of Object.entries(report.points)) {
    process.stdout.write(`  ${point.padEnd(28)} tried ${p.tried}, fired ${p.fired}, survived ${p.survived}\n`);
  }
  process.stdout.write(
    `  ${'random kills'.padEnd(28)} tried ${report.random.tried}, survived ${report.random.survived}\n`,
  );
  for (const f of report.failures) process.stdout.write(`FAILED (iteration ${f.iteration}, ${f.kill}): ${f.problem}\n`);
  if (report.failures.length) process.stdout.write(`the data dir is kept: ${report.home}\n`);
}
process.exit(report.failures.length ? 1 : 0);
