// A client of the OCI distribution API (docs/images.md, "Pulling"): manifests and blobs of one repository, with
// docker's token authentication (a 401's WWW-Authenticate challenge names the token service; the credentials come
// from ~/.docker/config.json), plain http only for a registry on this machine, and every blob's digest checked while
// it streams into the cache.
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync, fsyncSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { DOCKER_HUB, isLoopbackRegistry, type OciReference } from './oci-reference.js';

export const MEDIA = {
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
} as const;
const ACCEPT = [MEDIA.ociIndex, MEDIA.ociManifest, MEDIA.dockerList, MEDIA.dockerManifest].join(', ');

type RegistryReference = Extract<OciReference, { transport: 'registry' }>;

/** The registry refused the request for a reason the user must act on: names the reference or registry. */
export class RegistryError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'RegistryError';
  }
}

export interface Credentials {
  username: string;
  password: string;
}

/** `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`. */
export function dockerConfigFile(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(env.DOCKER_CONFIG ?? path.join(os.homedir(), '.docker'), 'config.json');
}

/** The login docker keeps for `registry` in its config file's `auths` (base64 `user:password`), or null. */
export function readCredentials(registry: string, file = dockerConfigFile()): Credentials | null {
  let config: { auths?: Record<string, { auth?: string; username?: string; password?: string }> };
  try {
    config = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new Error(`${file}: cannot read docker's credentials: ${(err as Error).message}`);
  }
  const keys =
    registry === DOCKER_HUB
      ? ['https://index.docker.io/v1/', 'index.docker.io', 'docker.io', 'https://docker.io', 'registry-1.docker.io']
      : [registry, `https://${registry}`, `http://${registry}`, `https://${registry}/v1/`, `https://${registry}/v2/`];
  for (const key of keys) {
    const entry = config.auths?.[key];
    if (!entry) continue;
    if (entry.username && entry.password) return { username: entry.username, password: entry.password };
    if (!entry.auth) continue;
    const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw new Error(`${file}: the auth of ${key} is not base64 of user:password`);
    return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
  }
  return null;
}

/** The parameters of a `WWW-Authenticate: Bearer realm="…",service="…",scope="…"` challenge. */
export function parseChallenge(header: string): { scheme: string; params: Record<string, string> } {
  const space = header.indexOf(' ');
  const scheme = (space < 0 ? header : header.slice(0, space)).toLowerCase();
  const params: Record<string, string> = {};
  const pattern = /([A-Za-z_]+)=(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))/g;
  for (const match of header.slice(space + 1).matchAll(pattern)) {
    params[match[1]!.toLowerCase()] = (match[2] ?? match[3] ?? '').replace(/\\(.)/g, '$1');
  }
  return { scheme, params };
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os?: string; architecture?: string; variant?: string };
  annotations?: Record<string, string>;
  urls?: string[];
}

export interface Manifest {
  mediaType?: string;
  config: Descriptor;
  layers: Descriptor[];
}

export const sha256 = (bytes: Buffer) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/** An index's (or docker manifest list's) linux/amd64 image; throws naming the platforms it has. */
export function pickPlatform(index: { manifests?: Descriptor[] }, what: string): Descriptor {
  const manifests = index.manifests ?? [];
  const found = manifests.find((m) => m.platform?.os === 'linux' && m.platform.architecture === 'amd64');
  if (found) return found;
  const have = manifests
    .map((m) => (m.platform ? `${m.platform.os}/${m.platform.architecture}` : 'no platform'))
    .filter((p) => p !== 'unknown/unknown');
  throw new Error(`${what} has no linux/amd64 image (it has ${have.join(', ') || 'none'}); VMs here are x86-64`);
}

export interface BlobProgress {
  received: number;
  total: number;
}

export class RegistryClient {
  private token: string | null = null;
  private basic: string | null = null;
  private readonly base: string;

  constructor(
    readonly reference: RegistryReference,
    private readonly options: { credentialsFile?: string; signal?: AbortSignal } = {},
  ) {
    const scheme = isLoopbackRegistry(reference.registry) ? 'http' : 'https';
    this.base = `${scheme}://${reference.apiHost}/v2/${reference.repository}`;
  }

