// `smol bench <name>`: performance figures, printed as medians and p90 (never pass/fail).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { benchBoot, type BootBenchResult } from '../bench/boot.js';
import { formatBootTrace, traceBoots } from '../bench/boot-trace.js';
import { benchConsole, formatConsoleBenchResult } from '../bench/console.js';
import { benchExec, benchFiles } from '../bench/agent.js';
import { benchDisk, formatDiskBenchResult, type DiskBenchResult } from '../bench/disk.js';
import { benchNet, formatNetBenchResult, type NetBenchResult } from '../bench/net.js';
import { benchImage, benchImageBoot, formatImageBenchResult, formatImageBootResult } from '../bench/image.js';
import { benchPack, formatPackBenchResult } from '../bench/pack.js';
import { benchBurst, formatBurstBenchResult } from '../bench/burst.js';
import { benchClients, formatClientsBenchResult } from '../bench/clients.js';
import { benchSoak, formatSoakBenchResult } from '../bench/soak.js';
import { formatTraceBreakdown } from '../bench/trace.js';
import { benchReset } from '../bench/reset.js';
import { benchRestoreLinux } from '../bench/restore-linux.js';
import { benchSdk } from '../bench/sdk.js';
import { benchSnapshot, type SnapshotBenchResult, type TinySnapshotBench } from '../bench/snapshot.js';
import { benchUi, CHROMIUM_ARGS, formatUiBenchResult, uiBenchChromium, type UiBenchResult } from '../bench/ui.js';
import { benchUiEngines, formatUiEnginesBenchResult } from '../bench/ui-engines.js';
import { benchVmCreate, type BenchResult } from '../bench/vm-create.js';
import { findGuestAssets, GUEST_CMDLINE } from '../guest-build/guest-assets.js';
import { packageRoot } from '../package-root.js';
import { tinyGuestDir } from '../smol-dirs.js';
import { VM_LIMITS } from '../vmm/vm-options.js';
import { parseFlags, parseIntegerFlag } from './args.js';
import { CommandError, UsageError } from './errors.js';

export const BENCHMARKS = [
  'vm-create',
  'boot',
  'snapshot',
  'restore',
  'fork',
  'fanout',
  'reset',
  'exec',
  'files',
  'ui',
  'console',
  'disk',
  'net',
  'sdk',
  'image',
  'pack',
  'burst',
  'soak',
  'clients',
] as const;
const SNAPSHOT_BENCHMARKS = ['snapshot', 'restore', 'fork', 'fanout'] as const;
/** Guest RAM sizes the snapshot benchmarks measure unless --memory names one. */
export const SNAPSHOT_MEMORY_MIB = [256, 2048];
export const DEFAULT_BENCH_GUEST = path.join(tinyGuestDir, 'hello.elf');
export const DEFAULT_QEMU = 'qemu-system-x86_64';
export const DEFAULT_CHROMIUM = '/usr/bin/chromium';

