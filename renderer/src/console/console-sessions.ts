// Live consoles, one per VM, kept outside React so a console survives switching views: the terminal, its stream
// from the engine and its addons live here, and the Console component only lends it a place in the page. Bytes go
// from the WebSocket straight into xterm.js (through its OutputFeed), never through React state (STYLE.md).
import { FitAddon } from '@xterm/addon-fit';
import { SearchAddon } from '@xterm/addon-search';
import { WebLinksAddon } from '@xterm/addon-web-links';
import { Terminal, type ITheme } from '@xterm/xterm';
import type { ConsoleStream, Transport } from '../transport/transport.js';
import { gpuRenderer } from './gpu-renderer.js';
import { openLinkAfterAsking } from './links.js';
import { OutputFeed, type Output } from './output-feed.js';
import { chunkedWriter } from './paste.js';

export type ConsoleStatus = { state: 'connecting' | 'live' } | { state: 'closed'; why: string };

/**
 * xterm.js parses in slices of about 12 ms between frames, but a slice never splits a write: output is handed to it
 * in chunks this big at most (see OutputFeed), so a large WebSocket message cannot hold a frame for long.
 */
const WRITE_CHUNK = 16 << 10;
/**
 * Output given to the console and not parsed yet. Past this the page has fallen behind the guest by seconds: rather
 * than let xterm discard data at its own limit (50 MB, silently), the console drops its backlog at once, attaches
 * again, shows the engine's current screen and says so under it.
 */
const MAX_UNPARSED = 24 << 20;
/** RIS, "reset to initial state": the terminal's reset, in order with the output before and after it. */
const RESET = '\x1bc';

export const TERMINAL_THEME: ITheme = {
  background: '#0d1117',
  foreground: '#d6dde6',
  cursor: '#7cc4ff',
  selectionBackground: '#2f4a6b',
};

export class ConsoleSession {
  readonly terminal: Terminal;
  readonly fit = new FitAddon();
  readonly search = new SearchAddon();
  /** The element xterm renders into; moved between containers, never re-opened. */
  readonly element: HTMLDivElement;
  #stream: ConsoleStream | null = null;
  #status: ConsoleStatus = { state: 'connecting' };
  readonly #listeners = new Set<() => void>();
  readonly #input;
  readonly #feed: OutputFeed;
  /** Set when the page fell behind, until the engine's screen replaces what was dropped (and says so). */
  #catchingUp = false;

