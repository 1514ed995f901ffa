// Images the OCI tests make themselves: layers written with tar-stream from the host's static busybox, an OCI image
// layout of them (`oci:DIR:TAG`), a tar of that layout (`oci-archive:`) and a `docker save`-style archive.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { pack, type Header } from 'tar-stream';

export interface FixtureEntry {
  header: Partial<Header> & { name: string };
  data?: Buffer | string;
}

/** A tar of `entries`, in order. */
export async function tarOf(entries: FixtureEntry[]): Promise<Buffer> {
  const archive = pack();
  const chunks: Buffer[] = [];
  const done = new Promise<void>((resolve, reject) => {
    archive.on('data', (chunk: unknown) => chunks.push(chunk as Buffer));
    archive.on('end', () => resolve());
    archive.on('error', reject);
  });
  for (const { header, data } of entries) {
    const bytes = data === undefined ? undefined : Buffer.from(data);
    await new Promise<void>((resolve, reject) => {
      const cb = (err?: Error | null) => (err ? reject(err) : resolve());
      if (bytes) archive.entry({ ...header, size: bytes.length }, bytes, cb);
      else archive.entry(header, cb);
    });
  }
  archive.finalize();
  await done;
  return Buffer.concat(chunks);
}

const digestOf = (bytes: Buffer) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
const mtime = new Date('2026-01-02T03:04:05Z');

/** What the test image holds: busybox, a symlink, a hard link, owners, modes, an xattr; layer 2 whites out a file. */
export async function busyboxLayers(): Promise<Buffer[]> {
  const busybox = readFileSync('/bin/busybox');
  const dir = (name: string, mode = 0o755): FixtureEntry => ({ header: { name, type: 'directory', mode, mtime } });
  const layer1 = await tarOf([
    dir('bin/'),
    { header: { name: 'bin/busybox', mode: 0o755, mtime }, data: busybox },
    { header: { name: 'bin/sh', type: 'symlink', linkname: 'busybox', mtime } },
    { header: { name: 'bin/cat', type: 'link', linkname: 'bin/busybox', mtime } },
    dir('etc/'),
    {
      header: {
        name: 'etc/greeting',
        mode: 0o640,
        uid: 1000,
        gid: 1001,
        mtime,
        pax: { 'SCHILY.xattr.user.smol': 'kept' },
      },
      data: 'hello from the image\n',
    },
    { header: { name: 'etc/doomed', mode: 0o644, mtime }, data: 'this file is deleted by layer 2\n' },
    dir('gone/'),
    { header: { name: 'gone/a', mode: 0o644, mtime }, data: 'a\n' },
    { header: { name: 'usr/bin/setuid-tool', mode: 0o4755, mtime }, data: '#!/bin/sh\n' },
    dir('app/', 0o750),
  ]);
  const layer2 = await tarOf([
    { header: { name: 'etc/.wh.doomed', mode: 0o644, mtime }, data: '' },
    dir('gone/'),
    { header: { name: 'gone/.wh..wh..opq', mode: 0o644, mtime }, data: '' },
    { header: { name: 'gone/b', mode: 0o644, mtime }, data: 'b\n' },
    { header: { name: 'app/data.txt', mode: 0o600, uid: 33, gid: 33, mtime }, data: 'data in the workdir\n' },
  ]);
  return [layer1, layer2];
}

export const FIXTURE_CONFIG = {
  architecture: 'amd64',
  os: 'linux',
  config: {
    Env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'GREETING=from-the-image-env'],
    WorkingDir: '/app',
    Cmd: ['/bin/sh', '-c', 'echo "cmd ran in $(pwd) with $GREETING"; cat /etc/greeting'],
  },
};

export interface Layout {
  dir: string;
  manifestDigest: string;
  layerDigests: string[];
}

/** Writes an OCI image layout of gzip'd `layers` at `dir`, its manifest tagged `tag`. */
/** How writeLayout stores each layer: gzip by default, or bytes of the caller's with their media type. */
export interface LayerCompression {
  mediaType: string;
  compress: (tar: Buffer) => Buffer;
}

