// The vmhost launcher of an engine that runs inside the app as a utilityProcess (src/engine/vmhost-launcher.ts
// is the seam it plugs into). The vmhost is started by the main process on request; from then on the engine and
// the vmhost talk through a MessagePort, and this object looks to vmhost.ts like the Node child it expects.
import { EventEmitter } from 'node:events';
import type { VmHostLauncher, VmHostProcess } from '../../src/engine/vmhost-launcher.js';
import type { PortLike } from '../../src/engine/vmhost-parent.js';
import type { HostMessageIn } from '../../src/engine/vmhost-protocol.js';
import type { EngineToMain, MainToEngine } from './engine-host-protocol.js';

/** The structural part of Electron's process.parentPort used here. */
export interface EngineParentPort {
  postMessage(message: EngineToMain): void;
  on(event: 'message', listener: (event: { data: unknown; ports: PortLike[] }) => void): unknown;
}

class PortVmHost extends EventEmitter implements VmHostProcess {
  pid: number | undefined;
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  #port: PortLike | null = null;
  readonly #waiting: HostMessageIn[] = [];

  constructor(
    readonly id: number,
    readonly parent: EngineParentPort,
  ) {
    super();
  }

  attach(port: PortLike, pid: number | undefined): void {
    this.pid = pid;
    this.#port = port;
    port.on('message', (event) => this.emit('message', event.data));
    port.on('close', () => this.emit('disconnect'));
    port.start();
    for (const message of this.#waiting.splice(0)) port.postMessage(message);
  }

  exited(code: number): void {
    if (this.exitCode !== null) return;
    this.exitCode = code;
    this.emit('exit', code, null);
  }

  send(message: HostMessageIn, callback: (error: Error | null) => void): boolean {
    if (this.exitCode !== null) {
      queueMicrotask(() => callback(new Error(`the vmhost exited (code ${this.exitCode})`)));
      return false;
    }
    if (this.#port) this.#port.postMessage(message);
    else this.#waiting.push(message);
    queueMicrotask(() => callback(null));
    return true;
  }

  kill(): boolean {
    if (this.exitCode !== null) return false;
    this.parent.postMessage({ type: 'vmhost-kill', id: this.id });
    return true;
  }
}

/** A launcher that asks the main process (over `parent`) for each vmhost. */
export function utilityVmHostLauncher(parent: EngineParentPort): VmHostLauncher {
  const hosts = new Map<number, PortVmHost>();
  let next = 0;
  parent.on('message', ({ data, ports }) => {
    const message = data as MainToEngine;
    const host = hosts.get(message.id);
    if (!host) return;
    if (message.type === 'vmhost-port' && ports[0]) host.attach(ports[0], message.pid);
    else if (message.type === 'vmhost-exit') {
      hosts.delete(message.id);
      host.exited(message.code);
    }
  });
  return (label) => {
    const host = new PortVmHost(++next, parent);
    hosts.set(host.id, host);
    parent.postMessage({ type: 'vmhost-launch', id: host.id, label });
    return host;
  };
}
