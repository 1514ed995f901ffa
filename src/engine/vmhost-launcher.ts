// How the engine starts a vmhost process: the one seam between the engine and the process model it runs under
// (docs/electron.md). Under Node a vmhost is a `child_process.fork` of vmhost-main.js; inside Electron the app
// injects a launcher that makes it an Electron utilityProcess. Either way the engine sees the same small surface,
// the part of Node's ChildProcess that vmhost.ts uses.
import { fork } from 'node:child_process';
import path from 'node:path';
import { packageRoot } from '../package-root.js';
import type { Readable, Writable } from 'node:stream';
import type { HostMessageIn, HostMessageOut } from './vmhost-protocol.js';

/** The vmhost's entry module (built). */
export const VMHOST_MAIN = path.join(packageRoot, 'dist', 'src', 'engine', 'vmhost-main.js');

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

/** Starts the vmhost for `label` (an episode id). */
export type VmHostLauncher = (label: string) => VmHostProcess;

/** The fd of the jail's report pipe in a vmhost that forkVmHost started. */
export const REPORT_FD = 4;

/**
 * The default: a Node child process with advanced serialization (Buffers cross as bytes); fd 4 is a pipe on which
 * its jail reports a forbidden system call before the process dies.
 */
export const forkVmHost: VmHostLauncher = (label) =>
  fork(VMHOST_MAIN, [], {
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc', 'pipe'],
    env: { ...process.env, SMOL_VMHOST: label, SMOL_VMHOST_REPORT_FD: String(REPORT_FD) },
  });