  constructor(
    readonly vm: string,
    readonly transport: Transport,
    implicitCr = false,
  ) {
    this.terminal = new Terminal({
      convertEol: implicitCr, // a bare serial guest's LF (implicit-cr.ts)
      fontFamily: 'ui-monospace, "JetBrains Mono", "DejaVu Sans Mono", monospace',
      fontSize: 13,
      scrollback: 5000,
      theme: TERMINAL_THEME,
      allowProposedApi: true, // the search addon's match decorations
      screenReaderMode: false,
    });
    this.terminal.loadAddon(this.fit);
    this.terminal.loadAddon(this.search);
    this.terminal.loadAddon(new WebLinksAddon((_event, uri) => void openLinkAfterAsking(uri)));
    this.element = document.createElement('div');
    this.element.className = 'xterm-host';
    this.terminal.open(this.element);
    this.terminal.textarea?.setAttribute('aria-label', `Console input of ${vm}`);
    this.#input = chunkedWriter((data) => this.#stream?.write(data));
    this.terminal.onData((data) => this.#input.write(data));
    this.terminal.onBinary((data) => this.#stream?.write(Uint8Array.from(data, (c) => c.charCodeAt(0))));
    this.#feed = new OutputFeed({ write: (data, parsed) => this.terminal.write(data, parsed) }, WRITE_CHUNK);
    this.connect();
  }

  get status(): ConsoleStatus {
    return this.#status;
  }

  /** Whether typing goes to the guest now: the terminal has the keyboard focus (only after the user clicked it). */
  get typing(): boolean {
    return this.terminal.textarea !== undefined && document.activeElement === this.terminal.textarea;
  }

  /** Calls `listener` when the terminal gains or loses the focus; returns the stop. */
  onTyping(listener: () => void): () => void {
    const textarea = this.terminal.textarea;
    textarea?.addEventListener('focus', listener);
    textarea?.addEventListener('blur', listener);
    return () => {
      textarea?.removeEventListener('focus', listener);
      textarea?.removeEventListener('blur', listener);
    };
  }

  onStatus(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #setStatus(status: ConsoleStatus): void {
    this.#status = status;
    for (const listener of this.#listeners) listener();
  }

  /** (Re)attaches to the engine: the current screen first, then live output. */
  connect(): void {
    this.#stream?.close();
    this.#setStatus({ state: 'connecting' });
    this.#stream = this.transport.console(this.vm, {
      onScreen: (serialized) => {
        // Output still waiting came before this screen, which holds it: dropped, and the terminal reset in order
        // after the chunk xterm.js may be parsing.
        this.#feed.drop();
        this.#feed.push(RESET + serialized);
        if (this.#catchingUp) {
          this.#catchingUp = false;
          this.#feed.push('\r\n\x1b[33m[smol] this page fell behind the output: this is the current screen\x1b[0m\r\n');
        }
        this.#setStatus({ state: 'live' });
      },
      onData: (data) => this.output(data),
      onClose: (why) => this.#setStatus({ state: 'closed', why }),
      onError: (message) => this.#feed.push(`\r\n\x1b[31m[smol] ${message}\x1b[0m\r\n`),
    });
  }

  /** Output from the guest, into the terminal through the feed; see MAX_UNPARSED for a page that cannot keep up. */
  output(data: Output): void {
    if (this.#catchingUp) return;
    if (this.#feed.backlog + data.length > MAX_UNPARSED) {
      // What waits would be parsed for seconds only to be replaced by the engine's screen: dropped now, and the
      // output that comes until that screen too.
      this.#catchingUp = true;
      this.#feed.drop();
      this.connect();
      return;
    }
    this.#feed.push(data);
  }

  /** Shows the console in `container`, drawn by the GPU while shown where the GPU is real; returns the hide. */
  show(container: HTMLElement): () => void {
    container.appendChild(this.element);
    const gpu = gpuRenderer(this.terminal);
    return () => {
      gpu?.dispose();
      this.element.remove();
    };
  }

  /** Types text as if pasted (chunked). */
  type(text: string): void {
    this.#input.write(text);
  }

  dispose(): void {
    this.#input.cancel();
    this.#feed.drop();
    this.#stream?.close();
    this.terminal.dispose();
    this.#listeners.clear();
  }
}

const sessions = new Map<string, ConsoleSession>();

/** The console of `vm`, made on first use; `implicitCr` (implicit-cr.ts) applies to what it prints from now on. */
export function consoleSession(vm: string, transport: Transport, implicitCr = false): ConsoleSession {
  let session = sessions.get(vm);
  if (!session) {
    session = new ConsoleSession(vm, transport, implicitCr);
    sessions.set(vm, session);
  } else if (session.terminal.options.convertEol !== implicitCr) {
    session.terminal.options.convertEol = implicitCr;
  }
  return session;
}

/** Ends the consoles of VMs that are gone. */
export function pruneConsoleSessions(living: ReadonlySet<string>): void {
  for (const [vm, session] of sessions) {
    if (!living.has(vm)) {
      session.dispose();
      sessions.delete(vm);
    }
  }
}

/**
 * For `smol bench ui`: a VM's console session, to read what its terminal parsed and, for the benchmark's page-only
 * stage, to feed output through the same path the engine's does.
 */
(globalThis as { smolConsoleSession?: (vm: string) => ConsoleSession | undefined }).smolConsoleSession = (vm) =>
  sessions.get(vm);
