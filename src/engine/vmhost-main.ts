// A vmhost: the child process that holds the native module and the VMs of one episode (docs/engine.md,
// "Processes"). It does what the engine asks and reports console output and exits; it keeps no state of its own
// beyond the live VMs, so when it dies the engine loses only those VMs, never a snapshot.
import { Vm, type DeviceResources } from '../vmm/vm.js';
import { loadNative, type JailRoot } from '../vmm/native.js';
import { engineChannel } from './vmhost-parent.js';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { codeOf, errorData } from '../api/error-codes.js';
import { diskSpace, formatBytes, MAKE_ROOM, requireDiskReserve } from './disk-space.js';
import { ConsoleCredit } from './console-credit.js';
import { crashPoint } from './crash-points.js';
import {
  HOST_OPS,
  type HostMessageIn,
  type HostMessageOut,
  type HostProgress,
  type VmHostJailStatus,
  type VmHostService,
} from './vmhost-protocol.js';

const engine = engineChannel();

/**
 * This process's pid on the host, which the engine reads its /proc by: in a PID namespace of its own (vmhost-jail.ts)
 * process.pid is 1, and NSpid's first field is the host's, read while the host's /proc is still mounted.
 */
function hostPid(): number {
  try {
    const nspid = /^NSpid:\s*(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    return nspid ? Number(nspid) : process.pid;
  } catch {
    return process.pid;
  }
}
const pid = hostPid();

/**
 * The jail (docs/security.md): before any VM exists, so before any guest's first instruction, and for every thread
 * of this process. Started in namespaces (SMOL_VMHOST_ROOT, vmhost-launcher.ts), its root first becomes a tmpfs
 * with only the paths its VMs need. SMOL_JAIL=0 leaves it off (the bench's comparison); a jail that cannot be put in
 * place ends the vmhost rather than run VMs outside it.
 */
function lockdown(): VmHostJailStatus | null {
  if (process.env.SMOL_JAIL === '0') return null;
  const fd = Number(process.env.SMOL_VMHOST_REPORT_FD);
  try {
    const root = process.env.SMOL_VMHOST_ROOT ? (JSON.parse(process.env.SMOL_VMHOST_ROOT) as JailRoot) : undefined;
    const status = loadNative().jailLockdown({
      ...(Number.isInteger(fd) && fd > 2 && { reportFd: fd }),
      ...(root && { root }),
    });
    const namespaces = root ? (process.env.SMOL_VMHOST_NS ?? 'mount,pid').split(',') : [];
    const namespacesReason = root ? null : (process.env.SMOL_VMHOST_NS_REASON ?? 'not started in namespaces');
    return { ...status, namespaces, namespacesReason };
  } catch (error) {
    process.stderr.write(`smol vmhost ${process.env.SMOL_VMHOST ?? ''}: ${(error as Error).message}\n`);
    process.exit(70);
  }
}
const jail = lockdown();

// Test hooks, only with SMOL_TEST_HOOKS=1 (production never sets it): SIGURG makes this process call a system call no
// allow-list has, as a device model a guest subverted might; SIGPWR makes it call ioctl with a request none has.
// SIGWINCH makes it try to open, for reading, each path the file SMOL_TEST_OPEN lists (a JSON array; a relative name
// is in its episode's run/ directory), and say on
// stderr (the engine's log) what came of each: `vmhost test-open PATH: ok` or the error's code.
if (process.env.SMOL_TEST_HOOKS === '1') {
  process.on('SIGURG', () => loadNative().jailTestForbidden());
  process.on('SIGPWR', () => loadNative().jailTestForbidden('ioctl'));
  process.on('SIGWINCH', () => {
    // A relative name is in this vmhost's own run/ directory (the one of run/ its root shows).
    const named = process.env.SMOL_TEST_OPEN;
    const list = named && process.env.SMOL_VMHOST_RUN ? path.resolve(process.env.SMOL_VMHOST_RUN, named) : named;
    for (const file of list ? (JSON.parse(readFileSync(list, 'utf8')) as string[]) : []) {
      let result = 'ok';
      try {
        closeSync(openSync(file, 'r'));
      } catch (error) {
        result = codeOf(error) ?? String(error);
      }
      process.stderr.write(`smol vmhost ${process.env.SMOL_VMHOST ?? ''} test-open ${file}: ${result}\n`);
    }
  });
}

const vms = new Map<string, Vm>();
/** Console input the VMM's queue had no room for yet, per VM; retried until it is taken or the VM ends. */
const pendingInput = new Map<string, Buffer[]>();
const INPUT_RETRY_MS = 5;

function feedInput(id: string): void {
  const queue = pendingInput.get(id);
  const vm = vms.get(id);
  if (!queue || !vm) {
    pendingInput.delete(id);
    return;
  }
  while (queue.length > 0) {
    const accepted = vm.write(queue[0]!);
    if (accepted < queue[0]!.length) {
      queue[0] = queue[0]!.subarray(accepted);
      setTimeout(() => feedInput(id), INPUT_RETRY_MS);
      return;
    }
    queue.shift();
  }
  pendingInput.delete(id);
}

/** Queues console input in order; returns how many bytes wait for room in the VMM's queue. */
function writeInput(id: string, data: Buffer): number {
  vmOf(id);
  const queue = pendingInput.get(id);
  if (queue) queue.push(data);
  else {
    pendingInput.set(id, [data]);
    feedInput(id);
  }
  return pendingInput.get(id)?.reduce((sum, chunk) => sum + chunk.length, 0) ?? 0;
}

function send(message: HostMessageOut): void {
  engine.send(message);
}

/** Console output in flight to the engine, bounded (console-credit.ts); SMOL_CONSOLE_IN_FLIGHT sets the bound. */
const consoleCredit = new ConsoleCredit(
  (vm, data) => send({ kind: 'console', vm, data }),
  (held) => vms.forEach((vm) => vm.holdConsole(held)),
  process.env.SMOL_CONSOLE_IN_FLIGHT ? Number(process.env.SMOL_CONSOLE_IN_FLIGHT) : undefined,
);

function adopt(id: string, vm: Vm): void {
  vms.set(id, vm);
  if (consoleCredit.held) vm.holdConsole(true);
  vm.on('console', (data) => consoleCredit.output(id, data));
  vm.on('exit', (exit) => {
    vms.delete(id);
    send({ kind: 'exit', vm: id, exit });
  });
}

function vmOf(id: string): Vm {
  const vm = vms.get(id);
  if (!vm) throw Object.assign(new Error(`${id} is not running in this vmhost`), { code: 'ESRCH' });
  return vm;
}

/** The service this process offers (the interface is vmhost-protocol.ts). */
const service: VmHostService = {
  async create({ vm, options }) {
    adopt(vm, await Vm.create(options));
  },
  async restore({ vm, dir, resources }) {
    adopt(vm, await Vm.restore(dir, { resources }));
  },
  async start({ vm }) {
    vmOf(vm).start();
  },
  async pause({ vm }) {
    await vmOf(vm).pause();
  },
  async resume({ vm }) {
    vmOf(vm).resume();
  },
  async kill({ vm }) {
    await vms.get(vm)?.kill();
  },
  stats: ({ vm }) => vmOf(vm).memoryStats(),
  async sample({ vms: ids }) {
    const samples = await Promise.all(
      ids.map(async (id) => {
        const vm = vms.get(id);
        if (vm?.state !== 'running') return null;
        try {
          return { vm: id, cpuNs: vm.cpuTimeNs(), memory: await vm.memoryStats() };
        } catch {
          return null; // it ended while being sampled
        }
      }),
    );
    return samples.filter((sample) => sample !== null);
  },
  network: async ({ vm, after }) => vmOf(vm).network(after ?? 0),
  write: async ({ vm, data }) => writeInput(vm, Buffer.from(data)),
  async consoleTaken({ bytes }) {
    consoleCredit.taken(bytes);
  },
  flatten: ({ path }) => loadNative().flattenDiskLayer(path),
  exportDisk: ({ path, out }) => loadNative().exportDisk(path, out),
  checkpoint: ({ vm, dir, resources }, progress) => checkpoint(vm, dir, resources, progress),
  async fork({ vm, resources, children }) {
    // Children with disks write new layers from their first instruction: refused below the reserve (disk-space.ts).
    const layer = children.flatMap((child) => Object.values(child.resources)).find((r) => r && 'path' in r);
    if (layer && 'path' in layer) requireDiskReserve(path.dirname(String(layer.path)), `a fork of ${vm} with disks`);
    const made = await vmOf(vm).fork(children.length, { resources, children: children.map((c) => c.resources) });
    made.forEach((child, i) => adopt(children[i]!.vm, child));
  },
};

/**
 * A checkpoint; one that runs out of space (ENOSPC) leaves nothing half-written (its directory is removed; the VM
 * goes on running) and says how much it needed at most (the guest's memory) and how much was free.
 */
async function checkpoint(id: string, dir: string, resources: DeviceResources, progress?: HostProgress) {
  const vm = vmOf(id);
  requireDiskReserve(path.dirname(dir), `a checkpoint of ${id}`);
  try {
    const written = await vm.checkpoint(dir, (p) => progress?.(p.done, p.total), { resources });
    crashPoint('vmhost:checkpoint-written');
    return written;
  } catch (error) {
    if (codeOf(error) !== 'ENOSPC' && codeOf(error) !== 'EDQUOT') throw error;
    rmSync(dir, { recursive: true, force: true });
    const needed = await vm.memoryStats().then(
      (stats) => formatBytes(stats.guestBytes),
      () => 'its memory',
    );
    const { freeBytes } = diskSpace(path.dirname(dir));
    const message =
      `no space left on device: the checkpoint of ${id} needed up to ${needed} (its memory) and ` +
      `${formatBytes(freeBytes)} was free in ${path.dirname(dir)}; nothing was kept and the VM goes on ` +
      `(${(error as Error).message}); ${MAKE_ROOM}`;
    throw Object.assign(new Error(message), { code: codeOf(error) });
  }
}

const known = new Set<string>(HOST_OPS);

/** The generic dispatcher: a message names an operation of the service and its argument; the reply is its result. */
function dispatch({ seq, op, args }: HostMessageIn): void {
  const progress: HostProgress = (done, total) => send({ kind: 'progress', seq, done, total });
  const call = async () => {
    if (!known.has(op)) throw new TypeError(`the vmhost has no operation ${JSON.stringify(op)}`);
    const method = service[op] as (args: unknown, progress: HostProgress) => Promise<unknown>;
    return await method(args, progress);
  };
  call().then(
    (result) => send({ kind: 'reply', seq, ok: true, result: result ?? null }),
    (error: unknown) => send({ kind: 'reply', seq, ok: false, error: errorData(error) }),
  );
}

// Ctrl-C or a closed terminal signals the engine's whole process group: the engine then suspends these VMs, so the
// vmhost must outlive the signal. It ends when the engine goes (below).
process.on('SIGINT', () => undefined);
process.on('SIGHUP', () => undefined);

engine.onMessage(dispatch);

// The engine going away ends the vmhost: its VMs cannot outlive the process that can snapshot them.
engine.onGone(() => {
  void Promise.allSettled([...vms.values()].map((vm) => vm.kill())).then(() => process.exit(0));
});

send({ kind: 'ready', pid, jail });
