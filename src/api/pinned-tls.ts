// HTTPS to a remote engine whose certificate is trusted by its fingerprint, not by a CA (docs/remote.md, "Pinning"):
// the certificate's SHA-256 is given (`fingerprint`), or learnt on first use and kept in a pin store, as SSH keeps
// host keys in known_hosts. A certificate that differs from the pinned one is refused before a byte of the request
// (and so before the token) is sent: the connection is checked in the agent's createConnection, and only a socket
// that passed is handed to the request.
import https from 'node:https';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';

/** Where a client keeps the fingerprints it trusted on first use, keyed by `host:port`. */
export interface PinStore {
  get(where: string): { fingerprint: string; since: string } | null;
  set(where: string, fingerprint: string): void;
}

export interface PinOptions {
  /** The certificate's SHA-256 fingerprint (`AB:CD:…`, colons and case optional): only that one is accepted. */
  fingerprint?: string | null;
  /** Else: the pin store; a first connection pins what it sees. */
  pins?: PinStore | null;
  /** How a changed certificate's message names the engine for `smol engine trust` (its name, else host:port). */
  trustName?: string;
}

/** `AB:CD:…` in upper case, from any spelling of the 64 hex digits (with or without colons, `sha256:` before). */
export function normalFingerprint(text: string): string {
  const hex = text
    .replace(/^sha256:/i, '')
    .replace(/:/g, '')
    .toUpperCase();
  if (!/^[0-9A-F]{64}$/.test(hex)) throw new Error(`${text} is not a SHA-256 fingerprint (64 hex digits)`);
  return hex.match(/../g)!.join(':');
}

/** A certificate that is not the pinned one; `code` ECERTCHANGED. */
export class CertificateChangedError extends Error {
  readonly code = 'ECERTCHANGED';
  constructor(
    readonly where: string,
    readonly presented: string,
    readonly pinned: string,
    message: string,
  ) {
    super(message);
    this.name = 'CertificateChangedError';
  }
}

function checkPin(where: string, presented: string, options: PinOptions): void {
  const refuse = (pinned: string, whose: string) => {
    const trust = options.trustName ?? where;
    throw new CertificateChangedError(
      where,
      presented,
      pinned,
      `the engine at ${where} presented a certificate with SHA-256 fingerprint ${presented}, but ${whose} ` +
        `${pinned}: refused (someone may be in between). If its certificate was replaced on purpose, compare ` +
        `the new fingerprint with the one smol serve printed on the engine's host, then trust it: ` +
        `smol engine trust ${trust}`,
    );
  };
  if (options.fingerprint) {
    const wanted = normalFingerprint(options.fingerprint);
    if (wanted !== presented) refuse(wanted, 'the fingerprint given is');
    return;
  }
  if (!options.pins) {
    throw new Error(`the engine at ${where} uses TLS: give its certificate's fingerprint, or a pin store to trust it`);
  }
  const pinned = options.pins.get(where);
  if (!pinned) return options.pins.set(where, presented); // trust on first use
  if (pinned.fingerprint !== presented) refuse(pinned.fingerprint, `since ${pinned.since} it is pinned to`);
}

/** An HTTPS agent that accepts only the pinned certificate (and any other at first use, which it pins). */
export class PinnedAgent extends https.Agent {
  constructor(
    readonly pin: PinOptions,
    options: https.AgentOptions = {},
  ) {
    super(options);
  }

  override createConnection(
    options: https.RequestOptions,
    callback?: (err: Error | null, stream: Duplex) => void,
  ): Duplex | null | undefined {
    const host = options.host ?? options.hostname ?? 'localhost';
    const where = `${host.includes(':') ? `[${host}]` : host}:${options.port}`;
    // The CA check is off because the pin is the check: nothing is sent until it passed.
    const socket = tls.connect({ ...(options as tls.ConnectionOptions), rejectUnauthorized: false });
    let settled = false;
    const settle = (error: Error | null) => {
      if (settled) return;
      settled = true;
      if (error) socket.destroy();
      callback?.(error, socket);
    };
    socket.once('secureConnect', () => {
      try {
        const presented = socket.getPeerCertificate().fingerprint256;
        if (!presented) throw new Error(`the engine at ${where} presented no certificate`);
        checkPin(where, presented, this.pin);
        settle(null);
      } catch (error) {
        settle(error as Error);
      }
    });
    socket.once('error', (error) => settle(error));
    return undefined;
  }
}