  /** The image's manifest (an index resolved to linux/amd64) and its digest. */
  async manifest(): Promise<{ digest: string; manifest: Manifest }> {
    const { reference } = this;
    const first = await this.fetchManifest(reference.digest ?? reference.tag!);
    let { bytes, digest } = first;
    let parsed = JSON.parse(bytes.toString('utf8')) as Manifest & { manifests?: Descriptor[]; mediaType?: string };
    const type = parsed.mediaType ?? first.mediaType;
    if (type === MEDIA.ociIndex || type === MEDIA.dockerList || Array.isArray(parsed.manifests)) {
      const chosen = pickPlatform(parsed, reference.canonical);
      ({ bytes, digest } = await this.fetchManifest(chosen.digest));
      parsed = JSON.parse(bytes.toString('utf8'));
    }
    if (!parsed.config || !Array.isArray(parsed.layers)) {
      throw new RegistryError(`${reference.canonical}: the registry sent a manifest of type ${type}, not an image`);
    }
    return { digest, manifest: parsed };
  }

  private async fetchManifest(ref: string): Promise<{ bytes: Buffer; digest: string; mediaType: string }> {
    const response = await this.request(`${this.base}/manifests/${ref}`, { accept: ACCEPT });
    const bytes = Buffer.from(await response.arrayBuffer());
    const digest = sha256(bytes);
    if (ref.startsWith('sha256:') && digest !== ref) {
      throw new RegistryError(
        `${this.reference.canonical}: the manifest ${ref} the registry sent hashes to ${digest} (digest mismatch)`,
      );
    }
    return { bytes, digest, mediaType: (response.headers.get('content-type') ?? '').split(';')[0]!.trim() };
  }

  /**
   * Streams blob `descriptor` into `file` (through a temporary file renamed into place), checking its size and
   * digest as it comes; nothing is left at `file` unless it is the blob.
   */
  async downloadBlob(descriptor: Descriptor, file: string, onProgress?: (p: BlobProgress) => void): Promise<void> {
    const response = await this.request(`${this.base}/blobs/${descriptor.digest}`, {});
    if (!response.body) throw new RegistryError(`blob ${descriptor.digest}: the registry sent no body`);
    await writeVerified(Readable.fromWeb(response.body as never), descriptor, file, onProgress, this.options.signal);
  }

  /** GET `url`, answering an authentication challenge once. */
  private async request(url: string, { accept }: { accept?: string }): Promise<Response> {
    const headers = (): Record<string, string> => ({
      ...(accept ? { accept } : {}),
      ...(this.token ? { authorization: `Bearer ${this.token}` } : this.basic ? { authorization: this.basic } : {}),
    });
    let response = await this.get(url, headers());
    if (response.status === 401 && !this.token && !this.basic) {
      await this.authenticate(response.headers.get('www-authenticate') ?? '');
      await response.body?.cancel();
      response = await this.get(url, headers());
    }
    if (response.ok) return response;
    return this.fail(response, url);
  }

  private async get(url: string, headers: Record<string, string>): Promise<Response> {
    try {
      return await fetch(url, {
        headers,
        redirect: 'follow',
        ...(this.options.signal && { signal: this.options.signal }),
      });
    } catch (err) {
      if (this.options.signal?.aborted) throw err;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const why = cause?.code ?? cause?.message ?? (err as Error).message;
      throw new RegistryError(`cannot reach the registry ${this.reference.registry} (${new URL(url).origin}): ${why}`);
    }
  }

  private credentials(): Credentials | null {
    return readCredentials(this.reference.registry, this.options.credentialsFile);
  }

