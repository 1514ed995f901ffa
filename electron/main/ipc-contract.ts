// What may cross the preload bridge (docs/electron.md, "IPC"): the channels, their payloads as zod schemas, and the
// sender check. Main validates every message against these before acting on it; anything else is refused and
// logged. The preload (electron/preload/preload.cts) can import nothing at run time, so it repeats the channel
// names; a unit test keeps the two lists equal.
import { z } from 'zod';
import { APP_ORIGIN } from './app-security.js';

/** Renderer → main, each with its payload schema. `invoke` ones answer; `send` ones do not. */
export const CHANNELS = {
  request: 'smol:request',
  eventsStart: 'smol:events-start',
  eventsStop: 'smol:events-stop',
  consoleOpen: 'smol:console-open',
  consoleWrite: 'smol:console-write',
  consoleClose: 'smol:console-close',
  openExternal: 'smol:open-external',
  operationDone: 'smol:operation-done',
  chooseSavePath: 'smol:choose-save-path',
} as const;

/** Main → renderer. */
export const PUSH_CHANNELS = {
  event: 'smol:event',
  console: 'smol:console',
  menuCommand: 'smol:menu-command',
} as const;

const MAX_BYTES = 1 << 20;

/**
 * A path under /api/v1, as the renderer's Transport names it. Only the characters of ids, names and query strings;
 * never `..`, `//` or a backslash, so the request cannot leave the API whatever the engine's router would do. The
 * engine's listener and shutdown routes are not the UI's business: a renderer that guest output managed to subvert
 * must not be able to open the engine to the network or stop it.
 */
const ApiPath = z
  .string()
  .max(2000)
  .regex(/^\/[A-Za-z0-9._~%/?=&:+,-]*$/, 'a path under /api/v1')
  .refine((p) => !p.split(/[/?]/).includes('..') && !p.includes('//'), 'a path that stays under /api/v1')
  .refine((p) => !/^\/engine(\/|\?|$)/.test(p) || p === '/engine', 'a route the app may use (not /engine/…)');

export const ApiRequest = z.strictObject({
  method: z.enum(['GET', 'POST', 'PATCH', 'DELETE']),
  path: ApiPath,
  body: z.json().optional(),
});

const StreamId = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

export const PAYLOADS = {
  [CHANNELS.request]: ApiRequest,
  [CHANNELS.eventsStart]: z.undefined(),
  [CHANNELS.eventsStop]: z.undefined(),
  [CHANNELS.consoleOpen]: z.strictObject({ vm: z.string().min(1).max(200) }),
  [CHANNELS.consoleWrite]: z.strictObject({
    stream: StreamId,
    data: z.union([z.string().max(MAX_BYTES), z.instanceof(Uint8Array).refine((d) => d.length <= MAX_BYTES)]),
  }),
  [CHANNELS.consoleClose]: z.strictObject({ stream: StreamId }),
  [CHANNELS.openExternal]: z.strictObject({ url: z.string().max(4096) }),
  [CHANNELS.operationDone]: z.strictObject({ title: z.string().min(1).max(200), ok: z.boolean() }),
  [CHANNELS.chooseSavePath]: z.strictObject({ defaultPath: z.string().min(1).max(4096) }),
} as const;

export type Channel = keyof typeof PAYLOADS;
export type Payload<C extends Channel> = z.infer<(typeof PAYLOADS)[C]>;

/** What main knows about the frame a message came from. */
export interface SenderFrame {
  url: string;
  /** Whether it is the window's top frame (no iframe may talk to main). */
  isMainFrame: boolean;
}

export type Checked<C extends Channel> = { ok: true; payload: Payload<C> } | { ok: false; why: string };

/** The sender and payload check every IPC handler goes through first. */
export function checkIpc<C extends Channel>(channel: C, sender: SenderFrame | null, payload: unknown): Checked<C> {
  if (!(channel in PAYLOADS)) return { ok: false, why: `unknown channel ${String(channel)}` };
  if (!sender) return { ok: false, why: `${channel}: no sender frame` };
  if (!sender.isMainFrame) return { ok: false, why: `${channel}: sent from a subframe (${sender.url})` };
  let origin: string;
  try {
    const url = new URL(sender.url);
    origin = `${url.protocol}//${url.host}`;
  } catch {
    return { ok: false, why: `${channel}: sender URL ${sender.url} does not parse` };
  }
  if (origin !== APP_ORIGIN)
    return { ok: false, why: `${channel}: sender ${sender.url} is not the app (${APP_ORIGIN})` };
  const parsed = PAYLOADS[channel].safeParse(payload);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, why: `${channel}: ${issue?.path.join('.') || 'payload'}: ${issue?.message ?? 'invalid'}` };
  }
  return { ok: true, payload: parsed.data as Payload<C> };
}
