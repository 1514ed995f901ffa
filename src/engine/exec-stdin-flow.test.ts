// The exec WebSocket's stdin flow control (api-websockets.ts, `streamExec`): a client sending far more than a
// command reads is held back by the socket, not cut off. The command runs in the real guest agent on this host
// (host-agent.ts), the stream goes through the API server and the API client as `smol cp` sends a tar; only the
// VM around the agent is missing, so the engine's spawn is the few lines that hand the agent's process over.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentClient } from '../agent-client/agent-client.js';
import { startHostAgent, type HostAgent } from '../agent-client/host-agent.js';
import { ApiClient } from '../api/api-client.js';
import type { EngineApi, GuestProcessIo } from '../api/engine-api.js';
import { packageRoot } from '../package-root.js';
import { startApiServer, type ApiServer } from './api-server.js';

const dir = mkdtempSync(path.join(tmpdir(), 'smol-exec-flow-'));
let agent: HostAgent;
let client: AgentClient;
let server: ApiServer;

beforeAll(async () => {
  const make = spawnSync('make', ['-C', path.join(packageRoot, 'native'), 'agent'], { encoding: 'utf8' });
  if (make.status !== 0) throw new Error(`make -C native agent failed:\n${make.stdout}${make.stderr}`);
  agent = startHostAgent(dir);
  client = new AgentClient({ socketPath: agent.socketPath });
  await client.ready();
  const api = {
    getVm: () => ({}),
    async spawn(_vm: string, request: { argv: string[] }, io: GuestProcessIo) {
      const process = client.spawn(request.argv, {
        ...(io.stdin && { stdin: io.stdin }),
        onStdout: io.stdout,
        onStderr: io.stderr,
      });
      await process.pid;
      return {
        exit: process.result.then(({ exitCode, signal, timedOut }) => ({ exitCode, signal, timedOut })),
        kill: (signal: NodeJS.Signals) => process.kill(signal),
        resize: () => Promise.resolve(),
      };
    },
  } as unknown as EngineApi;
  server = await startApiServer({ api, socketPath: path.join(dir, 'api.sock') });
}, 60_000);

afterAll(async () => {
  await server?.close();
  client?.close();
  await agent?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** `mib` MiB of a repeating pattern in 256 KiB chunks, as fast as they are taken. */
async function* input(mib: number) {
  const chunk = Buffer.alloc(256 << 10, 'smol-flow ');
  for (let i = 0; i < mib * 4; i++) yield chunk;
}

describe('exec stdin through the API', () => {
  it('holds a client back while the command does not read, and delivers every byte once it does', async () => {
    // The command reads nothing for 3 s while 48 MiB wait: three times what the engine would queue before cutting
    // the client off, had the socket not stopped being read.
    const api = new ApiClient({ socketPath: path.join(dir, 'api.sock') });
    let stdout = '';
    let stderr = '';
    const stream = api.exec(
      'vm',
      { argv: ['sh', '-c', 'sleep 3; wc -c'] },
      {
        onStdout: (chunk) => (stdout += chunk.toString()),
        onStderr: (chunk) => (stderr += chunk.toString()),
        stdin: input(48),
      },
    );
    const exit = await stream.exit;
    expect({ exit, stderr }).toEqual({ exit: { exitCode: 0, signal: null, timedOut: false }, stderr: '' });
    expect(stdout.trim()).toBe(String(48 << 20));
  }, 120_000);

  it('ends cleanly when the command exits with most of its stdin unread', async () => {
    const api = new ApiClient({ socketPath: path.join(dir, 'api.sock') });
    let stdout = '';
    const stream = api.exec(
      'vm',
      { argv: ['sh', '-c', 'sleep 1; head -c 10'] },
      { onStdout: (chunk) => (stdout += chunk.toString()), onStderr: () => undefined, stdin: input(48) },
    );
    expect(await stream.exit).toEqual({ exitCode: 0, signal: null, timedOut: false });
    expect(stdout).toBe('smol-flow ');
  }, 120_000);
});
