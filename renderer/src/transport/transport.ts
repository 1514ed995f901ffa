// What the UI needs from the engine, whichever way it arrives: HTTP and WebSocket in web mode (web-transport.ts),
// Electron IPC through the preload bridge later. Everything crossing it is plain data (JSON values, strings and
// byte arrays), so a structured-clone bridge can carry it unchanged.
import { operationRequest, type CallArgs, type OperationName, type ResponseOf } from '../../../src/api/operations.js';
import { API_PREFIX, type EngineEvent } from '../../../src/api/schema.js';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** A failed request: the engine's `{ error: { code, message } }`, or status 0 when it could not be reached. */
export class TransportError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'TransportError';
  }
}

export type StreamState = 'connecting' | 'open' | 'closed';

export interface EventStreamHandlers {
  onEvent(event: EngineEvent): void;
  /** 'open': every event from now on arrives (reload state then); 'closed': with the reason. */
  onState(state: StreamState, why?: string): void;
}

export interface ConsoleHandlers {
  /** The console's current screen as escape sequences: first, and again after the viewer fell behind. */
  onScreen(serialized: string, reason: 'attach' | 'resync'): void;
  /** Guest output, in order. */
  onData(data: Uint8Array): void;
  /** The console ended (the VM stopped, the engine went away, or it was refused). */
  onClose(why: string): void;
  /** The engine refused something typed (a read-only console). */
  onError?(message: string): void;
}

export interface ConsoleStream {
  write(data: string | Uint8Array): void;
  close(): void;
}

export interface TerminalHandlers {
  /** What the terminal shows: the command's output and the echo of what was typed. */
  onData(data: Uint8Array): void;
  /** The agent ran it. */
  onStart(): void;
  /** It ended (`exit 3`: exitCode 3); the stream closes after. */
  onExit(exit: { exitCode: number | null; signal: string | null; timedOut: boolean }): void;
  /** The stream ended without an exit: refused (no agent, a bad request) or dropped. */
  onClose(why: string): void;
}

export interface TerminalStream {
  /** Keys typed ("\x03" is Ctrl-C: the guest's terminal turns it into SIGINT for its foreground job). */
  write(data: string | Uint8Array): void;
  resize(rows: number, cols: number): void;
  /** Hangs up: the command gets SIGHUP. */
  close(): void;
}

export interface TerminalRequest {
  argv: string[];
  rows: number;
  cols: number;
  env?: Record<string, string>;
}

export interface Transport {
  /**
   * One API call; `path` is under /api/v1 (`/episodes`). Resolves with the parsed JSON, the text for other media
   * types (the asciicast recording), undefined for no body; rejects with a TransportError.
   */
  request<T = unknown>(method: Method, path: string, body?: unknown): Promise<T>;
  /** The engine's event stream; reconnects until closed. Returns the close. */
  events(handlers: EventStreamHandlers): () => void;
  /** A VM's live console. */
  console(vm: string, handlers: ConsoleHandlers): ConsoleStream;
  /**
   * A command on a pseudo-terminal in the guest, through its agent (the exec WebSocket with `tty`); absent where
   * the transport cannot carry one yet (the desktop app's IPC bridge).
   */
  terminal?(vm: string, request: TerminalRequest, handlers: TerminalHandlers): TerminalStream;
}

/** One API operation by its name, typed from the route table (src/api/operations.ts), over any Transport. */
export function call<O extends OperationName>(
  transport: Transport,
  name: O,
  ...[input]: CallArgs<O>
): Promise<ResponseOf<O>> {
  const { method, path, body } = operationRequest(name, input);
  return transport.request<ResponseOf<O>>(method, path.slice(API_PREFIX.length), body);
}
