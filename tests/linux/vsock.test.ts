// Tier 3: virtio-vsock (native/vmm/virtio_vsock.c) with a real Linux guest, through the guest agent
// (native/agent/) and its client, over the VMM's Firecracker-style muxer socket: commands and files go both ways,
// and the agent answers again after a restore and in a fork, whether a connection was open at the checkpoint or not.
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { AgentClient } from '../../src/agent-client/agent-client.js';
import { Vm } from '../../src/vmm/vm.js';
import { attachLinux, bootLinux, linuxWorkspace } from './linux-guest.js';

const { work, vms, clients } = linuxWorkspace('smol-vsock-');

const AGENT_PORT = 52;
const READY_MS = 90_000;
const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

/** The agent on a VM's vsock socket, once it answers. */
async function agentAt(socketPath: string): Promise<AgentClient> {
  const agent = new AgentClient({ socketPath, vsockPort: AGENT_PORT });
  clients.push(agent);
  await agent.ready({ timeoutMs: READY_MS });
  return agent;
}

describe('virtio-vsock with the guest agent in a Linux guest', () => {
  it('runs commands and moves files over the muxer socket', async () => {
    const socket = path.join(work, 'booted.vsock');
    const guest = await bootLinux({ vsock: { path: socket, cid: 42 } });
    vms.push(guest.vm);
    const agent = await agentAt(socket);

    const hi = await agent.exec(['sh', '-c', 'echo hi; echo err >&2; exit 7']);
    expect(hi.stdout.toString()).toBe('hi\n');
    expect(hi.stderr.toString()).toBe('err\n');
    expect(hi.exitCode).toBe(7);

    const concurrent = await Promise.all(
      Array.from({ length: 8 }, (_, i) => agent.exec(['sh', '-c', `sleep 0.2; echo ${i}`])),
    );
    expect(concurrent.map((r) => r.stdout.toString())).toEqual(Array.from({ length: 8 }, (_, i) => `${i}\n`));

    const data = randomBytes(4 << 20); // through the queues both ways, with credit-based flow control
    await agent.writeFile('/tmp/blob', data);
    const sum = await agent.exec(['sha256sum', '/tmp/blob']);
    expect(sum.stdout.toString().split(' ')[0]).toBe(sha256(data));
    expect(sha256(await agent.readFile('/tmp/blob'))).toBe(sha256(data));
  }, 600_000);

  it('answers again after a restore and in a fork, with or without a connection at the checkpoint', async () => {
    const socket = path.join(work, 'parent.vsock');
    const guest = await bootLinux({ vsock: { path: socket, cid: 43 } });
    vms.push(guest.vm);
    const agent = await agentAt(socket); // busybox init started it (/etc/inittab)
    await agent.writeFile('/tmp/state', 'at the checkpoint\n');
    const connected = path.join(work, 'snap-connected');
    await guest.vm.checkpoint(connected); // the connection is open: the restore resets it

    const forkSocket = path.join(work, 'fork.vsock');
    const [child] = await guest.vm.fork(1, { children: [{ 'virtio-vsock': { path: forkSocket } }] });
    vms.push(child!);
    attachLinux(child!);
    const inChild = await agentAt(forkSocket);
    expect((await inChild.exec(['cat', '/tmp/state'])).stdout.toString()).toBe('at the checkpoint\n');
    await inChild.writeFile('/tmp/state', 'the child wrote this\n');
    expect((await agent.exec(['cat', '/tmp/state'])).stdout.toString()).toBe('at the checkpoint\n');

    await guest.vm.kill();
    const restoredSocket = path.join(work, 'restored.vsock');
    const restored = await Vm.restore(connected, { resources: { 'virtio-vsock': { path: restoredSocket } } });
    vms.push(restored);
    attachLinux(restored);
    restored.start();
    const inRestored = await agentAt(restoredSocket);
    expect((await inRestored.exec(['cat', '/tmp/state'])).stdout.toString()).toBe('at the checkpoint\n');

    inRestored.close(); // no connection open at this checkpoint
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const idle = path.join(work, 'snap-idle');
    await restored.checkpoint(idle);
    await restored.kill();
    const again = await Vm.restore(idle, { resources: { 'virtio-vsock': { path: path.join(work, 'again.vsock') } } });
    vms.push(again);
    attachLinux(again);
    again.start();
    const inAgain = await agentAt(path.join(work, 'again.vsock'));
    expect((await inAgain.exec(['sh', '-c', 'echo $((6 * 7))'])).stdout.toString()).toBe('42\n');
  }, 600_000);

  it('refuses to restore a VM that had vsock without a socket for the new one, saying so', async () => {
    const socket = path.join(work, 'short.vsock');
    const guest = await bootLinux({ vsock: { path: socket } });
    vms.push(guest.vm);
    const snapshot = path.join(work, 'snap-2');
    await guest.vm.checkpoint(snapshot);
    await guest.vm.kill();
    await expect(Vm.restore(snapshot)).rejects.toThrow(/vsock device: restoring it needs a "virtio-vsock" resource/);
  }, 300_000);
});
