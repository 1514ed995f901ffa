// Pulling from a real registry on loopback (Debian's docker-registry, images pushed with skopeo): the distribution
// API, a multi-arch index, docker's token authentication with credentials from a docker config file, and the errors
// a user meets: an unknown tag, a refused login, a blob that does not match its digest. Conversion needs root.
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureOciImage, type LayerProgress } from '../../src/guest-build/oci-image.js';
import { addIndex, busyboxLayers, debugfs, FIXTURE_CONFIG, writeLayout, type Layout } from './oci-fixtures.js';
import {
  push,
  REGISTRY_BINARY,
  SKOPEO,
  startRegistry,
  startTokenFront,
  type Front,
  type Registry,
} from './registry.js';

const ready = process.getuid?.() === 0 && existsSync(REGISTRY_BINARY) && existsSync(SKOPEO);
let scratch: string;
let registry: Registry;
let front: Front;
let layout: Layout;
let indexDigest: string;
let credentials: string;

beforeAll(async () => {
  if (!ready) return;
  scratch = mkdtempSync(path.join(os.tmpdir(), 'smol-oci-registry-'));
  registry = await startRegistry(path.join(scratch, 'registry'));
  layout = writeLayout(path.join(scratch, 'layout'), await busyboxLayers(), 'v1', {
    ...FIXTURE_CONFIG,
    author: 'registry test',
  });
  indexDigest = addIndex(layout, 'multi');
  push(`oci:${layout.dir}:v1`, registry.host, 'smol/busybox:v1');
  push(`oci:${layout.dir}:multi`, registry.host, 'smol/busybox:multi', true);
  front = await startTokenFront(registry.host, { user: 'smol', password: 'right' });
  credentials = path.join(scratch, 'docker-config.json');
}, 60_000);
afterAll(async () => {
  await front?.stop();
  await registry?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

const login = (password: string) => {
  const auth = Buffer.from(`smol:${password}`).toString('base64');
  writeFileSync(credentials, JSON.stringify({ auths: { [front.host]: { auth } } }));
};
const leftovers = (cache: string) =>
  existsSync(cache)
    ? readdirSync(cache, { recursive: true })
        .map(String)
        .filter((n) => /partial|build-oci|\.ext4$/.test(n))
    : [];

describe.skipIf(!ready)('pulling from a registry on loopback', { timeout: 120_000 }, () => {
  it('pulls over the distribution API, layers downloaded and applied, and finds it again by its digest', async () => {
    const cache = path.join(scratch, 'cache-plain');
    const statuses = new Map<number, Set<string>>();
    const result = await ensureOciImage({
      reference: `${registry.host}/smol/busybox:v1`,
      dir: cache,
      onLayer: (l: LayerProgress) => statuses.set(l.index, (statuses.get(l.index) ?? new Set()).add(l.status)),
    });
    expect(result.digest).toBe(layout.manifestDigest);
    expect([...statuses.get(0)!]).toEqual(['waiting', 'downloading', 'downloaded', 'extracting', 'done']);
    expect(debugfs(result.file, 'cat /etc/greeting')).toBe('hello from the image\n');
    expect(debugfs(result.file, 'ls /etc')).not.toContain('doomed');
    // By digest: the same image, not converted again.
    const pinned = await ensureOciImage({
      reference: `${registry.host}/smol/busybox@${layout.manifestDigest}`,
      dir: cache,
    });
    expect(pinned).toMatchObject({ cached: true, file: result.file });
  });

  it('resolves a multi-arch index to linux/amd64', async () => {
    const cache = path.join(scratch, 'cache-index');
    const result = await ensureOciImage({ reference: `${registry.host}/smol/busybox:multi`, dir: cache });
    expect(result.digest).toBe(layout.manifestDigest);
    expect(result.digest).not.toBe(indexDigest);
  });

  it('an unknown tag or repository names the reference', async () => {
    const cache = path.join(scratch, 'cache-missing');
    await expect(ensureOciImage({ reference: `${registry.host}/smol/busybox:nosuchtag`, dir: cache })).rejects.toThrow(
      `${registry.host}/smol/busybox:nosuchtag: not found in the registry ${registry.host} (no such image or tag)`,
    );
    await expect(ensureOciImage({ reference: `${registry.host}/smol/nosuchimage:v1`, dir: cache })).rejects.toThrow(
      `${registry.host}/smol/nosuchimage:v1: not found in the registry ${registry.host}`,
    );
    expect(leftovers(cache)).toEqual([]);
  });

  it("answers a token challenge with the docker config's login; a refused login names the registry", async () => {
    const reference = `${front.host}/smol/busybox:v1`;
    const cache = path.join(scratch, 'cache-token');
    login('wrong');
    await expect(ensureOciImage({ reference, dir: cache, credentialsFile: credentials })).rejects.toThrow(
      `the registry ${front.host} refused the login of smol (from ${credentials}): 401`,
    );
    rmSync(credentials);
    await expect(ensureOciImage({ reference, dir: cache, credentialsFile: credentials })).rejects.toThrow(
      `the registry ${front.host} refused an anonymous login`,
    );
    expect(leftovers(cache)).toEqual([]);
    login('right');
    const result = await ensureOciImage({ reference, dir: cache, credentialsFile: credentials });
    expect(result.digest).toBe(layout.manifestDigest);
  });

  it('a blob that does not match its digest is named and not kept', async () => {
    const cache = path.join(scratch, 'cache-corrupt');
    login('right');
    front.corrupt = true;
    try {
      await expect(
        ensureOciImage({ reference: `${front.host}/smol/busybox:v1`, dir: cache, credentialsFile: credentials }),
      ).rejects.toThrow(
        /blob sha256:[0-9a-f]{64}: its content hashes to sha256:[0-9a-f]{64} \(digest mismatch\); it was not kept/,
      );
    } finally {
      front.corrupt = false;
    }
    expect(leftovers(cache)).toEqual([]);
    expect(existsSync(path.join(cache, 'blobs/sha256')) ? readdirSync(path.join(cache, 'blobs/sha256')) : []).toEqual(
      [],
    );
  });
});
