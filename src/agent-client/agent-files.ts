// File transfers through the agent. Reads arrive as a Readable whose consumption grants the agent its window
// (so a slow reader holds the agent back instead of filling memory); writes go out chunk by chunk as the agent's
// window and the socket allow.
import { Readable } from 'node:stream';
import type { AgentConnection } from './agent-connection.js';
import { pumpData } from './agent-process.js';
import {
  AgentError,
  encodeFields,
  encodeFrame,
  Field,
  Fields,
  FLAG_EOF,
  FrameType,
  type Frame,
} from './agent-protocol.js';

export interface AgentFileReader {
  /** The file's size when it was opened (0 for /proc and /sys files, whose length only reading tells). */
  size: number;
  mode: number;
  stream: Readable;
}

export type WriteSource = string | Uint8Array | AsyncIterable<Uint8Array>;

function fieldsOf(frame: Frame, what: string): Fields {
  try {
    return new Fields(frame.payload);
  } catch (error) {
    throw new AgentError(`${what}: ${(error as Error).message}`, 'EPROTO');
  }
}

/** The error with the request it belongs to in front ("read /etc/hostname: the SIZE field … is 3 bytes …"). */
function named(error: Error, what: string): Error {
  if (error.message.startsWith(`${what}:`)) return error;
  return new AgentError(`${what}: ${error.message}`, (error as AgentError).code ?? 'EPROTO');
}

export function openAgentFile(connection: AgentConnection, path: string): Promise<AgentFileReader> {
  const stream = connection.stream(`read ${path}`);
  return new Promise<AgentFileReader>((resolve, reject) => {
    let readable: Readable | null = null;
    let ungranted = 0; // bytes pushed while the Readable was full: granted when it asks for more
    let ended = false;
    const fail = (error: Error) => {
      ended = true;
      connection.end(stream);
      if (readable) readable.destroy(error);
      else reject(error);
    };
    stream.onClose = fail;
    stream.onFrame = (frame) => {
      try {
        if (frame.type === FrameType.ERROR)
          return fail(AgentError.fromFrame(fieldsOf(frame, stream.what), stream.what));
        if (!readable) {
          if (frame.type !== FrameType.OK)
            throw new AgentError(`${stream.what}: unexpected frame ${frame.type}`, 'EPROTO');
          const fields = fieldsOf(frame, stream.what);
          // Read before the stream exists: a bad SIZE or MODE must reject the open, not a stream nobody has yet.
          const size = fields.num(Field.SIZE) ?? 0;
          const mode = fields.num(Field.MODE) ?? 0;
          readable = new Readable({
            highWaterMark: connection.hello.window,
            read() {
              connection.grant(stream, ungranted);
              ungranted = 0;
            },
            destroy(error, callback) {
              if (!ended) {
                // The consumer gave up: the agent ends the transfer (KILL on a file request cancels it).
                ended = true;
                connection.end(stream);
                connection.send(encodeFrame(FrameType.KILL, stream.id, Buffer.alloc(0))).catch(() => {});
              }
              callback(error);
            },
          });
          // A bad frame right behind the OK (in the same read) destroys the stream before its consumer listens:
          // an 'error' event nobody hears would end the engine. The consumer still gets the error on its next read.
          readable.on('error', () => {});
          resolve({ size, mode, stream: readable });
          return;
        }
        if (frame.type !== FrameType.FILE_DATA)
          throw new AgentError(`${stream.what}: unexpected frame ${frame.type}`, 'EPROTO');
        if (frame.payload.length) {
          if (readable.push(frame.payload)) connection.grant(stream, frame.payload.length);
          else ungranted += frame.payload.length;
        }
        if (frame.flags & FLAG_EOF) {
          ended = true;
          connection.end(stream);
          readable.push(null);
        }
      } catch (error) {
        fail(named(error as Error, stream.what));
      }
    };
    connection.send(encodeFrame(FrameType.FILE_READ, stream.id, encodeFields([[Field.PATH, path]]))).catch(fail);
  });
}

export async function writeAgentFile(
  connection: AgentConnection,
  path: string,
  data: WriteSource,
  options: { mode?: number; mkdirs?: boolean },
): Promise<{ bytes: number }> {
  const stream = connection.stream(`write ${path}`);
  let opened!: () => void;
  let finished!: (bytes: number) => void;
  let failed!: (error: Error) => void;
  const open = new Promise<void>((resolve, reject) => {
    opened = resolve;
    failed = reject;
  });
  const done = new Promise<number>((resolve, reject) => {
    finished = resolve;
    const first = failed;
    failed = (error) => {
      first(error);
      reject(error);
    };
  });
  open.catch(() => {});
  done.catch(() => {});
  let settled = false;
  const fail = (error: Error) => {
    settled = true;
    connection.end(stream);
    failed(error);
  };
  let isOpen = false;
  stream.onClose = fail;
  stream.onFrame = (frame) => {
    try {
      const fields = fieldsOf(frame, stream.what);
      if (frame.type === FrameType.ERROR) return fail(AgentError.fromFrame(fields, stream.what));
      if (frame.type !== FrameType.OK) throw new AgentError(`${stream.what}: unexpected frame ${frame.type}`, 'EPROTO');
      if (!isOpen) {
        isOpen = true;
        opened();
      } else {
        settled = true;
        connection.end(stream);
        finished(fields.num(Field.SIZE) ?? 0);
      }
    } catch (error) {
      fail(named(error as Error, stream.what));
    }
  };
  const request = encodeFields([
    [Field.PATH, path],
    [Field.MODE, options.mode ?? 0o644],
    [Field.MKDIRS, options.mkdirs ? 1 : 0],
  ]);
  await connection.send(encodeFrame(FrameType.FILE_WRITE, stream.id, request));
  await open;
  try {
    await pumpData(connection, stream, FrameType.FILE_DATA, data);
  } catch (error) {
    if (!settled) {
      // The source failed: the agent drops the temporary file (KILL on a file request cancels it).
      connection.end(stream);
      await connection.send(encodeFrame(FrameType.KILL, stream.id, Buffer.alloc(0))).catch(() => {});
      throw error;
    }
    // The agent's ERROR (a full disk, say) says more than "the request has ended"; its final OK before the data
    // was all sent is a broken agent's.
    throw await done.then(
      () => new AgentError(`${stream.what}: the agent ended the write before all the data was sent`, 'EPROTO'),
      (reason: unknown) => reason,
    );
  }
  return { bytes: await done };
}
