// The app's engine (docs/electron.md, "Processes"): the data dir's engine if one answers on its socket (started by
// the CLI, the SDK or another app), else one the app starts as a utilityProcess, with its vmhosts as utility
// processes too. The engine's own lock decides a race with another starter, exactly as for `smol engine`.
import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MessageChannelMain, utilityProcess, type UtilityProcess } from 'electron';
import { ApiClient } from '../../src/api/api-client.js';
import { enginePaths } from '../../src/engine/engine-paths.js';
import { VMHOST_MAIN } from '../../src/engine/vmhost-launcher.js';
import type { EngineToMain } from './engine-host-protocol.js';

const ENGINE_UTILITY = path.join(path.dirname(fileURLToPath(import.meta.url)), 'engine-utility.js');
const LOCK_HELD = 3; // runEngine's exit code when another engine holds the lock

export interface EngineLink {
  client: ApiClient;
  /** The engine this app started, or null when it joined a running one. */
  owned: UtilityProcess | null;
}

async function answers(client: ApiClient): Promise<boolean> {
  return client.request('GET', '/api/v1/health').then(
    () => true,
    () => false,
  );
}

function pipeToLog(child: UtilityProcess, log: string): void {
  const append = (chunk: Buffer) => {
    try {
      appendFileSync(log, chunk);
    } catch {
      // the log is a convenience
    }
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
}

/** Starts vmhosts for the engine `engine` as utility processes, joined to it by MessagePorts. */
function serveVmHosts(engine: UtilityProcess, log: string): void {
  const hosts = new Map<number, UtilityProcess>();
  engine.on('message', (message: EngineToMain) => {
    if (message.type === 'vmhost-kill') return void hosts.get(message.id)?.kill();
    if (message.type !== 'vmhost-launch') return;
    const host = utilityProcess.fork(VMHOST_MAIN, [], {
      serviceName: `smol vmhost ${message.label}`,
      env: { ...process.env, SMOL_VMHOST: message.label },
      stdio: 'pipe',
    });
    pipeToLog(host, log);
    hosts.set(message.id, host);
    host.once('spawn', () => {
      const { port1, port2 } = new MessageChannelMain();
      host.postMessage({ type: 'engine-port' }, [port1]);
      engine.postMessage({ type: 'vmhost-port', id: message.id, pid: host.pid }, [port2]);
    });
    host.once('exit', (code) => {
      hosts.delete(message.id);
      engine.postMessage({ type: 'vmhost-exit', id: message.id, code });
    });
  });
  // The engine gone, its vmhosts' ports close and they end themselves (vmhost-parent.ts); this is the backstop.
  engine.once('exit', () => hosts.forEach((host) => host.kill()));
}

export async function linkEngine(home: string, timeoutMs = 60_000): Promise<EngineLink> {
  const paths = enginePaths(home);
  const client = new ApiClient({ socketPath: paths.socket });
  if (await answers(client)) return { client, owned: null };
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const engine = utilityProcess.fork(ENGINE_UTILITY, [], {
    serviceName: 'smol engine',
    env: { ...process.env, SMOL_HOME: home },
    stdio: 'pipe',
  });
  pipeToLog(engine, paths.log);
  serveVmHosts(engine, paths.log);
  let exited: number | null = null;
  engine.once('exit', (code) => (exited = code));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await answers(client)) return { client, owned: exited === null ? engine : null };
    if (exited !== null && exited !== LOCK_HELD)
      throw new Error(`the engine for ${home} failed to start (exit code ${exited}); see ${paths.log}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the engine for ${home} did not answer within ${timeoutMs / 1000} s; see ${paths.log}`);
}
