// The crash-point harness (docs/engine.md, "Crash points"; `npm run torture -- --iterations N`): a real engine with
// tiny guests in one data dir, killed with SIGKILL again and again: at a named point inside an operation
// (src/engine/crash-points.ts) or at a random moment while operations run, the engine, a vmhost or both. After each
// kill the next engine must start, `smol store check` must find nothing wrong, every published snapshot must restore
// and run, no vmhost may outlive its engine, and a .smolmachine cut short must not open. The same data dir goes
// through every iteration, so what one kill leaves is what the next one starts from.
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Smol } from '../../sdk/typescript/smol.js';
import { CRASH_POINTS, type CrashPoint } from '../engine/crash-points.js';
import { packageRoot } from '../package-root.js';
import { pidAlive } from '../pid-alive.js';

export interface TortureOptions {
  iterations: number;
  /** Seed of the random choices (kills, moments, operations): the same seed makes the same run. */
  seed?: number;
  /** The data dir (a new one under the temp dir if omitted); kept when a check fails or `keep`. */
  home?: string;
  keep?: boolean;
  log?: (line: string) => void;
}

type Kill =
  | { kind: 'point'; point: CrashPoint; nth: number }
  | { kind: 'random'; target: 'engine' | 'vmhost' | 'both'; afterMs: number };

export interface TortureReport {
  home: string;
  seed: number;
  iterations: number;
  /** Per named point: iterations that armed it, kills it made, and kills the store survived. */
  points: Record<CrashPoint, { tried: number; fired: number; survived: number }>;
  random: { tried: number; survived: number };
  failures: Array<{ iteration: number; kill: string; problem: string }>;
}

const SUBJECT = 'subject';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A small, seeded generator (mulberry32): a failing run can be repeated exactly. */
function random(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(items: readonly T[]) => items[Math.floor(next() * items.length)]!,
  };
}

