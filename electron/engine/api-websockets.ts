// The API's WebSocket streams (docs/engine.md, "API" and "Consoles"): engine events, and a VM's live console. The
// server (api-server.ts) checks the token, the Origin and the path before it upgrades and hands the socket here.
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';
import type { ConsoleAttachment, EngineApi } from '../api/engine-api.js';

/** An events viewer this far behind is cut off rather than buffered without end. */
const MAX_EVENT_BACKLOG = 64 << 20;

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

const toBuffer = (data: RawData) =>
  Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);

/** Answers an upgrade request with an HTTP error (the `{ error: { code, message } }` body) instead of a WebSocket. */
export function rejectUpgrade(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ error: { code: status, message } });
  const head = [`HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}`, 'content-type: application/json'];
  head.push(`content-length: ${Buffer.byteLength(body)}`, 'connection: close');
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
}

/** Every engine event from now on, one JSON EngineEvent per text message, until the viewer leaves. */
export function streamEvents(api: EngineApi, ws: WebSocket): void {
  const unsubscribe = api.subscribe((event) => {
    if (ws.bufferedAmount > MAX_EVENT_BACKLOG) ws.terminate();
    else ws.send(JSON.stringify(event));
  });
  ws.on('close', unsubscribe);
}

/**
 * A VM's console: `{"type":"screen","data","reason"}` (text) first and after a resync, output as binary messages,
 * `{"type":"closed","reason"}` and a close when the VM ends. The viewer's messages, binary or text, are typed in;
 * one the console refuses (a read-only console) is answered with `{"type":"error","message"}`.
 */
export function streamConsole(api: EngineApi, vmRef: string, ws: WebSocket): void {
  let ended = false;
  const sendJson = (message: object) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(message));
  let attachment: ConsoleAttachment;
  try {
    attachment = api.attachConsole(vmRef, {
      screen: (data, reason) => sendJson({ type: 'screen', data, reason }),
      output: (chunk) => ws.readyState === ws.OPEN && ws.send(chunk, { binary: true }),
      backlog: () => ws.bufferedAmount,
      closed: (reason) => {
        ended = true;
        sendJson({ type: 'closed', reason });
        ws.close(1000);
      },
    });
  } catch (error) {
    sendJson({ type: 'closed', reason: messageOf(error) });
    return void ws.close(1000);
  }
  ws.on('message', (data, isBinary) => {
    try {
      attachment.write(isBinary ? toBuffer(data) : toBuffer(data).toString('utf8'));
    } catch (error) {
      sendJson({ type: 'error', message: messageOf(error) });
    }
  });
  ws.on('close', () => {
    if (!ended) attachment.detach();
  });
}