export const BENCH_HELP = `Usage: smol bench vm-create [--json] [--runs N] [--kernel FILE] [--trace]
       smol bench boot [--json] [--runs N] [--cpus N] [--memory MiB] [--kernel FILE --initrd FILE]
                       [--cmdline STR] [--qemu FILE] [--trace]
       smol bench snapshot|restore|fork [--json] [--runs N] [--memory MiB] [--trace]
       smol bench restore --linux [--json] [--runs N] [--cpus N] [--memory MiB] [--kernel FILE --initrd FILE]
                       [--cmdline STR] [--qemu FILE]
       smol bench fanout [--json] [--runs N] [--memory MiB] [--forks N] [--trace]
       smol bench reset [--json] [--runs N] [-f SMOLFILE]
       smol bench exec|files [--json] [--runs N] [-f SMOLFILE]
       smol bench ui [--json] [--runs N] [--episodes N] [--snapshots N] [--lines N] [--chromium FILE]
       smol bench ui --engines N [--json] [--runs N] [--episodes N] [--chromium FILE]
       smol bench console [--json] [--runs N] [--lines N]
       smol bench disk [--json] [--runs N] [--cpus N] [--memory MiB] [--kernel FILE --initrd FILE]
                       [--cmdline STR] [--qemu FILE]
       smol bench net [--json] [--runs N] [--cpus N] [--memory MiB] [--kernel FILE --initrd FILE]
                       [--cmdline STR] [--qemu FILE]
       smol bench sdk [--json] [--runs N] [--forks N] [-f SMOLFILE]
       smol bench image [--json] [--runs N]
       smol bench pack [--json] [--runs N] [--memory MiB]
       smol bench burst [--json] [--runs N] [--count N]
       smol bench soak [--json] [--minutes N] [--restore-every N]
       smol bench clients [--json] [--runs N] [--episodes N] [--clients N] [--running N] [--seconds N]

Benchmarks:
  vm-create   create → first serial byte of a printing tiny guest, and a create+kill cycle
  boot        the Linux guest from creating the VM to the "smol-guest: ready" line of its init,
              our VMM against QEMU microvm (same kernel, initramfs, command line, memory and
              vCPUs), runs interleaved; prints both and the ratio ours/QEMU
  snapshot    checkpoint pause and write of the dirty guest: the first (full) checkpoint of a fresh
              VM, and repeated (diff) checkpoints with 10 MiB written by the guest in between
  restore     Vm.restore of an idle echo guest's snapshot until the restored guest echoes a byte;
              with --linux: the built Linux guest, booted and idle at its shell, restored until the
              shell answers a command, against QEMU microvm's restore (migrate to a file, -incoming),
              runs interleaved
  fork        fork(1) of an idle echo guest until the child echoes a byte
  fanout      fork(N) of an idle echo guest until all N run and until all N echoed a byte, and host
              memory per idle fork (MemAvailable before and 1 s after, and the forks' private pages)
  reset       through a real engine: reset of an episode's VM until it runs again (its Smolfile's base
              snapshot restored), until its console answers and (Linux) until its agent runs a command,
              and the API's round trip
  exec        through a real engine and the guest agent: a command's round trip, one with 64 KiB of
              output, and a fork until its child's agent runs a command (needs the Linux guest)
  files       through a real engine and the guest agent: 16 MiB written into the guest and read
              back, checked each run, with the MiB/s (needs the Linux guest)
  ui          the built UI in Chromium (Playwright) against a real engine seeded through its own
              store: first paint and the drawn 1,000-episode list, opening and panning (fps) a
              5,000-snapshot fork tree, and console bytes per second from a flooding VM with every
              line checked in the page, plus each stage of that path alone (VMM, engine, page);
              and a real episode of 89 snapshots and 23 VMs checkpointing themselves every 5 s:
              opening it, and panning its tree (fps) while the automatic checkpoints arrive
  console     the console path without a browser, so it runs in the KVM lab too: the flood guest's
              lines through the VMM's virtio-console and (for comparison) COM1, and through a real
              engine's console WebSocket, every line checked, in MiB/s
  disk        the Linux guest's /dev/vda, timed inside the guest with O_DIRECT dd: sequential write
              and read MiB/s, random 4 KiB read and write IOPS; our virtio-blk (a fresh layer over a
              256 MiB raw base) against QEMU microvm's (the same base, snapshot=on), a fresh VM of
              each per run, interleaved; prints both medians and the ratio ours/QEMU (takes the boot
              benchmark's options)
  net         the Linux guest on a network: our virtio-net on the VM's libslirp stack behind the policy
              against QEMU microvm's virtio-net on -netdev user (the same libslirp), eth0 from the same
              ip=, a fresh VM of each per run, interleaved: guest-to-host TCP MiB/s (dd | nc to a sink on
              127.0.0.1), host-to-guest HTTP request ms through a forward (busybox httpd), and boot to
              ready with the network against without; every packet stays on loopback (takes the boot
              benchmark's options; 5 runs by default)
  sdk         the Python SDK (sdk/python, run by /usr/bin/python3) against the TypeScript SDK on the
              same engine and VM, taking turns each run: an exec round trip (a guest with the agent;
              else a console round trip: type, see the echo) and a fork(8) until the children run;
              prints both and the ratio Python/TypeScript (goal: at most 1.2)
  image       pull and convert a ~100 MiB OCI image (this machine's files, 3 layers) from a registry on
              loopback (docker-registry) into a root disk, against skopeo copy + tar -x + mke2fs -d by hand
              in the same run; prints both and the ratio (goal: at most 1.2). As root; 3 runs by default.
              --boot instead: the first boot of an episode (a fresh data dir each time: up, then the
              agent's first answer) of the builtin image, a ~1 MiB and the ~100 MiB OCI image (a Linux
              guest: in the KVM lab); 1 run by default
  pack        through two real engines: the dirty guest (256 and 2048 MiB, 16 and 128 MiB touched)
              checkpointed, its snapshot packed into a .smolmachine (time, file size), opened in the other
              data dir until the guest verified its memory, against a restore of the same snapshot from
              that store in the same run; the ratio (goal: at most 1.5). 3 runs by default
  burst       through a real engine: fork --count children (default 256, 1 to 1024) of a running
              echo guest (16 MiB) in one request: the time until all run, each child's time to its
              running event (p50, p99), and the engine's and vmhost's fds and RSS after removing them.
              3 runs by default
  soak        through a real engine for --minutes (default 30, 1 to 1440): the dirty guest checkpointing
              itself every second (keep 10) while it rewrites 4 MiB of its memory each second; every 5 s
              the data dir's disk usage, snapshots, longest layer chain, engine and vmhost RSS and fds;
              every 100th (--restore-every N) checkpoint forked and the child checked to run. Prints
              each series' min, max and slope; exits 1 when one grew without bound (docs/survival.md)
              or a restore failed
  clients     through a real engine whose store holds --episodes episodes (default 1,000; --running of
              them, default 4, running echo guests): --clients clients (default 200), each its own
              connection, for --seconds (default 20) listing every episode, and every 10th request
              typing into a running VM's console or reading its last lines, while a label changes
              the list every second; each run has a phase of plain lists, then one of conditional
              lists (If-None-Match with the last ETag): each kind's p50 and p99 (goal: the list's p99
              under 100 ms), requests per second, failures, CPU seconds of the engine and of the
              clients, and the engine's fds and RSS before, during and after. 3 runs by default

Options:
  --runs N        measured runs per metric, 1 to 10000 (default 20 for vm-create, snapshot, restore
                  and fork, 10 for boot, 5 for fanout and disk; warm-up runs are not counted)
  --kernel FILE   vm-create: a guest that prints to COM1 (default ${path.relative(process.cwd(), DEFAULT_BENCH_GUEST)});
                  boot: a vmlinux with a PVH note (default: the one \`smol guest build\` built)
  --initrd FILE   boot: the initramfs (default: the built base initramfs)
  --cmdline STR   boot: kernel command line (default "${GUEST_CMDLINE}")
  --cpus N        boot: vCPUs (default ${VM_LIMITS.cpus.default})
  --memory MiB    boot: guest RAM (default ${VM_LIMITS.memoryMiB.default}); snapshot, restore, fork, fanout:
                  one size instead of both ${SNAPSHOT_MEMORY_MIB.join(' and ')}
  --forks N       fanout: children in one fork call, 1 to 1024 (default 64); sdk: 1 to 64 (default 8)
  -f, --file F    reset, exec, files, sdk: the Smolfile (default smolfiles/shell.smolfile when the Linux guest is built,
                  else smolfiles/echo.smolfile, a bare kernel that has no base snapshot); sdk: echo.smolfile,
                  or shell.smolfile inside the KVM lab when the Linux guest is built
  --qemu FILE     boot: QEMU to compare with (default ${DEFAULT_QEMU} on PATH)
  --episodes N    ui: episodes in the list (default 1000; with --engines, on each engine)
  --engines N     ui: the list alone, on the local engine and then across N engines on this machine, the
                  others added to it as remote engines (up to 16; 1, the default, runs the whole ui
                  benchmark instead; issue 25's goal: 4 × 1,000 under 1 s)
  --snapshots N   ui: snapshots in the fork tree (default 5000)
  --lines N       ui, console: lines of 64 bytes the flooding guest prints per run (default 100000;
                  a 25th of them, 200 to 1,000, through COM1)
  --chromium F    ui: the Chromium to drive (default $SMOL_CHROMIUM or ${DEFAULT_CHROMIUM})
  --linux         restore: the Linux guest against QEMU (takes the boot benchmark's options)
  --trace         vm-create, restore, fork, fanout: each operation step by step (the VMM's step timer:
                  VM and vCPUs, memory slots, layers, each device's state, first vCPU entry, first
                  output) with its KVM ioctls, medians over the runs (docs/snapshots.md); snapshot:
                  each diff checkpoint's pause and write steps (copy, each fsync, the rename); boot: 3
                  more boots of each with initcall_debug, their kernel logs read back: phases and
                  the slowest initcalls, ours and QEMU's side by side (docs/guest.md)
  --json          print the results as JSON
  -h, --help      show this help

Prints the median (p50) and p90 of each metric. Absolute times mean something only on hardware
KVM; under PVM or in the lab compare ratios. Exit status: 0 done, 1 the benchmark failed, 2 usage error.
`;

