// Where an OCI image's manifest, config and layers come from (docs/images.md, "OCI images"): a registry (the
// distribution API) or a local image: an OCI image layout directory (`oci:DIR[:TAG]`), a tar of one
// (`oci-archive:FILE[:TAG]`) or what `docker save` writes (`docker-archive:FILE`). Each gives the image's key (its
// manifest's digest), its config and its layers, and copies a layer into the cache's blob store, digest checked.
import {
  createReadStream,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  closeSync,
  statSync,
} from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { LayerTree } from './oci-layers.js';
import type { OciReference } from './oci-reference.js';
import {
  MEDIA,
  pickPlatform,
  RegistryClient,
  sha256,
  writeVerified,
  type BlobProgress,
  type Descriptor,
  type Manifest,
} from './oci-registry.js';

/** The parts of an image config's `config` that say how its workload runs. */
export interface ImageRunConfig {
  Entrypoint?: string[] | null;
  Cmd?: string[] | null;
  Env?: string[] | null;
  WorkingDir?: string;
  User?: string;
}

export interface ImageSource {
  /** The image's key: its manifest's digest (for a docker-archive, which has no manifest: the digest of one made up of its config's and layers' digests). */
  digest: string;
  configDigest: string;
  config: ImageRunConfig;
  /** Bottom first. */
  layers: Descriptor[];
  /** Copies (downloads) layer `index` into `file` unless it is there, its digest checked; resolves with whether it was there. */
  fetchLayer(layer: Descriptor, file: string, onProgress: (p: BlobProgress) => void): Promise<void>;
}

const LAYER_TYPES =
  /^application\/vnd\.(oci\.image\.layer(\.nondistributable)?\.v1\.tar(\+gzip|\+zstd)?|docker\.image\.rootfs\.(foreign\.)?diff\.tar(\.gzip)?)$/;

function checkLayers(layers: Descriptor[], what: string): Descriptor[] {
  for (const layer of layers) {
    if (!LAYER_TYPES.test(layer.mediaType ?? '')) {
      throw new Error(`${what}: layer ${layer.digest} has media type ${layer.mediaType}, which is not a layer tar`);
    }
  }
  return layers;
}

function parseConfig(bytes: Buffer, what: string): ImageRunConfig {
  let config: { config?: ImageRunConfig; architecture?: string; os?: string };
  try {
    config = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new Error(`${what}: its config is not JSON: ${(err as Error).message}`);
  }
  if (config.os && config.os !== 'linux') throw new Error(`${what}: an image for ${config.os}, not linux`);
  if (config.architecture && config.architecture !== 'amd64') {
    throw new Error(`${what}: an image for ${config.architecture}; VMs here are x86-64 (amd64)`);
  }
  const c = config.config ?? {};
  return {
    Entrypoint: c.Entrypoint ?? null,
    Cmd: c.Cmd ?? null,
    Env: c.Env ?? [],
    ...(c.WorkingDir ? { WorkingDir: c.WorkingDir } : {}),
    ...(c.User ? { User: c.User } : {}),
  };
}

/** Opens the image `reference` names: reads manifests and config (from the network for a registry). */
export async function openImageSource(
  reference: OciReference,
  options: { blobFile: (digest: string) => string; work: () => string; signal?: AbortSignal; credentialsFile?: string },
): Promise<ImageSource> {
  switch (reference.transport) {
    case 'registry':
      return registrySource(reference, options);
    case 'oci':
      return layoutSource(reference.path, reference.tag, reference.canonical, options);
    case 'oci-archive': {
      const dir = await unpackArchive(reference.path, options.work(), reference.canonical);
      return layoutSource(dir, reference.tag, reference.canonical, options);
    }
    case 'docker-archive': {
      const dir = await unpackArchive(reference.path, options.work(), reference.canonical);
      return dockerArchiveSource(dir, reference.canonical, options);
    }
  }
}

async function registrySource(
  reference: Extract<OciReference, { transport: 'registry' }>,
  options: { blobFile: (digest: string) => string; signal?: AbortSignal; credentialsFile?: string },
): Promise<ImageSource> {
  const client = new RegistryClient(reference, options);
  const { digest, manifest } = await client.manifest();
  const configFile = options.blobFile(manifest.config.digest);
  if (!existsSync(configFile)) await client.downloadBlob(manifest.config, configFile);
  return {
    digest,
    configDigest: manifest.config.digest,
    config: parseConfig(readFileSync(configFile), reference.canonical),
    layers: checkLayers(manifest.layers, reference.canonical),
    fetchLayer: (layer, file, onProgress) => client.downloadBlob(layer, file, onProgress),
  };
}

/** A blob of an OCI layout, read and checked against its digest. */
function readLayoutBlob(dir: string, digest: string, what: string): Buffer {
  const file = layoutBlobPath(dir, digest, what);
  const bytes = readFileSync(file);
  if (sha256(bytes) !== digest)
    throw new Error(`${what}: blob ${digest} in ${dir} hashes to ${sha256(bytes)} (digest mismatch)`);
  return bytes;
}

function layoutBlobPath(dir: string, digest: string, what: string): string {
  const match = /^sha256:([0-9a-f]{64})$/.exec(digest);
  if (!match) throw new Error(`${what}: ${digest} is not a sha256 digest`);
  const file = path.join(dir, 'blobs', 'sha256', match[1]!);
  if (!existsSync(file)) throw new Error(`${what}: blob ${digest} is missing from ${dir}/blobs/sha256`);
  return file;
}

