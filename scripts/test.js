#!/usr/bin/env node
// `npm test`: every test tier, in order: the C tests, 30-second runs of the fuzzers (the snapshot loader, virtqueue
// handling, the vsock device, the network policy, the .smolmachine reader, the host side of the agent protocol and
// the API request parser), the unit tests, the VMM tests with real VMs (on this machine's /dev/kvm when it is usable,
// PVM included, else inside the KVM lab), the UI end-to-end tests (Chromium against a real engine with tiny guests:
// on this machine's /dev/kvm when it is usable, PVM included, else with the engine in the KVM lab), then the Linux
// guest tests (after building the guest and the Debian image of smolfiles/debian.smolfile, or finding them in the
// cache) on hardware KVM only, else in the lab (PVM cannot run a Linux guest). Nothing is skipped silently: a part that cannot run counts as a failure. Ends with
// exactly one line `N passed, N failed`; exits non-zero if anything failed.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// Inside the checkout on purpose: the lab shares the checkout writable, so results written there come back out.
const resultsDir = path.join(root, 'test-results');

const stripAnsi = (text) => text.replace(/\x1b\[[0-9;]*[A-Za-z]/g, ''); // eslint-disable-line no-control-regex

function note(message) {
  process.stderr.write(`test: ${message}\n`);
}

/** Runs a command from the checkout, streaming its output while keeping a copy to read counts from. */
function run(argv, extraEnv = {}) {
  return new Promise((resolve) => {
    const env = { ...process.env, ...extraEnv };
    if (process.stdout.isTTY && !env.NO_COLOR) env.FORCE_COLOR ??= '1';
    const child = spawn(argv[0], argv.slice(1), { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (data) => ((output += data), process.stdout.write(data)));
    child.stderr.on('data', (data) => ((output += data), process.stderr.write(data)));
    child.on('error', (error) => resolve({ status: null, output, error: error.message }));
    child.on('close', (code, signal) => resolve({ status: code, signal, output }));
  });
}

/** The C test runner's last line: `N passed, N failed`. */
function countsFromSummaryLine(output) {
  const matches = [...stripAnsi(output).matchAll(/^\s*(\d+) passed, (\d+) failed\s*$/gm)];
  const last = matches.at(-1);
  return last ? { passed: Number(last[1]), failed: Number(last[2]) } : null;
}

/** Vitest's JSON report; a test file that failed to load counts as one failed test. */
function countsFromVitestJson(report) {
  const brokenFiles = (report.testResults ?? []).filter(
    (file) => file.status === 'failed' && (file.assertionResults ?? []).length === 0,
  ).length;
  const retried = (report.testResults ?? []).flatMap((file) =>
    (file.assertionResults ?? [])
      .filter((test) => test.status === 'passed' && (test.failureMessages ?? []).length > 0)
      .map((test) => ({ name: test.fullName, firstFailure: test.failureMessages[0] })),
  );
  return {
    passed: report.numPassedTests,
    failed: report.numFailedTests + brokenFiles,
    skipped: (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0),
    retried,
  };
}

/** Vitest's default reporter summary (` Tests  1 failed | 5 passed (6)`), for when no JSON report came back. */
function countsFromVitestText(output) {
  const line = stripAnsi(output)
    .split('\n')
    .findLast((l) => /^\s*Tests\s+.*\(\d+\)\s*$/.test(l));
  if (!line) return null;
  const count = (word) => Number(new RegExp(`(\\d+) ${word}`).exec(line)?.[1] ?? 0);
  return { passed: count('passed'), failed: count('failed'), skipped: count('skipped') + count('todo') };
}

function vitestCommand(project, jsonFile) {
  return [
    'npx',
    '--no-install',
    'vitest',
    'run',
    '--project',
    project,
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${jsonFile}`,
  ];
}

async function vitestPart(name, project, wrap = (argv) => argv, env = {}, shard = null) {
  const jsonFile = path.join(resultsDir, `vitest-${project}${shard ? `-${shard.replace('/', '-of-')}` : ''}.json`);
  fs.rmSync(jsonFile, { force: true });
  const argv = vitestCommand(project, jsonFile);
  if (shard) argv.push(`--shard=${shard}`);
  const result = await run(wrap(argv), env);
  let counts = null;
  try {
    counts = countsFromVitestJson(JSON.parse(fs.readFileSync(jsonFile, 'utf8')));
  } catch {
    counts = countsFromVitestText(result.output);
  }
  return { name, result, counts };
}

async function cPart() {
  const result = await run(['make', '-C', 'native', 'test']);
  return { name: 'C tests (make -C native test)', result, counts: countsFromSummaryLine(result.output) };
}

/** Bounded runs of the fuzzers (scripts/fuzz.js), 30 s each; counts as one test. */
async function fuzzPart() {
  const name =
    'fuzzing: snapshot loader, virtqueues, vsock, network policy, .smolmachine reader, agent protocol, API requests ' +
    '(npm run fuzz -- --seconds 30 --except smolfile)';
  // Not the Smolfile parser's: its unit test runs 3,000 mutants of it already.
  const fuzz = [path.join(root, 'scripts', 'fuzz.js'), '--seconds', '30', '--except', 'smolfile'];
  const result = await run([process.execPath, ...fuzz]);
  if (result.status === 0) return { name, result, counts: { passed: 1, failed: 0 } };
  const reason = /^fuzz failed: (.*)$/m.exec(stripAnsi(result.output))?.[1];
  return { name, result, problem: `failed: ${reason ?? `exit ${result.error ?? result.signal ?? result.status}`}` };
}

function kvmUsable() {
  try {
    fs.closeSync(fs.openSync('/dev/kvm', 'r+'));
    return true;
  } catch {
    return false;
  }
}

/**
 * Which KVM this machine has, as `smol doctor --json` reports it (`hardware`, `pvm` or `unknown`); null when it
 * cannot tell. PVM (KVM in software) runs the tiny guests well but not a Linux guest.
 */
function kvmImplementation() {
  const doctor = spawnSync(process.execPath, [path.join(root, 'bin', 'smol.js'), 'doctor', '--json'], {
    cwd: root,
    encoding: 'utf8',
  });
  try {
    return JSON.parse(doctor.stdout).kvm?.implementation ?? null;
  } catch {
    return null;
  }
}

/**
 * A vitest project whose tests need KVM: on this machine's /dev/kvm when it is usable (for `needs: 'hardware'`, only
 * when it is hardware KVM), else inside the KVM lab. `after` (a function giving a part) runs when the project's tests
 * end, or when the last lab shard ends: sharded, its parts come back as an array, `after`'s last.
 */
async function kvmPart(label, project, { needs = 'any', labShards = 1, after = null } = {}) {
  const usable = kvmUsable();
  const implementation = usable ? kvmImplementation() : null;
  const andAfter = async (part) => (after ? [part, await after()] : part);
  if (usable && (needs === 'any' || implementation === 'hardware')) {
    return andAfter(await vitestPart(`${label} (this machine’s /dev/kvm)`, project));
  }
  if (usable)
    note(
      `/dev/kvm here is ${implementation ?? 'of an unknown kind'}, not hardware KVM; the ${label} run in the KVM lab`,
    );
  const name = `${label} (KVM lab)`;
  if (process.env.SMOL_IN_LAB === '1') {
    return andAfter({ name, problem: 'running inside the KVM lab, but /dev/kvm is not usable there' });
  }
  const lab = path.join(root, 'scripts', 'lab.js');
  if (!fs.existsSync(lab))
    return andAfter({ name, problem: `/dev/kvm is not usable here and there is no KVM lab (${lab})` });
  if (!usable) note(`/dev/kvm is not usable here; running the ${label} in the KVM lab`);
  // A lab run that prints nothing for 15 minutes has hung: the lab is asked what it was doing (the log it names) and
  // stopped, instead of using up the 30-minute timeout. Vitest prints a file's results when it ends, and the longest
  // file (smolmachine.test.ts) took 535 s in a lab on 2026-12-03 with other work on the host: 10 minutes was too close.
  // Each lab VM gets 40 minutes, not the lab's default 30: on 2026-12-03 both Linux shards of a clean-clone CI here
  // ran out of 30 minutes with 18 of 22 files passed (about 1,900 s of lab work each on this shared host).
  const inLab = (argv) => [process.execPath, lab, '--timeout', '2400', '--stall', '900', '--', ...argv];
  if (labShards === 1) return andAfter(await vitestPart(name, project, inLab));
  // The Linux guest tests take longer than one lab's 30 minutes in a row (about 40 in all on 2026-12-02): their files
  // are split over labShards lab VMs at once (vitest --shard), one TCG vCPU each, each with its own timeout and count,
  // by each file's measured lab time (scripts/lab/shards.js, tests/linux/lab-seconds.json), not vitest's equal counts.
  // `after` follows the last shard, which is given that much less (lab-seconds.json's afterLastShard), so that it
  // runs beside the other shards' end instead of after all of them.
  const shards = Array.from({ length: labShards }, (_, i) => `${i + 1}/${labShards}`);
  const ran = await Promise.all(
    shards.map(async (shard, i) => {
      const part = await vitestPart(`${name}, shard ${shard}`, project, inLab, {}, shard);
      return i === labShards - 1 ? andAfter(part) : part;
    }),
  );
  return ran.flat();
}

/**
 * The UI end-to-end tests (e2e/): Chromium here against a real engine with real tiny guests. The engine runs here when
 * /dev/kvm is usable (PVM runs the tiny guests well), else in the KVM lab (SMOL_E2E_LAB=1: the test starts the lab
 * and reaches the engine through a forwarded port).
 */
async function e2ePart() {
  const label = 'UI end-to-end tests';
  if (kvmUsable()) return vitestPart(`${label} (this machine’s /dev/kvm)`, 'e2e');
  const name = `${label} (engine in the KVM lab)`;
  if (process.env.SMOL_IN_LAB === '1') {
    return { name, problem: 'running inside the KVM lab, but /dev/kvm is not usable there' };
  }
  note(`/dev/kvm is not usable here; the ${label} run the engine in the KVM lab (SMOL_E2E_LAB=1)`);
  return vitestPart(name, 'e2e', (argv) => argv, { SMOL_E2E_LAB: '1' });
}

/**
 * The Linux guest the Linux tests boot: `smol guest build` reuses the cached build when the recipe did not change
 * (seconds) and builds it otherwise (10 to 20 minutes on 2 cores, once per recipe). Counts as one test.
 */
async function guestBuildPart() {
  const name = 'Linux guest build (smol guest build)';
  const result = await run([process.execPath, path.join(root, 'bin', 'smol.js'), 'guest', 'build']);
  const ok = result.status === 0;
  return { name, result, counts: { passed: ok ? 1 : 0, failed: ok ? 0 : 1 } };
}

/**
 * The Debian image smolfiles/debian.smolfile asks for (docs/images.md), built on this machine (mmdebstrap needs the
 * network, which the lab lacks) so that the Linux tests find it by its cache key. A failed build does not stop them:
 * the test of the image then fails saying what to run.
 */
async function debianImagePart() {
  const name = 'Debian image build (smol image build -f smolfiles/debian.smolfile)';
  const smolfile = path.join(root, 'smolfiles', 'debian.smolfile');
  const result = await run([process.execPath, path.join(root, 'bin', 'smol.js'), 'image', 'build', '-f', smolfile]);
  const ok = result.status === 0;
  return { name, result, counts: { passed: ok ? 1 : 0, failed: ok ? 0 : 1 } };
}

/** pytest's JUnit XML (`<testsuite tests= failures= errors= skipped=>`), else its summary line (`3 passed, 1 failed`). */
function countsFromPytest(xmlFile, output) {
  let xml = '';
  try {
    xml = fs.readFileSync(xmlFile, 'utf8');
  } catch {
    // no report: read the summary line below
  }
  const suite = /<testsuite\b([^>]*)>/.exec(xml)?.[1];
  const attr = (source, name) => Number(new RegExp(`\\b${name}="(\\d+)"`).exec(source)?.[1] ?? 0);
  if (suite) {
    const [failed, skipped] = [attr(suite, 'failures') + attr(suite, 'errors'), attr(suite, 'skipped')];
    return { passed: attr(suite, 'tests') - failed - skipped, failed, skipped };
  }
  const line = stripAnsi(output)
    .split('\n')
    .findLast((l) => /\d+ (passed|failed|error)/.test(l));
  if (!line) return null;
  const count = (word) => Number(new RegExp(`(\\d+) ${word}`).exec(line)?.[1] ?? 0);
  return { passed: count('passed'), failed: count('failed') + count('error'), skipped: count('skipped') };
}

/**
 * The Python SDK's tests (sdk/python/tests) with Debian's python3 and python3-pytest (scripts/setup-system.sh), against
 * a real engine: the tiny guests on this machine's /dev/kvm when it is usable (PVM included), else in the KVM lab; the
 * `agent` tests (`agent: true`, after the Linux guest is built) on hardware KVM, else in the lab. pytest's exit 5 (no
 * tests collected) is a failure.
 */
async function pytestPart({ agent = false } = {}) {
  const here = agent ? kvmUsable() && kvmImplementation() === 'hardware' : kvmUsable();
  const name = `Python SDK ${agent ? 'agent tests' : 'tests'} (pytest, ${here ? 'this machine’s /dev/kvm' : 'KVM lab'})`;
  if (!here && process.env.SMOL_IN_LAB === '1')
    return { name, problem: 'running inside the KVM lab, but its /dev/kvm cannot run them' };
  const xmlFile = path.join(resultsDir, agent ? 'pytest-agent.xml' : 'pytest.xml');
  fs.rmSync(xmlFile, { force: true });
  const pytest = ['/usr/bin/python3', '-m', 'pytest', 'sdk/python/tests', '-rs', `--junitxml=${xmlFile}`];
  const argv = ['env', `SMOL_PYTEST_AGENT=${agent ? 1 : 0}`, ...pytest, '-m', agent ? 'agent' : 'not agent'];
  const lab = [process.execPath, path.join(root, 'scripts', 'lab.js'), '--stall', '600', '--'];
  const result = await run(here ? argv : [...lab, ...argv]);
  if (result.status === 5) return { name, result, problem: 'collected no tests (pytest exit 5)' };
  return { name, result, counts: countsFromPytest(xmlFile, result.output) };
}

/** Turns one part's outcome into counts; a part that did not run or did not report counts as one failure. */
function settle(part) {
  const { name, result, counts } = part;
  const exit = result ? (result.error ?? (result.signal ? `signal ${result.signal}` : `status ${result.status}`)) : '';
  let problem = part.problem;
  if (!problem && !counts) problem = `reported no test counts (exit ${exit})`;
  else if (!problem && result.status !== 0 && counts.failed === 0) problem = `failed outside any test (exit ${exit})`;
  const passed = counts?.passed ?? 0;
  const failed = (counts?.failed ?? 0) + (problem ? 1 : 0);
  const skipped = counts?.skipped ? `, ${counts.skipped} skipped` : '';
  const retried = counts?.retried?.length ? `, ${counts.retried.length} of them only on a retry` : '';
  for (const test of counts?.retried ?? []) {
    const first = stripAnsi(test.firstFailure).split('\n').slice(0, 6).join('\n    ');
    note(`${name}: "${test.name}" passed only on its retry; its first attempt failed:\n    ${first}`);
  }
  return { name, passed, failed, line: `${name}: ${passed} passed${retried}, ${failed} failed${skipped}`, problem };
}

async function main() {
  fs.mkdirSync(resultsDir, { recursive: true });
  const parts = [];
  parts.push(settle(await cPart()));
  parts.push(settle(await fuzzPart()));
  parts.push(settle(await vitestPart('unit tests (vitest --project unit)', 'unit')));
  parts.push(settle(await kvmPart('VMM tests', 'vmm')));
  parts.push(settle(await e2ePart()));
  parts.push(settle(await pytestPart()));
  const guest = settle(await guestBuildPart());
  parts.push(guest);
  if (guest.failed === 0) parts.push(settle(await debianImagePart()));
  if (guest.failed === 0) {
    // The Python SDK's agent tests need the Linux guest too: in the lab they follow the last Linux shard.
    const after = () => pytestPart({ agent: true });
    const linux = await kvmPart('Linux guest tests', 'linux', { needs: 'hardware', labShards: 2, after });
    parts.push(...[linux].flat().map(settle));
  } else {
    parts.push(settle({ name: 'Linux guest tests', problem: 'not run: the guest did not build' }));
    parts.push(settle({ name: 'Python SDK agent tests', problem: 'not run: the guest did not build' }));
  }

  process.stdout.write('\n');
  for (const part of parts) {
    process.stdout.write(`${part.line}\n`);
    if (part.problem) note(`${part.name} ${part.problem}`);
  }
  const passed = parts.reduce((sum, part) => sum + part.passed, 0);
  const failed = parts.reduce((sum, part) => sum + part.failed, 0);
  process.stdout.write(`${passed} passed, ${failed} failed\n`);
  return failed > 0 ? 1 : 0;
}

process.exitCode = await main();
