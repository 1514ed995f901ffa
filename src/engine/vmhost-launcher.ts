// How the engine starts a vmhost process: the one seam between the engine and the process model it runs under
// (docs/electron.md). Under Node a vmhost is a `child_process.fork` of vmhost-main.js; inside Electron the app
// injects a launcher that makes it an Electron utilityProcess. Either way the engine sees the same small surface,
// the part of Node's ChildProcess that vmhost.ts uses.
import { fork, spawn, type StdioOptions } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageRoot } from '../package-root.js';
import type { JailBind } from '../vmm/native.js';
import { jailSupport } from './vmhost-jail.js';
import type { Readable, Writable } from 'node:stream';
import type { HostMessageIn, HostMessageOut } from './vmhost-protocol.js';

/**
 * The vmhost's entry module (built): the one next to this module when it is compiled JavaScript (so an engine from
 * another build, SMOL_DIST, starts that build's vmhosts), else dist/'s (the sources run by vitest, a bundle).
 */
const sibling = path.join(path.dirname(fileURLToPath(import.meta.url)), 'vmhost-main.js');
export const VMHOST_MAIN = existsSync(sibling)
  ? sibling
  : path.join(packageRoot, 'dist', 'src', 'engine', 'vmhost-main.js');

export interface VmHostProcess {
  readonly pid?: number | undefined;
  readonly exitCode: number | null;
  readonly signalCode: NodeJS.Signals | null;
  /** Under Node, stdio[4] is the jail's report pipe: a forbidden call's `seccomp: <name>` (docs/security.md). */
  readonly stdio?: readonly (Readable | Writable | null | undefined)[];
  /** Sends a request; `callback` gets an error when the process is gone. */
  send(message: HostMessageIn, callback: (error: Error | null) => void): boolean;
  kill(signal?: NodeJS.Signals): boolean;
  on(event: 'message', listener: (message: HostMessageOut) => void): this;
  on(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  on(event: 'error', listener: (error: Error) => void): this;
  on(event: 'disconnect', listener: () => void): this;
  once(event: 'message', listener: (message: HostMessageOut) => void): this;
  once(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
}

/** What a vmhost's root shows when it runs in namespaces of its own (vmhost-jail.ts). */
export interface VmHostJailPlan {
  binds: JailBind[];
  /** Its VMs have no network: it runs in an empty network namespace (only a `lo` that is down). */
  emptyNetwork?: boolean;
  /** Its episode's run/ directory (episodeRunDir), told to the vmhost as SMOL_VMHOST_RUN. */
  runDir?: string;
}

/** Starts the vmhost for `label` (an episode id); `jail` is what its root may show. */
export type VmHostLauncher = (label: string, jail?: VmHostJailPlan) => VmHostProcess;

/** The fd of the jail's report pipe in a vmhost that forkVmHost started. */
export const REPORT_FD = 4;

/**
 * The default: a Node child process with advanced serialization (Buffers cross as bytes); fd 4 is a pipe on which
 * its jail reports a forbidden system call before the process dies. Where the host allows (vmhost-jail.ts) it runs
 * through our launcher (native/launcher/smol-jail.c) in mount and PID namespaces of its own: the launcher stays its
 * parent (the engine's child, which ends as the vmhost ended, by the same signal, and takes the vmhost with it when
 * killed), and the IPC channel and report pipe go to the vmhost itself. The vmhost's
 * own pid on the host is the one its `ready` message gives (VmHost.pid).
 */
export const forkVmHost: VmHostLauncher = (label, jail) => {
  const env: NodeJS.ProcessEnv = { ...process.env, SMOL_VMHOST: label, SMOL_VMHOST_REPORT_FD: String(REPORT_FD) };
  if (jail?.runDir) env.SMOL_VMHOST_RUN = jail.runDir;
  const support = jailSupport();
  const options = {
    serialization: 'advanced' as const,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc', 'pipe'] satisfies StdioOptions,
  };
  if (!jail || !support.namespaces || !support.launcher) {
    env.SMOL_VMHOST_NS_REASON = !jail ? 'the engine gave no jail plan' : (support.reason ?? 'not supported');
    return fork(VMHOST_MAIN, [], { ...options, env });
  }
  env.SMOL_VMHOST_ROOT = JSON.stringify({ binds: jail.binds, hostMntNs: support.hostMntNs });
  const net = jail.emptyNetwork ? ['--net'] : [];
  env.SMOL_VMHOST_NS = [
    ...(support.userNamespace ? ['user'] : []),
    'mount',
    'pid',
    ...(net.length ? ['net'] : []),
  ].join(',');
  const args = [...support.launcherArgs, ...net, '--', process.execPath, ...process.execArgv, VMHOST_MAIN];
  return spawn(support.launcher, args, { ...options, env });
};