function layoutSource(dir: string, tag: string | null, what: string, options: { signal?: AbortSignal }): ImageSource {
  const indexFile = path.join(dir, 'index.json');
  if (!existsSync(indexFile)) {
    throw new Error(
      `${what}: ${dir} is not an OCI image layout (no index.json${existsSync(dir) ? '' : '; no such directory'})`,
    );
  }
  const index = JSON.parse(readFileSync(indexFile, 'utf8')) as { manifests?: Descriptor[] };
  const manifests = index.manifests ?? [];
  const named = (d: Descriptor) => d.annotations?.['org.opencontainers.image.ref.name'];
  let chosen: Descriptor | undefined;
  if (tag !== null) {
    chosen = manifests.find((m) => named(m) === tag);
    if (!chosen) {
      const tags = manifests.map(named).filter(Boolean);
      throw new Error(`${what}: ${dir} has no image tagged ${tag} (its tags: ${tags.join(', ') || 'none'})`);
    }
  } else if (manifests.length === 1) {
    chosen = manifests[0];
  } else {
    const tags = manifests.map(named).filter(Boolean);
    throw new Error(
      `${what}: ${dir} holds ${manifests.length} images; name one with oci:${dir}:TAG (its tags: ${tags.join(', ') || 'none'})`,
    );
  }
  let manifestDigest = chosen!.digest;
  let manifestBytes = readLayoutBlob(dir, manifestDigest, what);
  let parsed = JSON.parse(manifestBytes.toString('utf8')) as Manifest & { manifests?: Descriptor[] };
  if (chosen!.mediaType === MEDIA.ociIndex || chosen!.mediaType === MEDIA.dockerList || parsed.manifests) {
    manifestDigest = pickPlatform(parsed, what).digest;
    manifestBytes = readLayoutBlob(dir, manifestDigest, what);
    parsed = JSON.parse(manifestBytes.toString('utf8'));
  }
  if (!parsed.config || !Array.isArray(parsed.layers))
    throw new Error(`${what}: manifest ${manifestDigest} is not an image manifest`);
  return {
    digest: manifestDigest,
    configDigest: parsed.config.digest,
    config: parseConfig(readLayoutBlob(dir, parsed.config.digest, what), what),
    layers: checkLayers(parsed.layers, what),
    fetchLayer: async (layer, file, onProgress) => {
      const source = layoutBlobPath(dir, layer.digest, what);
      await writeVerified(createReadStream(source), layer, file, onProgress, options.signal);
    },
  };
}

/** Unpacks a tar (an oci-archive or docker-archive) into `work/archive`, with the same care as a layer. */
async function unpackArchive(file: string, work: string, what: string): Promise<string> {
  let stats;
  try {
    stats = statSync(file);
  } catch {
    throw new Error(`${what}: no such file ${file}`);
  }
  if (!stats.isFile()) throw new Error(`${what}: ${file} is not a file`);
  const dir = path.join(work, 'archive');
  mkdirSync(dir);
  const tree = new LayerTree(dir, { owners: false });
  await tree.apply(createReadStream(file), `archive ${file}`);
  return dir;
}

async function fileDigest(file: string): Promise<{ digest: string; size: number }> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), hash);
  return { digest: `sha256:${hash.digest('hex')}`, size: statSync(file).size };
}

function isGzip(file: string): boolean {
  const fd = openSync(file, 'r');
  try {
    const magic = Buffer.alloc(2);
    return readSync(fd, magic, 0, 2, 0) === 2 && magic[0] === 0x1f && magic[1] === 0x8b;
  } finally {
    closeSync(fd);
  }
}

async function dockerArchiveSource(dir: string, what: string, options: { signal?: AbortSignal }): Promise<ImageSource> {
  const manifestFile = path.join(dir, 'manifest.json');
  if (!existsSync(manifestFile)) throw new Error(`${what}: not a docker save archive (no manifest.json in it)`);
  const entries = JSON.parse(readFileSync(manifestFile, 'utf8')) as { Config?: string; Layers?: string[] }[];
  if (!Array.isArray(entries) || entries.length !== 1 || !entries[0]?.Config || !Array.isArray(entries[0].Layers)) {
    throw new Error(`${what}: its manifest.json must describe exactly one image (docker save IMAGE)`);
  }
  const inside = (name: string) => {
    const file = path.resolve(dir, name);
    if (!file.startsWith(`${dir}/`) || !existsSync(file))
      throw new Error(`${what}: ${name}, which manifest.json names, is not in the archive`);
    return file;
  };
  const configFile = inside(entries[0].Config);
  const configBytes = readFileSync(configFile);
  const layerFiles = entries[0].Layers.map(inside);
  const layers: Descriptor[] = [];
  const files = new Map<string, string>();
  for (const file of layerFiles) {
    const { digest, size } = await fileDigest(file);
    const mediaType = isGzip(file)
      ? 'application/vnd.docker.image.rootfs.diff.tar.gzip'
      : 'application/vnd.oci.image.layer.v1.tar';
    layers.push({ mediaType, digest, size });
    files.set(digest, file);
  }
  const configDigest = sha256(configBytes);
  // No manifest: the key is the digest of the config's and layers' digests, which name the image as well.
  const digest = sha256(Buffer.from(JSON.stringify({ config: configDigest, layers: layers.map((l) => l.digest) })));
  return {
    digest,
    configDigest,
    config: parseConfig(configBytes, what),
    layers,
    fetchLayer: (layer, file, onProgress) =>
      writeVerified(createReadStream(files.get(layer.digest)!), layer, file, onProgress, options.signal),
  };
}