export async function torture(options: TortureOptions): Promise<TortureReport> {
  const seed = options.seed ?? Date.now() % 1_000_000;
  const rng = random(seed);
  const home = options.home ?? mkdtempSync(path.join(tmpdir(), 'smol-torture-'));
  const log = options.log ?? (() => {});
  const guests = path.join(packageRoot, 'native', 'out', 'guests');
  const smolfile = path.join(home, '..', `${path.basename(home)}.smolfile`);
  writeFileSync(smolfile, `kernel = "${guests}/count.elf"\ncmdline = "hz=200"\nmemory = 16\n`);
  const machine = path.join(home, '..', `${path.basename(home)}.smolmachine`);
  const report: TortureReport = {
    home,
    seed,
    iterations: 0,
    points: Object.fromEntries(
      CRASH_POINTS.map((p) => [p, { tried: 0, fired: 0, survived: 0 }]),
    ) as TortureReport['points'],
    random: { tried: 0, survived: 0 },
    failures: [],
  };
  const saved = { hooks: process.env.SMOL_TEST_HOOKS, crash: process.env.SMOL_CRASH_AT };
  try {
    for (let i = 0; i < options.iterations; i++) {
      // Every point once, then random kills and points (each picked at random) in turn.
      const n = CRASH_POINTS.length;
      const kill: Kill =
        i < n || (i - n) % 2 === 1
          ? { kind: 'point', point: i < n ? CRASH_POINTS[i]! : rng.pick(CRASH_POINTS), nth: 1 + rng.int(2) }
          : { kind: 'random', target: rng.pick(['engine', 'vmhost', 'both'] as const), afterMs: 50 + rng.int(1500) };
      const label =
        kill.kind === 'point' ? `${kill.point}@${kill.nth}` : `random ${kill.target} after ${kill.afterMs} ms`;
      log(`torture: iteration ${i + 1}/${options.iterations}: ${label}`);
      report.iterations++;
      const problems = await iteration(kill).catch((error: Error) => [
        `the harness failed: ${error.stack ?? error}\nengine.log ends:\n${tail(path.join(home, 'engine.log'))}`,
      ]);
      if (kill.kind === 'point') report.points[kill.point].tried++;
      else report.random.tried++;
      if (problems === 'not reached') {
        log(`torture:   ${kill.kind === 'point' ? kill.point : 'the kill'} was not reached`);
        continue;
      }
      if (kill.kind === 'point') report.points[kill.point].fired++;
      if (problems.length === 0) {
        if (kill.kind === 'point') report.points[kill.point].survived++;
        else report.random.survived++;
        log('torture:   survived');
      }
      for (const problem of problems) {
        report.failures.push({ iteration: i + 1, kill: label, problem });
        log(`torture:   FAILED: ${problem}`);
      }
    }
  } finally {
    restoreEnv('SMOL_TEST_HOOKS', saved.hooks);
    restoreEnv('SMOL_CRASH_AT', saved.crash);
    await stopEngine(home);
    killAll(home);
    if (report.failures.length === 0 && !options.keep) {
      rmSync(home, { recursive: true, force: true });
      rmSync(smolfile, { force: true });
      rmSync(machine, { force: true });
    }
  }
  return report;

  /** One kill and the checks after it: the problems found, or 'not reached' when the kill never happened. */
  async function iteration(kill: Kill): Promise<string[] | 'not reached'> {
    process.env.SMOL_TEST_HOOKS = '1';
    if (kill.kind === 'point') process.env.SMOL_CRASH_AT = `${kill.point}@${kill.nth}`;
    else delete process.env.SMOL_CRASH_AT;
    rmSync(path.join(home, 'crash-points.log'), { force: true });
    let smol: Smol;
    try {
      smol = await Smol.connect({ home, timeoutMs: 120_000 }); // starts an engine with the environment above
    } finally {
      delete process.env.SMOL_CRASH_AT;
    }
    const enginePid = engineInfo(home)?.pid;
    const logFrom = sizeOf(path.join(home, 'engine.log'));
    // A kill at the point: the process noted it, or (a vmhost in its jail cannot write there) the engine is gone or
    // logged that a vmhost ended (nothing else ends one in this iteration).
    const died = () =>
      (kill.kind === 'point' && fired(home, kill.point)) ||
      (enginePid !== undefined && !pidAlive(enginePid)) ||
      /the vmhost of .* ended \(/.test(readFrom(path.join(home, 'engine.log'), logFrom));
    let subject: string | null = null;
    try {
      subject = await subjectVm(smol); // mending the subject (a reset, a restore) may pass the point already
    } catch (error) {
      if (!died()) throw error;
    }
    rmSync(machine, { force: true });
    let killed: boolean;
    if (kill.kind === 'point') {
      if (subject) await workload(smol, subject, kill.point).catch(() => undefined); // cut short: the point
      killed = await until(10_000, died);
      // The line is written just before the kill: wait for the process itself to be gone (a connection the kernel
      // queued for a dying engine would fail the checks that follow for the wrong reason).
      const pid = firedBy(home, kill.point);
      if (pid !== null) await until(10_000, () => !pidAlive(pid));
    } else if (subject) {
      const running = churn(smol, subject);
      await sleep(kill.afterMs);
      const hosts = vmhostPids(home);
      if (kill.target !== 'vmhost' && enginePid) signal(enginePid);
      if (kill.target !== 'engine') for (const pid of hosts) signal(pid);
      killed = kill.target === 'engine' ? enginePid !== undefined : kill.target === 'both' || hosts.length > 0;
      running.stop();
      await running.done;
    } else {
      throw new Error('no subject VM to run operations on');
    }
    smol.api.close?.();
    if (!killed) {
      await stopEngine(home);
      return 'not reached';
    }
    const problems: string[] = [];
    // A vmhost must not outlive its engine: it notices the engine is gone and ends.
    if (enginePid !== undefined && !pidAlive(enginePid)) {
      if (!(await until(15_000, () => vmhostPids(home).length === 0))) {
        problems.push(`vmhosts outlived their engine by 15 s: pids ${vmhostPids(home).join(', ')}`);
        killAll(home);
      }
    }
    problems.push(...(await verify()));
    await stopEngine(home);
    return problems;
  }

  /** After a kill: the next engine starts, the store checks clean, each snapshot restores and runs. */
  async function verify(): Promise<string[]> {
    let smol: Smol;
    try {
      smol = await Smol.connect({ home, timeoutMs: 120_000 });
    } catch (error) {
      return [`the next engine did not start: ${(error as Error).message}\n${tail(path.join(home, 'engine.log'))}`];
    }
    const problems: string[] = [];
    try {
      const check = await cli(['store', 'check', '--json']);
      if (check.status !== 0) problems.push(`smol store check exited ${check.status}: ${check.stdout}${check.stderr}`);
      if (existsSync(machine)) {
        const inspect = await cli(['inspect', machine]);
        if (inspect.status !== 0)
          problems.push(`a .smolmachine cut short is left at ${machine} and does not open: ${inspect.stderr.trim()}`);
      }
      for (const episode of await smol.episodes()) {
        for (const snapshot of await smol.snapshots(episode.id)) {
          const { children } = await smol.fork(snapshot.id, 1, 'snapshot').catch((error: Error) => {
            problems.push(`snapshot ${snapshot.id} (${snapshot.name}) does not restore: ${error.message}`);
            return { children: [] };
          });
          for (const child of children) {
            await smol
              .waitForOutput(child.id, /count=\d+/, 20_000)
              .catch((error: Error) =>
                problems.push(`snapshot ${snapshot.id} restored but does not run: ${error.message}`),
              );
            await smol.removeVm(child.id).catch(() => undefined);
          }
        }
      }
      await trim(smol);
    } finally {
      smol.api.close?.();
    }
    return problems;
  }

  /** The episode's running VM, made or mended as a user would: start it, else reset it, else a new episode. */
  async function subjectVm(smol: Smol): Promise<string> {
    const episode = (await smol.episodes()).find((e) => e.name === SUBJECT);
    if (!episode) return (await smol.up(smolfile, { name: SUBJECT })).vm.id;
    const vms = (await smol.vms()).filter((vm) => vm.episode === episode.id);
    const vm = vms.find((v) => v.state === 'running') ?? vms[0];
    if (!vm) {
      await smol.destroy(episode.id);
      return (await smol.up(smolfile, { name: SUBJECT })).vm.id;
    }
    if (vm.state === 'paused') await smol.resume(vm.id);
    else if (vm.state !== 'running') await smol.start(vm.id).catch(() => smol.reset(vm.id));
    for (const other of vms) if (other.id !== vm.id) await smol.removeVm(other.id).catch(() => undefined);
    return vm.id;
  }

  /** What passes `point` (twice, for the points armed at their second pass). */
  async function workload(smol: Smol, vm: string, point: CrashPoint): Promise<void> {
    for (let round = 0; round < 2; round++) {
      switch (point) {
        case 'checkpoint:written':
        case 'checkpoint:published':
        case 'vmhost:checkpoint-written':
          await smol.checkpoint(vm);
          break;
        case 'fork:children-made':
          await smol.fork(vm, 2);
          break;
        case 'restore:old-killed': {
          const snapshot = await smol.checkpoint(vm);
          await smol.restore(vm, snapshot.id);
          break;
        }
        case 'reset:old-killed':
          await smol.reset(vm);
          break;
        case 'delete:marked':
        case 'gc:removing': {
          // A snapshot no VM goes on from (a fork child's, the child removed): deleting it collects it at once.
          const [child] = (await smol.fork(vm, 1)).children;
          const snapshot = await smol.checkpoint(child!.id);
          await smol.removeVm(child!.id);
          await smol.deleteSnapshot(snapshot.id);
          break;
        }
        case 'pack:writing':
          await smol.pack(vm, machine);
          break;
      }
    }
  }

  /** Random operations on the subject until stopped (the random kills land somewhere inside them). */
  function churn(smol: Smol, vm: string): { stop: () => void; done: Promise<void> } {
    let stopped = false;
    const ops = [
      () => smol.checkpoint(vm),
      () => smol.fork(vm, 1),
      () => smol.reset(vm),
      async () => smol.deleteSnapshot((await smol.checkpoint(vm)).id),
      async () => smol.restore(vm, (await smol.checkpoint(vm)).id),
      () => smol.gc(),
      () => smol.pack(vm, machine),
    ];
    const done = (async () => {
      while (!stopped)
        await rng
          .pick(ops)()
          .catch(() => undefined);
    })();
    return { stop: () => (stopped = true), done };
  }

  /** Keeps the store small: at most 6 snapshots and 4 VMs in the subject's episode. */
  async function trim(smol: Smol): Promise<void> {
    const episode = (await smol.episodes()).find((e) => e.name === SUBJECT);
    if (!episode) return;
    const snapshots = (await smol.snapshots(episode.id)).filter((s) => s.kind !== 'base');
    for (const old of snapshots.slice(0, Math.max(0, snapshots.length - 6))) {
      await smol.deleteSnapshot(old.id).catch(() => undefined);
    }
    const vms = (await smol.vms()).filter((v) => v.episode === episode.id);
    for (const extra of vms.slice(4)) await smol.removeVm(extra.id).catch(() => undefined);
  }

  /**
   * `smol ARGS`, without blocking this process: a client blocked for seconds keeps a pooled connection the engine
   * has closed meanwhile, and its next request fails with EPIPE for a reason that is the harness's own.
   */
  function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        [path.join(packageRoot, 'bin', 'smol.js'), ...args],
        { env: { ...plainEnv(), SMOL_HOME: home }, encoding: 'utf8', timeout: 120_000 },
        (error, stdout, stderr) =>
          resolve({ status: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
      );
    });
  }
}