  private async authenticate(challenge: string): Promise<void> {
    const { registry } = this.reference;
    const { scheme, params } = parseChallenge(challenge);
    const login = this.credentials();
    const basic = login ? `Basic ${Buffer.from(`${login.username}:${login.password}`).toString('base64')}` : null;
    if (scheme === 'basic') {
      if (!basic) throw new RegistryError(`the registry ${registry} needs a login (docker login ${registry})`, 401);
      this.basic = basic;
      return;
    }
    if (scheme !== 'bearer' || !params.realm) {
      throw new RegistryError(
        `the registry ${registry} asked for an authentication this client does not speak: ${challenge}`,
        401,
      );
    }
    const tokenUrl = new URL(params.realm);
    if (params.service) tokenUrl.searchParams.set('service', params.service);
    tokenUrl.searchParams.set('scope', params.scope ?? `repository:${this.reference.repository}:pull`);
    if (tokenUrl.protocol !== 'https:' && !isLoopbackRegistry(tokenUrl.host)) {
      throw new RegistryError(`the registry ${registry} sends its logins to ${tokenUrl.origin}, which is not https`);
    }
    const response = await this.get(tokenUrl.href, basic ? { authorization: basic } : {});
    if (response.status === 401 || response.status === 403) {
      const who = login
        ? `the login of ${login.username} (from ${this.options.credentialsFile ?? dockerConfigFile()})`
        : 'an anonymous login';
      throw new RegistryError(
        `the registry ${registry} refused ${who}: ${response.status} ${await errorText(response)}`,
        401,
      );
    }
    if (!response.ok) {
      throw new RegistryError(
        `the registry ${registry}'s token service ${tokenUrl.origin} answered ${response.status}`,
      );
    }
    const body = (await response.json()) as { token?: string; access_token?: string };
    this.token = body.token ?? body.access_token ?? null;
    if (!this.token) throw new RegistryError(`the registry ${registry}'s token service sent no token`);
  }

  private async fail(response: Response, url: string): Promise<never> {
    const { canonical, registry } = this.reference;
    const text = await errorText(response);
    const what = url.includes('/blobs/') ? `blob ${url.slice(url.lastIndexOf('/') + 1)} of ${canonical}` : canonical;
    if (response.status === 404) {
      throw new RegistryError(`${what}: not found in the registry ${registry} (no such image or tag): ${text}`, 404);
    }
    if (response.status === 401 || response.status === 403) {
      const login = this.credentials() ? 'its login was refused' : `it may need a login (docker login ${registry})`;
      throw new RegistryError(
        `${what}: pull access denied by the registry ${registry}: the repository does not exist or ${login}: ${text}`,
        response.status,
      );
    }
    throw new RegistryError(`${what}: the registry ${registry} answered ${response.status}: ${text}`, response.status);
  }
}

/** A registry's error body, shortened: `{"errors":[{"code","message"}]}` as the distribution spec has it. */
async function errorText(response: Response): Promise<string> {
  const text = await response.text().catch(() => '');
  try {
    const errors = (JSON.parse(text) as { errors?: { code?: string; message?: string }[] }).errors;
    if (errors?.length) return errors.map((e) => `${e.code ?? ''} ${e.message ?? ''}`.trim()).join('; ');
  } catch {
    // not JSON
  }
  return text.trim().slice(0, 200) || response.statusText;
}

/**
 * Writes `stream` to `file` through `<file>.partial-<random>`, hashing as it goes; renames it into place only when
 * its size and sha256 are the descriptor's. A mismatch names the blob.
 */
export async function writeVerified(
  stream: Readable,
  descriptor: Descriptor,
  file: string,
  onProgress?: (p: BlobProgress) => void,
  signal?: AbortSignal,
): Promise<void> {
  if (!/^sha256:[0-9a-f]{64}$/.test(descriptor.digest)) {
    throw new Error(`blob ${descriptor.digest}: only sha256 digests are supported`);
  }
  mkdirSync(path.dirname(file), { recursive: true });
  const temporary = `${file}.partial-${randomBytes(6).toString('hex')}`;
  const hash = createHash('sha256');
  const fd = openSync(temporary, 'wx', 0o644);
  let received = 0;
  let ok = false;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      if (signal?.aborted) throw signal.reason ?? new Error('aborted');
      hash.update(chunk);
      let done = 0;
      while (done < chunk.length) done += writeSync(fd, chunk, done, chunk.length - done);
      received += chunk.length;
      if (received > descriptor.size) {
        throw new Error(
          `blob ${descriptor.digest}: more than the ${descriptor.size} bytes its descriptor says (digest mismatch)`,
        );
      }
      onProgress?.({ received, total: descriptor.size });
    }
    if (received !== descriptor.size) {
      throw new Error(
        `blob ${descriptor.digest}: ${received} bytes came of the ${descriptor.size} its descriptor says (truncated)`,
      );
    }
    const digest = `sha256:${hash.digest('hex')}`;
    if (digest !== descriptor.digest) {
      throw new Error(`blob ${descriptor.digest}: its content hashes to ${digest} (digest mismatch); it was not kept`);
    }
    fsyncSync(fd);
    ok = true;
  } finally {
    closeSync(fd);
    if (!ok) rmSync(temporary, { force: true });
  }
  renameSync(temporary, file);
}