const GZIP: LayerCompression = { mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', compress: gzipSync };

export function writeLayout(
  dir: string,
  layers: Buffer[],
  tag = 'v1',
  config: object = FIXTURE_CONFIG,
  compression: LayerCompression = GZIP,
): Layout {
  const blobs = path.join(dir, 'blobs', 'sha256');
  mkdirSync(blobs, { recursive: true });
  const put = (bytes: Buffer) => {
    const digest = digestOf(bytes);
    writeFileSync(path.join(blobs, digest.slice(7)), bytes);
    return { digest, size: bytes.length };
  };
  const gz = layers.map((layer) => compression.compress(layer));
  const diffIds = layers.map(digestOf);
  const configBlob = put(Buffer.from(JSON.stringify({ ...config, rootfs: { type: 'layers', diff_ids: diffIds } })));
  const layerDescs = gz.map((bytes) => ({ mediaType: compression.mediaType, ...put(bytes) }));
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...configBlob },
      layers: layerDescs,
    }),
  );
  const manifestBlob = put(manifest);
  writeFileSync(path.join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    path.join(dir, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          ...manifestBlob,
          annotations: { 'org.opencontainers.image.ref.name': tag },
        },
      ],
    }),
  );
  return { dir, manifestDigest: manifestBlob.digest, layerDigests: layerDescs.map((l) => l.digest) };
}

/** A `docker save`-style archive (manifest.json, the config, one plain tar per layer) of `layers` at `file`. */
export async function writeDockerArchive(
  file: string,
  layers: Buffer[],
  config: object = FIXTURE_CONFIG,
): Promise<void> {
  const configBytes = Buffer.from(JSON.stringify(config));
  const configName = `${digestOf(configBytes).slice(7)}.json`;
  const layerNames = layers.map((layer) => `${digestOf(layer).slice(7)}/layer.tar`);
  const entries: FixtureEntry[] = [
    { header: { name: configName }, data: configBytes },
    ...layers.map((layer, i) => ({ header: { name: layerNames[i]! }, data: layer })),
    {
      header: { name: 'manifest.json' },
      data: JSON.stringify([{ Config: configName, RepoTags: ['smol/test:v1'], Layers: layerNames }]),
    },
  ];
  writeFileSync(file, await tarOf(entries));
}

/** A tar of the layout at `dir` (an oci-archive). */
export async function writeOciArchive(file: string, layout: string): Promise<void> {
  const entries: FixtureEntry[] = [];
  const walk = (rel: string) => {
    for (const name of readdirSync(path.join(layout, rel)).sort()) {
      const child = rel ? `${rel}/${name}` : name;
      if (statSync(path.join(layout, child)).isDirectory()) {
        entries.push({ header: { name: `${child}/`, type: 'directory', mode: 0o755 } });
        walk(child);
      } else entries.push({ header: { name: child, mode: 0o644 }, data: readFileSync(path.join(layout, child)) });
    }
  };
  walk('');
  writeFileSync(file, await tarOf(entries));
}

/** debugfs's answer to one request on an ext4 image (read-only; never mounts it). */
export function debugfs(image: string, request: string): string {
  const result = spawnSync('/sbin/debugfs', ['-R', request, image], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`debugfs -R '${request}' ${image}: ${result.stderr}`);
  return result.stdout;
}

/**
 * Adds to the layout at `dir` a multi-arch image index tagged `tag`: linux/arm64 (a manifest of its own, the same
 * layers) and linux/amd64 (the layout's manifest).
 */
export function addIndex(layout: Layout, tag: string): string {
  const blobs = path.join(layout.dir, 'blobs', 'sha256');
  const read = (digest: string) => readFileSync(path.join(blobs, digest.slice(7)));
  const put = (bytes: Buffer) => {
    const digest = digestOf(bytes);
    writeFileSync(path.join(blobs, digest.slice(7)), bytes);
    return { digest, size: bytes.length };
  };
  const amd64 = JSON.parse(read(layout.manifestDigest).toString()) as { config: { digest: string } };
  const armConfig = { ...JSON.parse(read(amd64.config.digest).toString()), architecture: 'arm64' };
  const armConfigBlob = put(Buffer.from(JSON.stringify(armConfig)));
  const armManifest = put(
    Buffer.from(
      JSON.stringify({ ...amd64, config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...armConfigBlob } }),
    ),
  );
  const manifestType = 'application/vnd.oci.image.manifest.v1+json';
  const index = put(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.index.v1+json',
        manifests: [
          { mediaType: manifestType, ...armManifest, platform: { os: 'linux', architecture: 'arm64' } },
          {
            mediaType: manifestType,
            digest: layout.manifestDigest,
            size: read(layout.manifestDigest).length,
            platform: { os: 'linux', architecture: 'amd64' },
          },
        ],
      }),
    ),
  );
  const indexFile = path.join(layout.dir, 'index.json');
  const top = JSON.parse(readFileSync(indexFile, 'utf8')) as { manifests: object[] };
  top.manifests.push({
    mediaType: 'application/vnd.oci.image.index.v1+json',
    ...index,
    annotations: { 'org.opencontainers.image.ref.name': tag },
  });
  writeFileSync(indexFile, JSON.stringify(top));
  return index.digest;
}
