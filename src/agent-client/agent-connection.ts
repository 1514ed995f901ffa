// One connection to the guest agent: the vsock muxer's `CONNECT <port>` handshake (when there is a muxer), the
// agent's HELLO, then frames multiplexed by request id with per-request flow-control windows (docs/agent.md).
import net from 'node:net';
import {
  AgentError,
  encodeFields,
  encodeFrame,
  Field,
  Fields,
  FrameParser,
  FrameType,
  INIT_STATES,
  PROTOCOL_VERSION,
  type Frame,
  type InitState,
} from './agent-protocol.js';

export interface AgentEndpoint {
  /** A Unix socket: the VM's vsock muxer (with `vsockPort`), or an agent run with `--listen unix:PATH`. */
  socketPath: string;
  /** The guest port the agent listens on; given, the client first sends `CONNECT <port>\n` and expects `OK …`. */
  vsockPort?: number;
}

export interface AgentHello {
  protocol: number;
  version: string;
  bootId: string;
  generation: number;
  initState: InitState;
  /** Initial flow-control window per request and direction, in bytes. */
  window: number;
  maxPayload: number;
  /** What this agent does that older ones ignore: "exec-user" (EXEC's USER field). */
  features: string[];
}

/** A request in flight: its frames arrive through `onFrame`, a lost connection through `onClose`. */
export class AgentStream {
  #sendWindow: number;
  #waiters: (() => void)[] = [];
  #ended: AgentError | null = null;
  onFrame: (frame: Frame) => void = () => {};
  onClose: (error: AgentError) => void = () => {};

  constructor(
    readonly id: number,
    readonly what: string,
    window: number,
  ) {
    this.#sendWindow = window;
  }

