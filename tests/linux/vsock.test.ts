// Tier 3: virtio-vsock (native/vmm/virtio_vsock.c) with a real Linux guest, through the guest agent
// (native/agent/) and its client, over the VMM's Firecracker-style muxer socket: commands and files go both ways.
// Not yet here: the agent answering again after a restore or in a fork (the first lab run got no HELLO on the
// restored VM's socket within 90 s; to be found and fixed before the engine relies on it).
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AgentClient } from '../../electron/agent/agent-client.js';
import { Vm } from '../../electron/vmm/vm.js';
import { bootLinux, type LinuxGuest } from './linux-guest.js';

const work = mkdtempSync(path.join(tmpdir(), 'smol-vsock-'));
const vms: Vm[] = [];
const clients: AgentClient[] = [];
afterAll(async () => {
  clients.forEach((client) => client.close());
  await Promise.all(vms.filter((vm) => vm.state !== 'exited').map((vm) => vm.kill()));
  rmSync(work, { recursive: true, force: true });
});

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

/** Starts the agent from the console shell: busybox init stays PID 1 (docs/agent.md, "In the guest"). */
function startAgent(guest: LinuxGuest): void {
  guest.type(`/sbin/smol-agent --listen vsock:${AGENT_PORT} </dev/null >/dev/null 2>&1 &`);
}

describe('virtio-vsock with the guest agent in a Linux guest', () => {
  it('runs commands and moves files over the muxer socket', async () => {
    const socket = path.join(work, 'booted.vsock');
    const guest = await bootLinux({ vsock: { path: socket, cid: 42 } });
    vms.push(guest.vm);
    startAgent(guest);
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

  it('refuses to restore a VM that had vsock without a socket for the new one, saying so', async () => {
    const socket = path.join(work, 'short.vsock');
    const guest = await bootLinux({ vsock: { path: socket } });
    vms.push(guest.vm);
    const snapshot = path.join(work, 'snap-2');
    await guest.vm.checkpoint(snapshot);
    await guest.vm.kill();
    await expect(Vm.restore(snapshot)).rejects.toThrow(/vsock.*vsockPath/);
  }, 300_000);
});
