// Main's side of the preload bridge (docs/electron.md, "IPC"): every message is checked (checkIpc: the sender is
// the app's top frame, the payload fits its schema) and then translated into one call on the engine's API over
// its Unix socket. Nothing here depends on Electron: main.ts hands in the sender frame and a way to push messages
// back, so the unit tests drive it with a real engine.
import { API_PREFIX, EngineEvent } from '../../src/api/schema.js';
import { ApiClientError, type ApiClient } from '../../src/api/api-client.js';
import { checkIpc, CHANNELS, PUSH_CHANNELS, type Channel, type SenderFrame } from './ipc-contract.js';
import { externalUrl } from './app-security.js';

/** What the renderer gets back from a request: errors as data, since Electron flattens thrown errors. */
export type RequestResult = { ok: true; value: unknown } | { ok: false; status: number; message: string };

export type PushMessage =
  | { channel: typeof PUSH_CHANNELS.event; payload: EventPush }
  | { channel: typeof PUSH_CHANNELS.console; payload: ConsolePush };

export type EventPush =
  { kind: 'event'; event: EngineEvent } | { kind: 'state'; state: 'connecting' | 'open' | 'closed'; why?: string };

export type ConsolePush =
  | { stream: number; kind: 'screen'; data: string; reason: 'attach' | 'resync' }
  | { stream: number; kind: 'data'; data: Uint8Array }
  | { stream: number; kind: 'close'; why: string };

export interface BridgeHost {
  push(message: PushMessage): void;
  openExternal(url: string): void;
  operationDone(title: string, ok: boolean): void;
  /** The native save dialog, starting at `defaultPath`: the path chosen, or null when cancelled. */
  chooseSavePath(defaultPath: string): Promise<string | null>;
  /** A refused message: logged, never answered with details the sender could use. */
  refused(why: string): void;
}

const RECONNECT_MS = [250, 500, 1000, 2000, 4000];

/** One renderer's bridge: its event subscription and its open consoles, closed together with `dispose`. */
export class IpcBridge {
  readonly #consoles = new Map<number, { write(data: string | Buffer): void; close(): void }>();
  #nextStream = 0;
  #events: { close(): void } | null = null;
  #eventsTimer: NodeJS.Timeout | undefined;
  #disposed = false;

  constructor(
    readonly client: ApiClient,
    readonly host: BridgeHost,
  ) {}

  /** Handles one message; `undefined` for the fire-and-forget channels and for refusals. */
  async handle(channel: string, sender: SenderFrame | null, payload: unknown): Promise<unknown> {
    const checked = checkIpc(channel as Channel, sender, payload);
    if (!checked.ok) {
      this.host.refused(checked.why);
      if (channel === CHANNELS.request) return { ok: false, status: 400, message: 'refused by the app' };
      return undefined;
    }
    const p = checked.payload as never;
    switch (channel as Channel) {
      case CHANNELS.request:
        return this.#request(p);
      case CHANNELS.eventsStart:
        this.#stopEvents(); // a reloaded page subscribes again
        return void this.#startEvents(0);
      case CHANNELS.eventsStop:
        return void this.#stopEvents();
      case CHANNELS.consoleOpen:
        return this.#openConsole((p as { vm: string }).vm);
      case CHANNELS.consoleWrite: {
        const { stream, data } = p as { stream: number; data: string | Uint8Array };
        return void this.#consoles.get(stream)?.write(typeof data === 'string' ? data : Buffer.from(data));
      }
      case CHANNELS.consoleClose: {
        const { stream } = p as { stream: number };
        this.#consoles.get(stream)?.close();
        return void this.#consoles.delete(stream);
      }
      case CHANNELS.openExternal: {
        const url = externalUrl((p as { url: string }).url);
        if (url) this.host.openExternal(url);
        else this.host.refused(`${channel}: not an http(s) link: ${(p as { url: string }).url.slice(0, 200)}`);
        return undefined;
      }
      case CHANNELS.operationDone: {
        const { title, ok } = p as { title: string; ok: boolean };
        return void this.host.operationDone(title, ok);
      }
      case CHANNELS.chooseSavePath:
        return this.host.chooseSavePath((p as { defaultPath: string }).defaultPath);
    }
  }

  async #request(p: { method: string; path: string; body?: unknown }): Promise<RequestResult> {
    try {
      return { ok: true, value: await this.client.request(p.method, `${API_PREFIX}${p.path}`, p.body) };
    } catch (error) {
      if (error instanceof ApiClientError) return { ok: false, status: error.status, message: error.message };
      return { ok: false, status: 0, message: `the engine did not answer (${(error as Error).message})` };
    }
  }

  #startEvents(attempt: number): void {
    if (this.#disposed) return;
    this.host.push({ channel: PUSH_CHANNELS.event, payload: { kind: 'state', state: 'connecting' } });
    this.#events = this.client.events(
      (event) => {
        const parsed = EngineEvent.safeParse(event);
        if (parsed.success) this.host.push({ channel: PUSH_CHANNELS.event, payload: { kind: 'event', event } });
      },
      {
        onOpen: () => {
          attempt = 0;
          this.host.push({ channel: PUSH_CHANNELS.event, payload: { kind: 'state', state: 'open' } });
        },
        onClose: (why) => {
          if (this.#disposed || !this.#events) return;
          this.host.push({ channel: PUSH_CHANNELS.event, payload: { kind: 'state', state: 'closed', why } });
          const delay = RECONNECT_MS[Math.min(attempt, RECONNECT_MS.length - 1)];
          this.#eventsTimer = setTimeout(() => this.#startEvents(attempt + 1), delay);
        },
      },
    );
  }

  #stopEvents(): void {
    clearTimeout(this.#eventsTimer);
    const events = this.#events;
    this.#events = null;
    events?.close();
  }

  #openConsole(vm: string): number {
    const stream = ++this.#nextStream;
    const push = (payload: ConsolePush) => this.host.push({ channel: PUSH_CHANNELS.console, payload });
    const console = this.client.console(vm, {
      onScreen: (data, reason) => push({ stream, kind: 'screen', data, reason }),
      // A Uint8Array of its own: structured clone copies exactly these bytes, not a pooled Buffer's whole slab.
      onData: (data) => push({ stream, kind: 'data', data: new Uint8Array(data) }),
      onClose: (why) => {
        this.#consoles.delete(stream);
        push({ stream, kind: 'close', why });
      },
    });
    this.#consoles.set(stream, console);
    return stream;
  }

  /** The renderer went away or reloaded: close its streams. */
  dispose(): void {
    this.#disposed = true;
    this.#stopEvents();
    for (const console of this.#consoles.values()) console.close();
    this.#consoles.clear();
  }
}
