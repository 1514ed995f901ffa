// The Transport inside the desktop app: the preload bridge (`window.smolBridge`, electron/preload/preload.cts),
// which main checks and forwards to the engine (docs/electron.md, "IPC"). Same contract as web-transport.ts.
import { EngineEvent } from '../../../src/api/schema.js';
import type { ConsolePush, SmolBridge } from '../../../electron/preload/bridge-types.js';
import {
  TransportError,
  type ConsoleHandlers,
  type ConsoleStream,
  type EventStreamHandlers,
  type Method,
  type Transport,
} from './transport.js';

/** The bridge, when this page runs in the app's window. */
export function smolBridge(target: object): SmolBridge | null {
  const bridge = (target as { smolBridge?: SmolBridge }).smolBridge;
  return bridge && typeof bridge.request === 'function' ? bridge : null;
}

export class ElectronTransport implements Transport {
  readonly #consoles = new Map<number, (push: ConsolePush) => void>();

  constructor(readonly bridge: SmolBridge) {
    bridge.onConsole((push) => this.#consoles.get(push.stream)?.(push));
  }

  async request<T>(method: Method, path: string, body?: unknown): Promise<T> {
    let result;
    try {
      result = await this.bridge.request(method, path, body);
    } catch (error) {
      throw new TransportError(0, `the app did not answer (${(error as Error).message})`);
    }
    if (!result.ok) throw new TransportError(result.status, result.message);
    return result.value as T;
  }

  events(handlers: EventStreamHandlers): () => void {
    const off = this.bridge.onEvent((push) => {
      if (push.kind === 'state') return handlers.onState(push.state, push.why);
      const parsed = EngineEvent.safeParse(push.event);
      if (parsed.success) handlers.onEvent(parsed.data);
      else console.error('smol: an engine event the schema does not accept', parsed.error, push.event);
    });
    this.bridge.startEvents();
    return () => {
      off();
      this.bridge.stopEvents();
    };
  }

  console(vm: string, handlers: ConsoleHandlers): ConsoleStream {
    let stream: number | null = null;
    let ended = false;
    const pending: (string | Uint8Array)[] = [];
    const end = (why: string) => {
      if (ended) return;
      ended = true;
      if (stream !== null) this.#consoles.delete(stream);
      handlers.onClose(why);
    };
    this.bridge.openConsole(vm).then(
      (id) => {
        if (id === undefined) return end('the app refused the console');
        stream = id;
        if (ended) return this.bridge.closeConsole(id);
        this.#consoles.set(id, (push) => {
          if (push.kind === 'screen') handlers.onScreen(push.data, push.reason);
          else if (push.kind === 'data') handlers.onData(push.data);
          else end(push.why);
        });
        for (const data of pending.splice(0)) this.bridge.writeConsole(id, data);
      },
      (error: unknown) => end(`the app did not open the console (${(error as Error).message})`),
    );
    return {
      write: (data) => {
        if (ended) return;
        if (stream === null) pending.push(data);
        else this.bridge.writeConsole(stream, data);
      },
      close: () => {
        ended = true;
        if (stream !== null) {
          this.#consoles.delete(stream);
          this.bridge.closeConsole(stream);
        }
      },
    };
  }
}