/** The environment without the test hooks: the CLI runs the harness starts are a user's. */
function plainEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.SMOL_TEST_HOOKS;
  delete env.SMOL_CRASH_AT;
  return env;
}

function restoreEnv(key: string, value: string | undefined): void {
  if (value === undefined) delete process.env[key];
  else process.env[key] = value;
}

function engineInfo(home: string): { pid: number } | null {
  try {
    return JSON.parse(readFileSync(path.join(home, 'engine.json'), 'utf8')) as { pid: number };
  } catch {
    return null;
  }
}

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** What `file` holds from byte `offset` on. */
function readFrom(file: string, offset: number): string {
  try {
    return readFileSync(file).subarray(offset).toString('utf8');
  } catch {
    return '';
  }
}

/** The pid that noted `point` in crash-points.log, if one did. */
function firedBy(home: string, point: CrashPoint): number | null {
  try {
    const line = readFileSync(path.join(home, 'crash-points.log'), 'utf8')
      .split('\n')
      .find((l) => l.startsWith(`${point} `));
    return line ? Number(line.split(' ')[1]) : null;
  } catch {
    return null;
  }
}

function fired(home: string, point: CrashPoint): boolean {
  try {
    return readFileSync(path.join(home, 'crash-points.log'), 'utf8').includes(`${point} `);
  } catch {
    return false;
  }
}

