// The certificate of `smol serve --tls` (docs/remote.md, "TLS"): the one given (--cert FILE --key FILE), checked to
// be a PEM certificate whose key is the given one, or the data dir's own self-signed one, made on first use in
// SMOL_HOME/tls/ (key mode 0600) and kept, so its fingerprint, which clients pin on first use, stays the same across
// engines. Node's crypto reads X.509 but cannot write it: the certificate is made by Debian's `openssl` command.
import { execFile } from 'node:child_process';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { takeLock } from './pid-lock.js';

export interface TlsCertificate {
  cert: string;
  key: string;
  /** SHA-256 of the DER certificate, as `AB:CD:…` (what browsers and `openssl x509 -fingerprint -sha256` show). */
  fingerprint: string;
  certFile: string;
}

export const TLS_DIR = 'tls';

/** Reads and checks a certificate and its key; a failure names the file and what is wrong with it. */
export function loadCertificate(certFile: string, keyFile: string): TlsCertificate {
  const read = (file: string, what: string) => {
    try {
      return readFileSync(file, 'utf8');
    } catch (error) {
      throw new Error(`${what} ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
  };
  const cert = read(certFile, 'certificate');
  const key = read(keyFile, 'key');
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch (error) {
    throw new Error(`certificate ${certFile} is not a PEM X.509 certificate (${(error as Error).message})`);
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch (error) {
    throw new Error(`key ${keyFile} is not a PEM private key (${(error as Error).message})`);
  }
  if (!x509.checkPrivateKey(privateKey)) throw new Error(`key ${keyFile} is not the key of certificate ${certFile}`);
  return { cert, key, fingerprint: x509.fingerprint256, certFile };
}

/** The subject names of a self-signed certificate: this machine's loopback, and the address it is made for. */
function subjectAltNames(host: string): string {
  const names = new Set(['DNS:localhost', 'IP:127.0.0.1', 'IP:::1']);
  const bare = host.replace(/^\[|\]$/g, '');
  if (isIP(bare) && bare !== '0.0.0.0' && bare !== '::') names.add(`IP:${bare}`);
  else if (!isIP(bare)) names.add(`DNS:${bare}`);
  return [...names].join(',');
}

/**
 * The data dir's self-signed certificate (SMOL_HOME/tls/cert.pem, key.pem), made when there is none: an EC P-256
 * key, valid ten years. Clients trust it by its fingerprint, not by a CA, so its names matter only to browsers.
 */
export async function dataDirCertificate(home: string, host: string): Promise<TlsCertificate & { made: boolean }> {
  const dir = path.join(home, TLS_DIR);
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  const existing = () => {
    try {
      return { ...loadCertificate(certFile, keyFile), made: false };
    } catch (error) {
      if (!/: ENOENT$/.test((error as Error).message)) throw error;
      return null;
    }
  };
  const found = existing();
  if (found) return found;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Two first `smol serve --tls` at once: one makes the certificate, the other waits and then uses it (without
  // the lock both made one, and their renames could even pair one's key with the other's certificate).
  const lock = path.join(dir, 'make.lock');
  const deadline = Date.now() + MAKE_WAIT_MS;
  for (;;) {
    const taken = takeLock(lock);
    if (taken.ok) {
      try {
        return existing() ?? (await makeCertificate(dir, host, certFile, keyFile));
      } finally {
        taken.release();
      }
    }
    if (Date.now() > deadline) {
      throw new Error(`${certFile} is being made by process ${taken.holder} (${lock}); try again, or remove ${lock}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Longer than openssl may take (its own timeout below). */
const MAKE_WAIT_MS = 40_000;

async function makeCertificate(
  dir: string,
  host: string,
  certFile: string,
  keyFile: string,
): Promise<TlsCertificate & { made: boolean }> {
  // Made in a 0700 directory of its own and renamed into place: never a moment with a readable key, never half.
  const tmp = mkdtempSync(path.join(dir, '.new-'));
  try {
    const args = ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    args.push('-days', '3650', '-subj', '/O=Smol Studio/CN=smol engine');
    args.push('-addext', `subjectAltName=${subjectAltNames(host)}`);
    args.push('-keyout', path.join(tmp, 'key.pem'), '-out', path.join(tmp, 'cert.pem'));
    try {
      await promisify(execFile)('openssl', args, { timeout: 30_000 });
    } catch (error) {
      const why = (error as { stderr?: string }).stderr?.trim() || (error as Error).message;
      throw new Error(`cannot make a self-signed certificate with openssl (apt-get install openssl): ${why}`);
    }
    chmodSync(path.join(tmp, 'key.pem'), 0o600);
    renameSync(path.join(tmp, 'key.pem'), keyFile);
    renameSync(path.join(tmp, 'cert.pem'), certFile);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return { ...loadCertificate(certFile, keyFile), made: true };
}

/** Whether `host` is this machine's loopback only (a listener there is not reachable from the network). */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  return bare === 'localhost' || bare === '::1' || (isIP(bare) === 4 && bare.startsWith('127.'));
}