/** A Linux guest, ours against QEMU: `boot`, and `restore --linux`. */
interface LinuxBenchArgs {
  json: boolean;
  runs: number;
  kernel?: string;
  initrd?: string;
  cmdline: string;
  cpus: number;
  memoryMiB: number;
  qemu: string;
  /** boot only: traced boots after the timed ones, with the kernel's initcall breakdown (boot-trace.ts). */
  trace?: true;
}

export type BenchArgs =
  | { name: 'vm-create'; json: boolean; runs: number; kernel: string; trace?: true }
  | (LinuxBenchArgs & { name: 'boot' })
  | (LinuxBenchArgs & { name: 'restore-linux' })
  | (LinuxBenchArgs & { name: 'disk' })
  | (LinuxBenchArgs & { name: 'net' })
  | { name: TinySnapshotBench; json: boolean; runs: number; memoryMiB: number[]; forks?: number; trace?: true }
  | { name: 'reset' | 'exec' | 'files'; json: boolean; runs: number; smolfile: string }
  | {
      name: 'ui';
      json: boolean;
      runs: number;
      episodes: number;
      snapshots: number;
      lines: number;
      chromium: string;
      /** More than 1: the list alone, on the local engine and then across this many (ui-engines.ts). */
      engines: number;
    }
  | { name: 'console'; json: boolean; runs: number; lines: number }
  | { name: 'sdk'; json: boolean; runs: number; smolfile: string; forks: number }
  | { name: 'image'; json: boolean; runs: number; boot: boolean }
  | { name: 'pack'; json: boolean; runs: number; memoryMiB: number[] }
  | { name: 'burst'; json: boolean; runs: number; count: number }
  | { name: 'soak'; json: boolean; minutes: number; restoreEvery: number }
  | {
      name: 'clients';
      json: boolean;
      runs: number;
      episodes: number;
      clients: number;
      running: number;
      seconds: number;
    };

