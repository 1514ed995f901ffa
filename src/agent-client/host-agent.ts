// Runs the guest agent binary on this host, listening on a Unix socket instead of vsock (`--listen unix:PATH`):
// the same protocol code as in the guest, without its PID-1 duties. The agent's tests use it; so can anyone
// developing a client without a VM.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../package-root.js';

export const AGENT_BINARY = path.join(packageRoot, 'native', 'out', 'agent', 'smol-agent');
/** The same agent built with ASan and UBSan (`make -C native agent` builds both), for tests that attack it. */
export const AGENT_ASAN_BINARY = path.join(packageRoot, 'native', 'out', 'agent', 'smol-agent-asan');

export interface HostAgent {
  socketPath: string;
  process: ChildProcess;
  /** What the agent logged so far. */
  log(): string;
  /** Resolves with the exit code (or signal name) once the agent has ended. */
  exited: Promise<number | string>;
  stop(): Promise<void>;
}

/** Starts the agent listening on `dir`/agent.sock, its machine-id and hostname files in `dir` too. */
export function startHostAgent(dir: string, options: { binary?: string; args?: string[] } = {}): HostAgent {
  const binary = options.binary ?? AGENT_BINARY;
  if (!existsSync(binary))
    throw new Error(`${binary} is missing: build it with \`make -C native agent\` (or npm run build:native)`);
  const socketPath = path.join(dir, 'agent.sock');
  const child = spawn(
    binary,
    [
      '--listen',
      `unix:${socketPath}`,
      '--machine-id-file',
      path.join(dir, 'machine-id'),
      '--hostname-file',
      path.join(dir, 'hostname'),
      ...(options.args ?? []),
    ],
    { stdio: ['ignore', 'inherit', 'pipe'] },
  );
  let log = '';
  child.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  return {
    socketPath,
    process: child,
    log: () => log,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