  /** Waits until the agent lets us send data, then takes up to `want` bytes of the window; throws once ended. */
  async takeWindow(want: number): Promise<number> {
    for (;;) {
      if (this.#ended) throw this.#ended;
      if (this.#sendWindow > 0) break;
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
    const n = Math.min(want, this.#sendWindow);
    this.#sendWindow -= n;
    return n;
  }

  grant(n: number): void {
    this.#sendWindow += n;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  /** No more data may be sent: writers waiting for window get `reason`. */
  finish(reason: AgentError): void {
    this.#ended ??= reason;
    for (const wake of this.#waiters.splice(0)) wake();
  }
}

function connectUnix(socketPath: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(socketPath);
    const onError = (error: NodeJS.ErrnoException) =>
      reject(new AgentError(`cannot connect to ${socketPath}: ${error.message}`, error.code ?? 'EIO', socketPath));
    socket.once('connect', () => {
      socket.off('error', onError);
      resolve(socket);
    });
    socket.once('error', onError);
  });
}

export class AgentConnection {
  #streams = new Map<number, AgentStream>();
  #nextId = 1;
  #closed: AgentError | null = null;
  /** Why the agent said it is closing the connection (an ERROR on id 0), for the error that follows. */
  #agentReason = '';

  private constructor(
    private readonly socket: net.Socket,
    readonly endpoint: AgentEndpoint,
    readonly hello: AgentHello,
    parser: FrameParser,
  ) {
    socket.on('data', (chunk: Buffer) => {
      let frames: Frame[];
      try {
        frames = parser.push(chunk);
      } catch (error) {
        this.#fail(new AgentError(`${(error as Error).message}; closing the connection`, 'EPROTO'));
        return;
      }
      for (const frame of frames) this.#dispatch(frame);
    });
    socket.on('error', (error) => this.#fail(new AgentError(error.message, 'ECONNRESET')));
    socket.on('close', () => {
      const reason = this.#agentReason ? `: ${this.#agentReason}` : '';
      const cut = parser.pending ? ` (in the middle of a frame, ${parser.pending} bytes of it)` : '';
      this.#fail(
        new AgentError(`the agent at ${endpoint.socketPath} closed the connection${cut}${reason}`, 'ECONNRESET'),
      );
    });
  }

  /** Connects, does the muxer handshake when there is one, and waits for the agent's HELLO. */
  static async open(endpoint: AgentEndpoint, timeoutMs = 5000): Promise<AgentConnection> {
    const socket = await connectUnix(endpoint.socketPath);
    try {
      return await new Promise<AgentConnection>((resolve, reject) => {
        const parser = new FrameParser();
        let line = endpoint.vsockPort === undefined ? null : '';
        const timer = setTimeout(
          () =>
            fail(
              new AgentError(`no HELLO from the agent at ${endpoint.socketPath} within ${timeoutMs} ms`, 'ETIMEDOUT'),
            ),
          timeoutMs,
        );
        const fail = (error: AgentError) => {
          clearTimeout(timer);
          socket.off('data', onData);
          socket.off('close', onClose);
          socket.off('error', onError);
          socket.on('error', () => {}); // destroyed below; a late error must not go unhandled
          reject(error);
        };
        const onError = (error: NodeJS.ErrnoException) =>
          fail(new AgentError(`${endpoint.socketPath}: ${error.message}`, error.code ?? 'ECONNRESET'));
        const onClose = () =>
          fail(
            new AgentError(
              line !== null
                ? `the vsock muxer at ${endpoint.socketPath} closed the connection: nothing listens on guest port ${endpoint.vsockPort} (yet)`
                : `the agent at ${endpoint.socketPath} closed the connection before its HELLO`,
              'ECONNRESET',
            ),
          );
        const onData = (chunk: Buffer) => {
          if (line !== null) {
            const newline = chunk.indexOf(0x0a);
            line += chunk.subarray(0, newline < 0 ? chunk.length : newline).toString('latin1');
            if (newline < 0) {
              if (line.length > 64) fail(new AgentError(`the vsock muxer answered ${JSON.stringify(line)}`, 'EPROTO'));
              return;
            }
            if (!/^OK \d+$/.test(line))
              return fail(
                new AgentError(`the vsock muxer answered ${JSON.stringify(line)}, not "OK <port>"`, 'EPROTO'),
              );
            line = null;
            chunk = chunk.subarray(newline + 1);
          }
          let frames: Frame[];
          try {
            frames = parser.push(chunk);
          } catch (error) {
            return fail(new AgentError((error as Error).message, 'EPROTO'));
          }
          if (!frames.length) return;
          const [first, ...rest] = frames as [Frame, ...Frame[]];
          if (first.type !== FrameType.HELLO || first.id !== 0)
            return fail(new AgentError(`the agent's first frame is type ${first.type}, not HELLO`, 'EPROTO'));
          let hello: AgentHello;
          try {
            hello = parseHello(new Fields(first.payload));
          } catch (error) {
            // A field's failure ("the WINDOW field (tag 6) is 4 bytes …") is said to be the HELLO's.
            const { message } = error as Error;
            const code = error instanceof AgentError ? error.code : 'EPROTO';
            return fail(
              new AgentError(message.startsWith('the agent') ? message : `the agent's HELLO: ${message}`, code),
            );
          }
          clearTimeout(timer);
          socket.off('data', onData);
          socket.off('close', onClose);
          socket.off('error', onError);
          const connection = new AgentConnection(socket, endpoint, hello, parser);
          for (const frame of rest) connection.#dispatch(frame);
          resolve(connection);
        };
        socket.on('data', onData);
        socket.on('close', onClose);
        socket.on('error', onError);
        if (endpoint.vsockPort !== undefined) socket.write(`CONNECT ${endpoint.vsockPort}\n`);
      });
    } catch (error) {
      socket.destroy();
      throw error;
    }
  }

  get closed(): AgentError | null {
    return this.#closed;
  }

  /** A new request: the caller sends its first frame with `stream.id`. */
  stream(what: string): AgentStream {
    if (this.#closed) throw new AgentError(`${what}: ${this.#closed.message}`, this.#closed.code);
    while (this.#streams.has(this.#nextId) || this.#nextId === 0) this.#nextId = (this.#nextId + 1) >>> 0;
    const stream = new AgentStream(this.#nextId, what, this.hello.window);
    this.#nextId = (this.#nextId + 1) >>> 0;
    this.#streams.set(stream.id, stream);
    return stream;
  }

  /** Ends a request on our side: later frames for its id are ignored. */
  end(stream: AgentStream): void {
    this.#streams.delete(stream.id);
    stream.finish(new AgentError(`${stream.what} has ended`, 'ECANCELED'));
  }

  /** Queues a frame; resolves once the socket has room for more (so data senders do not buffer without bound). */
  send(frame: Buffer): Promise<void> {
    if (this.#closed) return Promise.reject(this.#closed);
    if (this.socket.write(frame)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  /** Tells the agent it may send `n` more data bytes on the stream. */
  grant(stream: AgentStream, n: number): void {
    if (n > 0 && !this.#closed && this.#streams.has(stream.id))
      this.socket.write(encodeFrame(FrameType.WINDOW, stream.id, encodeFields([[Field.WINDOW, n]])));
  }

  close(): void {
    this.#fail(
      new AgentError(
        `the connection to the agent at ${this.endpoint.socketPath} was closed by this client`,
        'ECANCELED',
      ),
    );
  }

  #dispatch(frame: Frame): void {
    if (frame.id === 0) {
      if (frame.type === FrameType.ERROR) {
        try {
          this.#agentReason = new Fields(frame.payload).str(Field.MESSAGE) ?? '';
        } catch {
          this.#agentReason = 'a malformed ERROR frame';
        }
      }
      return;
    }
    const stream = this.#streams.get(frame.id);
    if (!stream) return; // a request we gave up on
    if (frame.type === FrameType.WINDOW) {
      try {
        stream.grant(new Fields(frame.payload).num(Field.WINDOW) ?? 0);
      } catch {
        this.#fail(new AgentError('the agent sent a malformed WINDOW frame', 'EPROTO'));
      }
      return;
    }
    stream.onFrame(frame);
  }

  #fail(error: AgentError): void {
    if (this.#closed) return;
    this.#closed = error;
    this.socket.destroy();
    const streams = [...this.#streams.values()];
    this.#streams.clear();
    for (const stream of streams) {
      const streamError = new AgentError(`${stream.what}: ${error.message}`, error.code);
      stream.finish(streamError);
      stream.onClose(streamError);
    }
  }
}

function parseHello(fields: Fields): AgentHello {
  const protocol = fields.num(Field.PROTOCOL) ?? 0;
  if (protocol !== PROTOCOL_VERSION)
    throw new AgentError(`the agent speaks protocol ${protocol}; this client speaks ${PROTOCOL_VERSION}`, 'EPROTO');
  return {
    protocol,
    version: fields.str(Field.VERSION) ?? 'unknown',
    bootId: fields.str(Field.BOOT_ID) ?? 'unknown',
    generation: fields.num(Field.GENERATION) ?? 0,
    initState: INIT_STATES[fields.num(Field.INIT_STATE) ?? 0] ?? 'not-run',
    window: fields.num(Field.WINDOW) ?? 0,
    maxPayload: fields.num(Field.MAX_PAYLOAD) ?? 0,
    features: fields.strs(Field.FEATURE),
  };
}
