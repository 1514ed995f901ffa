// The agent's PID-1 duties, without a VM: `unshare` gives it PID and mount and UTS namespaces of its own, where it
// is PID 1 and does what it does as the guest's init (mounts, reaping orphans, hostname, reboot(2)) without
// touching the host. Only the listening socket (Unix instead of vsock) differs from the guest. Needs root.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../package-root.js';
import { AgentClient } from './agent-client.js';
import { AGENT_BINARY } from './host-agent.js';

const isRoot = process.getuid?.() === 0;

describe.skipIf(!isRoot)('the agent as PID 1 (in namespaces of its own; skipped unless root)', () => {
  // Not under /tmp: the agent mounts a tmpfs there in its namespace, which would hide the socket from this side.
  const dir = mkdtempSync('/var/tmp/smol-agent-pid1-');
  let log = '';
  let ended: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  let client: AgentClient;
  let unshare: ChildProcess | undefined;

  beforeAll(async () => {
    const make = spawnSync('make', ['-C', path.join(packageRoot, 'native'), 'agent'], { encoding: 'utf8' });
    if (make.status !== 0) throw new Error(`make -C native agent failed:\n${make.stdout}${make.stderr}`);
    const child = (unshare = spawn(
      'unshare',
      [
        '--pid',
        '--mount',
        '--uts',
        '--kill-child',
        AGENT_BINARY,
        '--listen',
        `unix:${path.join(dir, 'agent.sock')}`,
        '--machine-id-file',
        path.join(dir, 'machine-id'),
        '--hostname-file',
        path.join(dir, 'hostname'),
      ],
      { stdio: ['ignore', 'inherit', 'pipe'] },
    ));
    child.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    ended = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    client = new AgentClient({ socketPath: path.join(dir, 'agent.sock') });
    await client.ready();
  }, 60_000);

  afterAll(async () => {
    client?.close();
    if (unshare && unshare.exitCode === null && unshare.signalCode === null) {
      unshare.kill('SIGKILL'); // --kill-child takes the agent with it
      await ended;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('is PID 1 and has mounted the kernel file systems, /run and /tmp', async () => {
    expect((await client.exec(['sh', '-c', 'echo $PPID'])).stdout.toString()).toBe('1\n');
    const mounts = (await client.exec(['cat', '/proc/mounts'])).stdout.toString();
    for (const line of [/^proc \/proc proc /m, /^sysfs \/sys sysfs /m, /^devtmpfs \/dev devtmpfs /m]) {
      expect(mounts).toMatch(line);
    }
    expect(mounts).toMatch(/^devpts \/dev\/pts devpts /m);
    expect(mounts).toMatch(/^tmpfs \/run tmpfs /m);
    expect(mounts).toMatch(/^tmpfs \/tmp tmpfs /m);
  });

  it('reaps orphans: a background process whose parent exited leaves no zombie', async () => {
    await client.exec(['sh', '-c', 'sleep 0.2 & exit 0']);
    await new Promise((resolve) => setTimeout(resolve, 800));
    const states = await client.exec(['sh', '-c', "awk '{print $2, $3}' /proc/[0-9]*/stat"]);
    expect(states.stdout.toString()).not.toMatch(/ Z$/m);
  });

  it('re-mints the hostname for real (in its own UTS namespace, not the host)', async () => {
    const hostBefore = os.hostname();
    const result = await client.remint({ hostname: 'smol-fork-3', entropy: new Uint8Array(0) });
    expect(result.applied).toEqual(['hostname', 'hostname-file', 'machine-id']);
    expect((await client.exec(['uname', '-n'])).stdout.toString()).toBe('smol-fork-3\n');
    expect(os.hostname()).toBe(hostBefore);
  });

  it('poweroff stops every process and calls reboot(2), which ends its PID namespace', async () => {
    const sleeper = client.exec(['sleep', '30']).catch((error: unknown) => error);
    await client.poweroff();
    // reboot(RB_POWER_OFF) in a PID namespace kills its init; unshare reports that as SIGINT.
    const { code, signal } = await ended;
    expect(signal === 'SIGINT' || code === 130).toBe(true);
    expect(log).toContain('poweroff: stopping every process');
    expect(await sleeper).toMatchObject({ code: 'ECONNRESET' });
  });
});