const FLAGS = {
  json: { type: 'boolean', default: false },
  linux: { type: 'boolean', default: false },
  trace: { type: 'boolean' },
  boot: { type: 'boolean' },
  runs: { type: 'string' },
  kernel: { type: 'string' },
  initrd: { type: 'string' },
  cmdline: { type: 'string' },
  cpus: { type: 'string' },
  memory: { type: 'string' },
  qemu: { type: 'string' },
  forks: { type: 'string' },
  count: { type: 'string' },
  minutes: { type: 'string' },
  'restore-every': { type: 'string' },
  clients: { type: 'string' },
  running: { type: 'string' },
  seconds: { type: 'string' },
  file: { type: 'string', short: 'f' },
  episodes: { type: 'string' },
  snapshots: { type: 'string' },
  engines: { type: 'string' },
  lines: { type: 'string' },
  chromium: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const BOOT_ONLY = ['initrd', 'cmdline', 'cpus', 'memory', 'qemu'] as const;

function parseSnapshotArgs(
  name: TinySnapshotBench,
  flags: Partial<Record<keyof typeof FLAGS, string | boolean>>,
  runs: (fallback: number) => number,
): BenchArgs {
  const misplaced = (['kernel', 'initrd', 'cmdline', 'cpus', 'qemu'] as const).find((f) => flags[f] !== undefined);
  if (misplaced) {
    const linux = name === 'restore' ? ' (it is of restore --linux)' : '';
    throw new UsageError('bench', `--${misplaced} is not an option of the ${name} benchmark${linux}`);
  }
  if (flags.forks !== undefined && name !== 'fanout') {
    throw new UsageError('bench', '--forks is an option of the fanout benchmark only');
  }
  const memory = flags.memory as string | undefined;
  const args: BenchArgs = {
    name,
    json: flags.json === true,
    runs: runs(name === 'fanout' ? 5 : 20),
    memoryMiB:
      memory === undefined ? SNAPSHOT_MEMORY_MIB : [parseIntegerFlag('bench', '--memory', memory, VM_LIMITS.memoryMiB)],
  };
  if (flags.trace) args.trace = true;
  if (name === 'fanout') {
    args.forks = parseIntegerFlag('bench', '--forks', flags.forks as string | undefined, {
      min: 1,
      max: 1024,
      default: 64,
    });
  }
  return args;
}

function parseUiArgs(
  flags: Partial<Record<keyof typeof FLAGS, string | boolean>>,
  runs: (fallback: number) => number,
): BenchArgs {
  const misplaced = (['kernel', 'file', 'forks', ...BOOT_ONLY] as const).find((flag) => flags[flag] !== undefined);
  if (misplaced) throw new UsageError('bench', `--${misplaced} is not an option of the ui benchmark`);
  const count = (flag: 'episodes' | 'snapshots' | 'lines', fallback: number, max: number) =>
    parseIntegerFlag('bench', `--${flag}`, flags[flag] as string | undefined, { min: 1, max, default: fallback });
  if (flags.chromium === '') throw new UsageError('bench', '--chromium needs a file');
  return {
    name: 'ui',
    json: flags.json === true,
    runs: runs(5),
    episodes: count('episodes', 1000, 100_000),
    snapshots: count('snapshots', 5000, 100_000),
    lines: count('lines', 100_000, 10_000_000),
    engines: parseIntegerFlag('bench', '--engines', flags.engines as string | undefined, {
      min: 1,
      max: 16,
      default: 1,
    }),
    chromium: path.resolve((flags.chromium as string | undefined) ?? process.env.SMOL_CHROMIUM ?? DEFAULT_CHROMIUM),
  };
}

export function parseBenchArgs(argv: string[]): BenchArgs | 'help' {
  const [name, ...rest] = argv;
  if (name === undefined) throw new UsageError('bench', `name a benchmark: ${BENCHMARKS.join(', ')}`);
  if (name === '--help' || name === '-h') return 'help';
  if (name.startsWith('-')) throw new UsageError('bench', `the benchmark name comes first (got ${name})`);
  if (!(BENCHMARKS as readonly string[]).includes(name)) {
    throw new UsageError('bench', `unknown benchmark ${name} (known: ${BENCHMARKS.join(', ')})`);
  }
  const flags = parseFlags('bench', rest, FLAGS);
  if (flags.help) return 'help';
  if (flags.trace && (!['vm-create', 'boot', 'snapshot', 'restore', 'fork', 'fanout'].includes(name) || flags.linux)) {
    throw new UsageError(
      'bench',
      '--trace is an option of the vm-create, boot, snapshot, restore, fork and fanout benchmarks only',
    );
  }
  if (name === 'image') {
    const misplaced = Object.keys(flags).find((flag) => !['json', 'runs', 'linux', 'boot', 'help'].includes(flag));
    if (misplaced || flags.linux)
      throw new UsageError('bench', `--${misplaced ?? 'linux'} is not an option of the image benchmark`);
    return {
      name,
      json: flags.json,
      runs: parseIntegerFlag('bench', '--runs', flags.runs, { min: 1, max: 100, default: flags.boot ? 1 : 3 }),
      boot: flags.boot === true,
    };
  }
  if (name === 'burst') {
    const misplaced = Object.keys(flags).find((flag) => !['json', 'runs', 'count', 'linux', 'help'].includes(flag));
    if (misplaced || flags.linux)
      throw new UsageError('bench', `--${misplaced ?? 'linux'} is not an option of the burst benchmark`);
    return {
      name,
      json: flags.json,
      runs: parseIntegerFlag('bench', '--runs', flags.runs, { min: 1, max: 100, default: 3 }),
      count: parseIntegerFlag('bench', '--count', flags.count, { min: 1, max: 1024, default: 256 }),
    };
  }
  if (name === 'clients') {
    const allowed = ['json', 'runs', 'episodes', 'clients', 'running', 'seconds', 'linux', 'help'];
    const misplaced = Object.keys(flags).find((flag) => !allowed.includes(flag));
    if (misplaced || flags.linux)
      throw new UsageError('bench', `--${misplaced ?? 'linux'} is not an option of the clients benchmark`);
    const episodes = parseIntegerFlag('bench', '--episodes', flags.episodes, { min: 1, max: 100_000, default: 1000 });
    const running = parseIntegerFlag('bench', '--running', flags.running, { min: 0, max: 64, default: 4 });
    if (running > episodes)
      throw new UsageError(
        'bench',
        `--running ${running} is more than --episodes ${episodes}: running ones are episodes too`,
      );
    return {
      name,
      json: flags.json,
      runs: parseIntegerFlag('bench', '--runs', flags.runs, { min: 1, max: 100, default: 3 }),
      episodes,
      clients: parseIntegerFlag('bench', '--clients', flags.clients, { min: 1, max: 5000, default: 200 }),
      running,
      seconds: parseIntegerFlag('bench', '--seconds', flags.seconds, { min: 1, max: 3600, default: 20 }),
    };
  }
  if (name === 'soak') {
    const misplaced = Object.keys(flags).find(
      (flag) => !['json', 'minutes', 'restore-every', 'linux', 'help'].includes(flag),
    );
    if (misplaced || flags.linux)
      throw new UsageError('bench', `--${misplaced ?? 'linux'} is not an option of the soak benchmark`);
    return {
      name,
      json: flags.json,
      minutes: parseIntegerFlag('bench', '--minutes', flags.minutes, { min: 1, max: 1440, default: 30 }),
      restoreEvery: parseIntegerFlag('bench', '--restore-every', flags['restore-every'], {
        min: 1,
        max: 100_000,
        default: 100,
      }),
    };
  }
  if (name === 'pack') {
    const misplaced = Object.keys(flags).find((flag) => !['json', 'runs', 'memory', 'linux', 'help'].includes(flag));
    if (misplaced || flags.linux)
      throw new UsageError('bench', `--${misplaced ?? 'linux'} is not an option of the pack benchmark`);
    const runs = parseIntegerFlag('bench', '--runs', flags.runs, { min: 1, max: 100, default: 3 });
    const memory = parseIntegerFlag('bench', '--memory', flags.memory, { min: 32, max: 65_536, default: 0 });
    return { name, json: flags.json, runs, memoryMiB: memory === 0 ? SNAPSHOT_MEMORY_MIB : [memory] };
  }
  for (const file of ['kernel', 'initrd', 'qemu', 'file'] as const) {
    if (flags[file] === '') throw new UsageError('bench', `--${file} needs a file`);
  }
  const runs = (fallback: number) =>
    parseIntegerFlag('bench', '--runs', flags.runs, { min: 1, max: 10_000, default: fallback });
  const engineBench = name === 'reset' || name === 'exec' || name === 'files';
  if (flags.file !== undefined && !engineBench && name !== 'sdk') {
    throw new UsageError('bench', '--file is an option of the reset, exec, files and sdk benchmarks only');
  }
  if (flags.linux && name !== 'restore')
    throw new UsageError('bench', '--linux is an option of the restore benchmark only');
  const uiOnly = (['episodes', 'snapshots', 'chromium', 'engines'] as const).find((flag) => flags[flag] !== undefined);
  if (uiOnly && name !== 'ui') throw new UsageError('bench', `--${uiOnly} is an option of the ui benchmark only`);
  if (flags.lines !== undefined && name !== 'ui' && name !== 'console') {
    throw new UsageError('bench', '--lines is an option of the ui and console benchmarks only');
  }
  if (name === 'ui') return parseUiArgs(flags, runs);
  if (name === 'console') {
    const misplaced = (['kernel', 'file', 'forks', 'linux', ...BOOT_ONLY] as const).find(
      (flag) => flags[flag] !== undefined && flags[flag] !== false,
    );
    if (misplaced) throw new UsageError('bench', `--${misplaced} is not an option of the console benchmark`);
    const lines = parseIntegerFlag('bench', '--lines', flags.lines, { min: 1, max: 10_000_000, default: 100_000 });
    return { name, json: flags.json, runs: runs(5), lines };
  }
  if ((SNAPSHOT_BENCHMARKS as readonly string[]).includes(name) && !flags.linux) {
    return parseSnapshotArgs(name as TinySnapshotBench, flags, runs);
  }
  if (name === 'sdk') {
    const misplaced = (['kernel', 'linux', ...BOOT_ONLY] as const).find(
      (flag) => flags[flag] !== undefined && flags[flag] !== false,
    );
    if (misplaced) throw new UsageError('bench', `--${misplaced} is not an option of the sdk benchmark`);
    const built = findGuestAssets();
    const lab = process.env.SMOL_IN_LAB === '1' && built.kernel && built.initramfs;
    const fallback = path.join(packageRoot, 'smolfiles', lab ? 'shell.smolfile' : 'echo.smolfile');
    const forks = parseIntegerFlag('bench', '--forks', flags.forks, { min: 1, max: 64, default: 8 });
    return { name, json: flags.json, runs: runs(10), smolfile: path.resolve(flags.file ?? fallback), forks };
  }
  if (flags.forks !== undefined)
    throw new UsageError('bench', '--forks is an option of the fanout and sdk benchmarks only');
  if (engineBench) {
    const misplaced = (['kernel', ...BOOT_ONLY] as const).find((flag) => flags[flag] !== undefined);
    if (misplaced) throw new UsageError('bench', `--${misplaced} is not an option of the ${name} benchmark`);
    const built = findGuestAssets();
    const linux = built.kernel && built.initramfs;
    if (!linux && name !== 'reset') {
      throw new UsageError('bench', `${name} needs the Linux guest (its agent): run smol guest build first`);
    }
    const fallback = linux ? 'shell.smolfile' : 'echo.smolfile';
    const smolfile = path.resolve(flags.file ?? path.join(packageRoot, 'smolfiles', fallback));
    return { name, json: flags.json, runs: runs(name === 'reset' ? 20 : 10), smolfile };
  }
  if (name === 'vm-create') {
    const misplaced = BOOT_ONLY.find((flag) => flags[flag] !== undefined);
    if (misplaced) throw new UsageError('bench', `--${misplaced} is an option of the boot benchmark only`);
    const kernel = path.resolve(flags.kernel ?? DEFAULT_BENCH_GUEST);
    return { name, json: flags.json, runs: runs(20), kernel, ...(flags.trace && { trace: true as const }) };
  }
  if ((flags.kernel === undefined) !== (flags.initrd === undefined)) {
    throw new UsageError('bench', `${name} takes --kernel and --initrd together (or neither, for the built guest)`);
  }
  const args: LinuxBenchArgs & { name: LinuxBench } = {
    name: name === 'restore' ? 'restore-linux' : name === 'disk' || name === 'net' ? name : 'boot',
    json: flags.json,
    runs: runs(name === 'disk' || name === 'net' ? 5 : 10),
    cmdline: flags.cmdline ?? GUEST_CMDLINE,
    cpus: parseIntegerFlag('bench', '--cpus', flags.cpus, VM_LIMITS.cpus),
    memoryMiB: parseIntegerFlag('bench', '--memory', flags.memory, VM_LIMITS.memoryMiB),
    qemu: flags.qemu ?? DEFAULT_QEMU,
  };
  if (flags.kernel !== undefined) args.kernel = path.resolve(flags.kernel);
  if (flags.initrd !== undefined) args.initrd = path.resolve(flags.initrd);
  if (flags.trace) args.trace = true;
  return args as BenchArgs;
}

export function formatBenchResult(result: BenchResult | BootBenchResult | SnapshotBenchResult): string {
  const { kvm, inLab } = result.host;
  const where = `KVM ${kvm.implementation}${inLab ? ', in the lab' : ''}`;
  const width = Math.max('metric'.length, ...result.results.map((r) => r.metric.length));
  const lines = [
    `${result.name}: ${result.runs} runs after ${result.warmup} warm-up, guest ${result.guest} (${where})`,
    `${'metric'.padEnd(width)}  ${'p50 ms'.padStart(9)}  ${'p90 ms'.padStart(9)}`,
    ...result.results.flatMap((r) => [
      `${r.metric.padEnd(width)}  ${r.p50_ms.toFixed(3).padStart(9)}  ${r.p90_ms.toFixed(3).padStart(9)}`,
      ...(r.trace ? formatTraceBreakdown(r.trace) : []),
    ]),
  ];
  if ('ratio' in result) {
    lines.push(
      `${'ratio ours/qemu'.padEnd(width)}  ${result.ratio.p50.toFixed(3).padStart(9)}  ${result.ratio.p90.toFixed(3).padStart(9)}`,
    );
  }
  if ('notes' in result) lines.push(...result.notes.map((note) => `note: ${note}`));
  if ('hugePages' in result) {
    const thp = result.hugePages;
    lines.push(
      `transparent huge pages: ${thp ? `anonymous (QEMU's RAM) ${thp.anonymous}, shmem (ours) ${thp.shmem}` : 'unknown'}`,
    );
  }
  if ('ratio' in result && result.trace) lines.push(...formatBootTrace(result.trace));
  return lines.join('\n') + '\n';
}

type LinuxBench = 'boot' | 'restore-linux' | 'disk' | 'net';
/** Traced boots of each side with boot --trace (at most; fewer with fewer --runs): each reads back its kernel log. */
const TRACED_BOOTS = 3;

async function runBoot(
  args: LinuxBenchArgs & { name: LinuxBench },
): Promise<BootBenchResult | SnapshotBenchResult | DiskBenchResult | NetBenchResult> {
  let { kernel, initrd } = args;
  if (kernel === undefined || initrd === undefined) {
    const built = findGuestAssets();
    if (!built.kernel || !built.initramfs) {
      throw new CommandError('no Linux guest is built: run `smol guest build` first, or pass --kernel and --initrd');
    }
    kernel = built.kernel;
    initrd = built.initramfs;
  }
  for (const file of [kernel, initrd]) if (!existsSync(file)) throw new CommandError(`${file} does not exist`);
  const progress = (line: string) => process.stderr.write(`bench ${args.name}: ${line}\n`);
  const options = { ...args, kernel, initramfs: initrd };
  if (args.name === 'disk') return benchDisk(options, progress);
  if (args.name === 'net') return benchNet(options, progress);
  if (args.name !== 'boot') return benchRestoreLinux(options, progress);
  const result = await benchBoot(options, progress);
  if (args.trace) result.trace = await traceBoots(options, Math.min(args.runs, TRACED_BOOTS), progress);
  return result;
}

export async function runBench(argv: string[]): Promise<number> {
  const args = parseBenchArgs(argv);
  if (args === 'help') {
    process.stdout.write(BENCH_HELP);
    return 0;
  }
  if (args.name === 'image') {
    const progress = (line: string) => process.stderr.write(`bench image: ${line}\n`);
    if (args.boot) {
      const boot = await benchImageBoot({ runs: args.runs, progress });
      process.stdout.write(args.json ? JSON.stringify(boot, null, 2) + '\n' : formatImageBootResult(boot));
      return 0;
    }
    const result = await benchImage({ runs: args.runs, progress });
    process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : formatImageBenchResult(result));
    return 0;
  }
  if (args.name === 'burst') {
    const progress = (line: string) => process.stderr.write(`bench burst: ${line}\n`);
    const result = await benchBurst({ runs: args.runs, count: args.count, progress });
    process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : formatBurstBenchResult(result));
    return 0;
  }
  if (args.name === 'clients') {
    const progress = (line: string) => process.stderr.write(`bench clients: ${line}\n`);
    const { runs, episodes, clients, running, seconds } = args;
    const result = await benchClients({ runs, episodes, clients, running, seconds, progress });
    process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : formatClientsBenchResult(result));
    return 0;
  }
  if (args.name === 'soak') {
    const progress = (line: string) => process.stderr.write(`bench soak: ${line}\n`);
    const result = await benchSoak({
      minutes: args.minutes,
      sampleSeconds: 5,
      restoreEvery: args.restoreEvery,
      progress,
    });
    process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : formatSoakBenchResult(result));
    return result.ok ? 0 : 1;
  }
  if (args.name === 'pack') {
    const progress = (line: string) => process.stderr.write(`bench pack: ${line}\n`);
    const guestDir = path.dirname(DEFAULT_BENCH_GUEST);
    const options = { runs: args.runs, memoryMiB: args.memoryMiB, touchedMiB: [16, 128], guestDir, progress };
    const result = await benchPack(options);
    process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : formatPackBenchResult(result));
    return 0;
  }
  if (args.name === 'console') {
    const progress = (line: string) => process.stderr.write(`bench console: ${line}\n`);
    const result = await benchConsole({ runs: args.runs, lines: args.lines, progress });
    process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : formatConsoleBenchResult(result));
    return 0;
  }
  if (args.name === 'ui') {
    if (!existsSync(args.chromium)) {
      throw new CommandError(
        `no Chromium at ${args.chromium}: install it (scripts/setup-system.sh) or pass --chromium`,
      );
    }
    const progress = (line: string) => process.stderr.write(`bench ui: ${line}\n`);
    const { episodes, snapshots, lines: consoleLines, chromium, runs, engines } = args;
    if (engines > 1) {
      const options = { runs, engines, episodes, chromium, progress };
      const result = await benchUiEngines(options, await uiBenchChromium(), CHROMIUM_ARGS);
      process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : formatUiEnginesBenchResult(result));
      return 0;
    }
    const result: UiBenchResult = await benchUi({ runs, episodes, snapshots, consoleLines, chromium, progress });
    process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : formatUiBenchResult(result));
    return 0;
  }
  let result: BenchResult | BootBenchResult | SnapshotBenchResult | DiskBenchResult | NetBenchResult;
  if (args.name === 'sdk') {
    const progress = (line: string) => process.stderr.write(`bench sdk: ${line}\n`);
    result = await benchSdk({ smolfile: args.smolfile, runs: args.runs, forks: args.forks, progress });
  } else if (args.name === 'reset' || args.name === 'exec' || args.name === 'files') {
    const name = args.name;
    const progress = (line: string) => process.stderr.write(`bench ${name}: ${line}\n`);
    const options = { smolfile: args.smolfile, runs: args.runs, fileMiB: 16, progress };
    result = await (name === 'reset'
      ? benchReset(options)
      : name === 'exec'
        ? benchExec(options)
        : benchFiles(options));
  } else if (args.name === 'boot' || args.name === 'restore-linux' || args.name === 'disk' || args.name === 'net') {
    result = await runBoot(args);
  } else if (args.name !== 'vm-create') {
    const guestDir = path.dirname(DEFAULT_BENCH_GUEST);
    if (!existsSync(path.join(guestDir, 'dirty.elf'))) {
      throw new CommandError(`the tiny guests are not built in ${guestDir}: run make -C native guests`);
    }
    const { name, runs, memoryMiB, forks, trace } = args as Extract<BenchArgs, { name: TinySnapshotBench }>;
    const progress = (line: string) => process.stderr.write(`bench ${name}: ${line}\n`);
    result = await benchSnapshot(name, { runs, memoryMiB, forks, guestDir, progress, trace });
  } else {
    if (!existsSync(args.kernel)) {
      const fix = args.kernel === DEFAULT_BENCH_GUEST ? '; run make -C native guests' : '';
      throw new CommandError(`guest ${args.kernel} does not exist${fix}`);
    }
    result = await benchVmCreate({ guest: args.kernel, runs: args.runs, trace: args.trace === true });
  }
  const text =
    'bootCost' in result
      ? formatNetBenchResult(result)
      : 'disk' in result
        ? formatDiskBenchResult(result)
        : formatBenchResult(result);
  process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : text);
  return 0;
}