function signal(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

/** Pids of the data dir's vmhost processes (found through their environment, as the engine tests do). */
function vmhostPids(home: string): number[] {
  return processesOf(home)
    .filter(([, environ]) => environ.some((v) => v.startsWith('SMOL_VMHOST=')))
    .map(([pid]) => pid);
}

function processesOf(home: string): Array<[number, string[]]> {
  const found: Array<[number, string[]]> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const environ = readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0');
      if (environ.includes(`SMOL_HOME=${home}`) && pidAlive(Number(entry))) found.push([Number(entry), environ]);
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

function killAll(home: string): void {
  for (const [pid] of processesOf(home)) signal(pid);
}

/** Stops the data dir's engine as a user would (suspending its VMs); kills it when it does not stop. */
async function stopEngine(home: string): Promise<void> {
  const info = engineInfo(home);
  if (!info || !pidAlive(info.pid)) return;
  spawnSync(process.execPath, [path.join(packageRoot, 'bin', 'smol.js'), 'engine', 'stop', '--home', home], {
    env: plainEnv(),
    timeout: 60_000,
  });
  if (!(await until(30_000, () => !pidAlive(info.pid)))) signal(info.pid);
}

async function until(timeoutMs: number, check: () => boolean): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await sleep(50);
  }
  return check();
}

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return `(no ${file})`;
  }
}
