// Names of OCI images (docs/images.md, "OCI images"): registry references as docker reads them (`python:3.12-slim`
// is Docker Hub's library/python, `host:port/org/app:tag`, `name@sha256:…`) and local images named as
// containers-transports(5) names them (`oci:DIR[:TAG]`, `oci-archive:FILE[:TAG]`, `docker-archive:FILE`).
import path from 'node:path';

export type OciReference =
  | {
      transport: 'registry';
      /** The registry as named (`docker.io`, `127.0.0.1:5000`); `apiHost` is where its API is. */
      registry: string;
      apiHost: string;
      repository: string;
      /** The tag; null when only a digest was given. */
      tag: string | null;
      digest: string | null;
      /** `docker.io/library/python:3.12-slim`, `host:5000/app@sha256:…`: one spelling per image. */
      canonical: string;
    }
  | { transport: 'oci' | 'oci-archive'; path: string; tag: string | null; canonical: string }
  | { transport: 'docker-archive'; path: string; canonical: string };

export const DOCKER_HUB = 'docker.io';
const DOCKER_HUB_API = 'registry-1.docker.io';
const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;
const HOST =
  /^(?:localhost|\[[0-9a-fA-F:]+\]|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)(?::\d{1,5})?$/;

export class ReferenceError extends Error {
  constructor(reference: string, why: string) {
    super(`${JSON.stringify(reference)} is not an image reference: ${why}`);
    this.name = 'ImageReferenceError';
  }
}

/** Whether `registry` (host[:port]) is this machine: its API is then spoken over plain http, as docker does. */
export function isLoopbackRegistry(registry: string): boolean {
  const host = registry.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Parses an image reference. Local paths are resolved from `baseDir` (the Smolfile's directory, or the current one
 * on the command line). Throws a ReferenceError saying what is wrong.
 */
export function parseReference(text: string, baseDir = process.cwd()): OciReference {
  const local = /^(oci|oci-archive|docker-archive):(.*)$/s.exec(text);
  if (local) return parseLocal(text, local[1] as 'oci' | 'oci-archive' | 'docker-archive', local[2]!, baseDir);
  return parseRegistry(text, text.startsWith('docker://') ? text.slice('docker://'.length) : text);
}

function parseLocal(
  text: string,
  transport: 'oci' | 'oci-archive' | 'docker-archive',
  rest: string,
  baseDir: string,
): OciReference {
  if (rest === '') throw new ReferenceError(text, `${transport}: needs a path (${transport}:PATH)`);
  if (transport === 'docker-archive') {
    const file = path.resolve(baseDir, rest);
    return { transport, path: file, canonical: `docker-archive:${file}` };
  }
  // oci:PATH[:TAG]: the tag is what follows the last colon when that is a tag (a path may hold colons too).
  const colon = rest.lastIndexOf(':');
  const maybeTag = colon > 0 ? rest.slice(colon + 1) : '';
  const hasTag = colon > 0 && TAG.test(maybeTag);
  const given = hasTag ? rest.slice(0, colon) : rest;
  const dir = path.resolve(baseDir, given);
  const tag = hasTag ? maybeTag : null;
  return { transport, path: dir, tag, canonical: `${transport}:${dir}${tag ? `:${tag}` : ''}` };
}

function parseRegistry(text: string, name: string): OciReference {
  if (name === '') throw new ReferenceError(text, 'it is empty');
  if (/\s/.test(name)) throw new ReferenceError(text, 'it has white space');
  let rest = name;
  let digest: string | null = null;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) throw new ReferenceError(text, `the digest ${digest} is not sha256:<64 hex digits>`);
  }
  const parts = rest.split('/');
  let registry = DOCKER_HUB;
  const first = parts[0]!;
  if (parts.length > 1 && (first.includes('.') || first.includes(':') || first === 'localhost')) {
    if (!HOST.test(first)) throw new ReferenceError(text, `${first} is not a registry host[:port]`);
    registry = first === 'index.docker.io' ? DOCKER_HUB : first;
    parts.shift();
  }
  let tag: string | null = null;
  const last = parts[parts.length - 1]!;
  const colon = last.indexOf(':');
  if (colon >= 0) {
    tag = last.slice(colon + 1);
    parts[parts.length - 1] = last.slice(0, colon);
    if (!TAG.test(tag))
      throw new ReferenceError(
        text,
        `the tag ${JSON.stringify(tag)} is not a tag (letters, digits, _ . -; at most 128)`,
      );
  }
  if (registry === DOCKER_HUB && parts.length === 1) parts.unshift('library');
  for (const part of parts) {
    if (!COMPONENT.test(part)) {
      const why =
        part === ''
          ? 'it has an empty path component'
          : `${JSON.stringify(part)} is not a repository name component (lower-case letters, digits and separators . _ -)`;
      throw new ReferenceError(text, why);
    }
  }
  if (tag === null && digest === null) tag = 'latest';
  const repository = parts.join('/');
  const apiHost = registry === DOCKER_HUB ? DOCKER_HUB_API : registry;
  const canonical = `${registry}/${repository}${tag ? `:${tag}` : ''}${digest ? `@${digest}` : ''}`;
  return { transport: 'registry', registry, apiHost, repository, tag, digest, canonical };
}

/** The reference without Docker Hub's `docker.io/library/`: as a user would type it (for messages and lists). */
export function shortName(reference: OciReference): string {
  if (reference.transport !== 'registry') return reference.canonical;
  return reference.canonical.replace(/^docker\.io\/(library\/)?/, '');
}
