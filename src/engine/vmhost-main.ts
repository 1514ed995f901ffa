// A vmhost: the child process that holds the native module and the VMs of one episode (docs/engine.md,
// "Processes"). It does what the engine asks and reports console output and exits; it keeps no state of its own
// beyond the live VMs, so when it dies the engine loses only those VMs, never a snapshot.
import { Vm } from '../vmm/vm.js';
import { loadNative } from '../vmm/native.js';
import { engineChannel } from './vmhost-parent.js';
import type { HostMessageOut, HostRequest } from './vmhost-protocol.js';

const engine = engineChannel();

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

function adopt(id: string, vm: Vm): void {
  vms.set(id, vm);
  vm.on('console', (data) => send({ kind: 'console', vm: id, data }));
  vm.on('exit', (exit) => {
    vms.delete(id);
    send({ kind: 'exit', vm: id, exit });
  });
}

function vmOf(id: string): Vm {
  const vm = vms.get(id);
  if (!vm) throw new Error(`${id} is not running in this vmhost`);
  return vm;
}

async function handle(request: HostRequest, seq: number): Promise<unknown> {
  switch (request.op) {
    case 'create':
      adopt(request.vm, await Vm.create(request.options));
      return null;
    case 'restore':
      adopt(
        request.vm,
        await Vm.restore(request.dir, {
          ...(request.vsockPath && { vsockPath: request.vsockPath }),
          ...(request.diskTop && { diskTop: request.diskTop }),
        }),
      );
      return null;
    case 'start':
      vmOf(request.vm).start();
      return null;
    case 'pause':
      await vmOf(request.vm).pause();
      return null;
    case 'resume':
      vmOf(request.vm).resume();
      return null;
    case 'kill':
      await vms.get(request.vm)?.kill();
      return null;
    case 'stats':
      return await vmOf(request.vm).memoryStats();
    case 'sample': {
      const samples = await Promise.all(
        request.vms.map(async (id) => {
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
    }
    case 'write':
      return writeInput(request.vm, Buffer.from(request.data));
    case 'flatten':
      return await loadNative().flattenDiskLayer(request.path);
    case 'checkpoint':
      return await vmOf(request.vm).checkpoint(
        request.dir,
        (p) => send({ kind: 'progress', seq, done: p.done, total: p.total }),
        request.diskTop ? { diskTop: request.diskTop } : {},
      );
    case 'fork': {
      const children = await vmOf(request.vm).fork(request.children.length, {
        ...(request.childVsockPaths && { childVsockPaths: request.childVsockPaths }),
        ...(request.diskTop && { diskTop: request.diskTop }),
        ...(request.childDiskTops && { childDiskTops: request.childDiskTops }),
      });
      children.forEach((child, i) => adopt(request.children[i]!, child));
      return null;
    }
  }
}

// Ctrl-C or a closed terminal signals the engine's whole process group: the engine then suspends these VMs, so the
// vmhost must outlive the signal. It ends when the engine goes (below).
process.on('SIGINT', () => undefined);
process.on('SIGHUP', () => undefined);

engine.onMessage((message) => {
  const { seq, ...request } = message;
  handle(request as HostRequest, seq).then(
    (result) => send({ kind: 'reply', seq, ok: true, result }),
    (error: unknown) =>
      send({ kind: 'reply', seq, ok: false, error: error instanceof Error ? error.message : String(error) }),
  );
});

// The engine going away ends the vmhost: its VMs cannot outlive the process that can snapshot them.
engine.onGone(() => {
  void Promise.allSettled([...vms.values()].map((vm) => vm.kill())).then(() => process.exit(0));
});

send({ kind: 'ready', pid: process.pid });
