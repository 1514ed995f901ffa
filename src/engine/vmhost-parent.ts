// A vmhost's channel to its engine (vmhost-launcher.ts is the other end): Node's IPC channel when a Node engine
// forked it; inside Electron, where the app launched it as a utilityProcess, a MessagePort that the app's main
// process hands over as the first message on `process.parentPort`, so the engine and the vmhost talk directly and
// the main process carries none of the console traffic (docs/electron.md).
import type { HostMessageIn, HostMessageOut } from './vmhost-protocol.js';

export interface EngineChannel {
  send(message: HostMessageOut): void;
  onMessage(listener: (message: HostMessageIn) => void): void;
  /** The engine went away (its channel closed). */
  onGone(listener: () => void): void;
}

/** The structural parts of Electron's ParentPort and MessagePortMain used here. */
interface PortEvent {
  data: unknown;
  ports: PortLike[];
}
export interface PortLike {
  postMessage(message: unknown): void;
  on(event: 'message', listener: (event: PortEvent) => void): unknown;
  on(event: 'close', listener: () => void): unknown;
  start(): void;
}
export interface ParentPortLike {
  once(event: 'message', listener: (event: PortEvent) => void): unknown;
}

/** The channel over a port that arrives later: messages sent before it does wait for it. */
export function portChannel(parentPort: ParentPortLike): EngineChannel {
  let port: PortLike | null = null;
  const waiting: HostMessageOut[] = [];
  const onMessage: ((message: HostMessageIn) => void)[] = [];
  const onGone: (() => void)[] = [];
  parentPort.once('message', (event) => {
    const given = event.ports[0];
    if (!given) {
      for (const listener of onGone) listener();
      return;
    }
    port = given;
    port.on('message', (message) => {
      for (const listener of onMessage) listener(message.data as HostMessageIn);
    });
    port.on('close', () => {
      for (const listener of onGone) listener();
    });
    port.start();
    for (const message of waiting.splice(0)) port.postMessage(message);
  });
  return {
    send: (message) => (port ? port.postMessage(message) : void waiting.push(message)),
    onMessage: (listener) => void onMessage.push(listener),
    onGone: (listener) => void onGone.push(listener),
  };
}

function nodeChannel(): EngineChannel {
  return {
    // A send that finds the engine gone (EPIPE: it died between two messages) is not an error of this process's:
    // the 'disconnect' that follows ends it through onGone, where an unhandled 'error' event would crash it first.
    send: (message) => void (process.connected && process.send?.(message, undefined, {}, () => undefined)),
    onMessage: (listener) => void process.on('message', (message) => listener(message as HostMessageIn)),
    onGone: (listener) => void process.on('disconnect', listener),
  };
}

/** This process's channel to its engine. */
export function engineChannel(): EngineChannel {
  const parentPort = (process as { parentPort?: ParentPortLike }).parentPort;
  return parentPort ? portChannel(parentPort) : nodeChannel();
}
