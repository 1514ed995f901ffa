// Adding and removing remote engines for this page (docs/remote.md, "The app with several engines"): adding is two
// steps, the certificate's fingerprint shown and confirmed first. The page never holds a remote token after adding:
// the local engine keeps it and forwards /engines/NAME/….
import type { AddedEngine, EngineProbe } from '../../../src/api/schema.js';
import { call, type Transport } from '../transport/transport.js';

/** Step one of adding: what certificate the engine at `url` presents (no token is sent). */
export function probeEngine(transport: Transport, url: string): Promise<EngineProbe> {
  return call(transport, 'probeEngine', { body: { url } });
}

/** Step two: adds it, accepting only the certificate the person confirmed (null: plain HTTP, nothing to pin). */
export function addEngine(
  transport: Transport,
  request: { name: string; url: string; token: string; fingerprint: string | null },
): Promise<AddedEngine> {
  const { fingerprint, ...rest } = request;
  return call(transport, 'addEngine', { body: { ...rest, ...(fingerprint && { fingerprint }) } });
}

export function removeEngine(transport: Transport, name: string): Promise<void> {
  return call(transport, 'removeEngine', { params: { engine: name } });
}
