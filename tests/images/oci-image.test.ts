// OCI images made into root disks on this host (docs/images.md, "OCI images"): an OCI layout, an oci-archive and a
// docker-archive the test writes from busybox-static, converted by ensureOciImage; the ext4 is read with debugfs
// (never mounted). Conversion needs root (owners), as it does for users.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureOciImage, listOciImages, locateOciImage, readRefs } from '../../src/guest-build/oci-image.js';
import {
  busyboxLayers,
  debugfs,
  FIXTURE_CONFIG,
  tarOf,
  writeDockerArchive,
  writeLayout,
  writeOciArchive,
  type Layout,
} from './oci-fixtures.js';

const asRoot = process.getuid?.() === 0;
let scratch: string;
let cache: string;
let layout: Layout;

beforeAll(async () => {
  scratch = mkdtempSync(path.join(os.tmpdir(), 'smol-oci-image-'));
  cache = path.join(scratch, 'images');
  const layers = await busyboxLayers();
  layout = writeLayout(path.join(scratch, 'layout'), layers, 'v1');
  await writeOciArchive(path.join(scratch, 'image.oci.tar'), layout.dir);
  await writeDockerArchive(path.join(scratch, 'image.docker.tar'), layers);
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** `debugfs stat`'s owner, group and mode of a path. */
function stat(image: string, file: string) {
  const out = debugfs(image, `stat ${file}`);
  const owner = /User:\s+(\d+)\s+Group:\s+(\d+)/.exec(out);
  const mode = /Mode:\s+(\d+)/.exec(out);
  const type = /Type:\s+(\w+)/.exec(out);
  return { uid: Number(owner?.[1]), gid: Number(owner?.[2]), mode: mode?.[1], type: type?.[1], raw: out };
}

function checkDisk(image: string) {
  expect(debugfs(image, 'cat /etc/greeting')).toBe('hello from the image\n');
  expect(debugfs(image, 'ls -l /etc')).not.toContain('doomed'); // layer 2's whiteout
  const gone = debugfs(image, 'ls /gone');
  expect(gone).toContain('b');
  expect(gone).not.toMatch(/\ba\b/);
  expect(stat(image, '/etc/greeting')).toMatchObject({ uid: 1000, gid: 1001, mode: '0640', type: 'regular' });
  expect(stat(image, '/app/data.txt')).toMatchObject({ uid: 33, gid: 33, mode: '0600' });
  expect(stat(image, '/usr/bin/setuid-tool')).toMatchObject({ mode: '04755' });
  expect(stat(image, '/app')).toMatchObject({ mode: '0750', type: 'directory' });
  expect(stat(image, '/bin/sh').raw).toMatch(/Type: symlink[\s\S]*Fast link dest: "busybox"/);
  const busybox = /Inode: (\d+)/.exec(stat(image, '/bin/busybox').raw)?.[1];
  expect(/Inode: (\d+)/.exec(stat(image, '/bin/cat').raw)?.[1]).toBe(busybox);
  expect(stat(image, '/bin/busybox').raw).toMatch(/Links: 2/);
  expect(debugfs(image, 'ea_get /etc/greeting user.smol')).toContain('kept');
  // Ours: /.smol's static busybox, init and agent, our inittab with the image's shell, the mount points.
  const smol = debugfs(image, 'ls /.smol');
  for (const name of ['init', 'busybox', 'smol-agent', 'run-agent']) expect(smol).toContain(name);
  expect(debugfs(image, 'cat /etc/inittab')).toContain('::respawn:/.smol/busybox cttyhack /bin/sh -l');
  const root = debugfs(image, 'ls /');
  for (const name of ['proc', 'sys', 'dev', 'tmp', 'run']) expect(root).toContain(name);
}

// Conversions run mke2fs and e2fsck: seconds each on a busy machine.
describe.skipIf(!asRoot)('OCI images to root disks (as root)', { timeout: 120_000 }, () => {
  it('converts an OCI layout: layers in order, whiteouts, owners, modes, links, xattrs, our init', async () => {
    const layers: string[] = [];
    const result = await ensureOciImage({
      reference: `oci:${layout.dir}:v1`,
      dir: cache,
      onLayer: (l) => layers.push(`${l.index} ${l.status}`),
    });
    expect(result.cached).toBe(false);
    expect(result.digest).toBe(layout.manifestDigest);
    expect(result.config).toMatchObject({
      WorkingDir: '/app',
      Env: expect.arrayContaining(['GREETING=from-the-image-env']),
    });
    expect(layers).toContain('0 done');
    expect(layers).toContain('1 done');
    checkDisk(result.file);
    // Content-addressed: the blobs by digest, the reference remembered, nothing left of the build.
    for (const digest of layout.layerDigests)
      expect(existsSync(path.join(cache, 'blobs/sha256', digest.slice(7)))).toBe(true);
    expect(locateOciImage(`oci:${layout.dir}:v1`, cache)?.file).toBe(result.file);
    expect(readdirSync(cache).filter((n) => n.startsWith('build-') || n.includes('partial'))).toEqual([]);
    const again = await ensureOciImage({ reference: `oci:${layout.dir}:v1`, dir: cache });
    expect(again).toMatchObject({ cached: true, file: result.file });
  });

  it('an oci-archive and a docker-archive of the same layers give the same files', async () => {
    const archived = await ensureOciImage({
      reference: `oci-archive:${path.join(scratch, 'image.oci.tar')}:v1`,
      dir: cache,
    });
    expect(archived.digest).toBe(layout.manifestDigest); // the same manifest: the same image
    const docker = await ensureOciImage({
      reference: `docker-archive:${path.join(scratch, 'image.docker.tar')}`,
      dir: cache,
    });
    expect(docker.cached).toBe(false);
    checkDisk(docker.file);
    expect(docker.config.Cmd?.[0]).toBe('/bin/sh');
    const listed = listOciImages(cache)
      .map((image) => image.references)
      .flat();
    expect(listed).toEqual(
      expect.arrayContaining([`oci:${layout.dir}:v1`, `docker-archive:${path.join(scratch, 'image.docker.tar')}`]),
    );
  });

  it('a missing tag, a missing blob and a blob that does not match its digest are named, and nothing is left', async () => {
    await expect(ensureOciImage({ reference: `oci:${layout.dir}:v9`, dir: cache })).rejects.toThrow(
      `oci:${layout.dir}:v9: ${layout.dir} has no image tagged v9 (its tags: v1)`,
    );
    // A layer of its own: the cache's blob store already has the other two (by digest), so they are not read again.
    const own = await tarOf([{ header: { name: 'etc/broken' }, data: 'x' }]);
    const broken = writeLayout(path.join(scratch, 'broken'), [...(await busyboxLayers()), own], 'v1');
    const layer = path.join(broken.dir, 'blobs/sha256', broken.layerDigests[2]!.slice(7));
    writeFileSync(layer, 'not the layer');
    const before = readdirSync(cache).sort();
    await expect(ensureOciImage({ reference: `oci:${broken.dir}:v1`, dir: cache })).rejects.toThrow(
      new RegExp(`blob ${broken.layerDigests[2]}: 13 bytes came of the \\d+ its descriptor says`),
    );
    rmSync(layer);
    await expect(ensureOciImage({ reference: `oci:${broken.dir}:v1`, dir: cache })).rejects.toThrow(
      `blob ${broken.layerDigests[2]} is missing from ${broken.dir}/blobs/sha256`,
    );
    expect(readdirSync(cache).sort()).toEqual(before);
    expect(readdirSync(path.join(cache, 'blobs/sha256')).filter((n) => n.includes('partial'))).toEqual([]);
    expect(Object.keys(readRefs(cache).refs)).not.toContain(`oci:${broken.dir}:v1`);
  });

  it('converts an image whose layers are zstd (skopeo recompressed them), and names a cut or damaged zstd layer', async () => {
    // skopeo's own zstd encoder (Go's), as a registry would serve a `tar+zstd` image.
    const zdir = path.join(scratch, 'zstd-layout');
    const copied = spawnSync(
      'skopeo',
      ['copy', '--quiet', '--dest-compress-format', 'zstd', `oci:${layout.dir}:v1`, `oci:${zdir}:v1`],
      { encoding: 'utf8' },
    );
    expect(copied.status, copied.stderr).toBe(0);
    const index = JSON.parse(readFileSync(path.join(zdir, 'index.json'), 'utf8')) as {
      manifests: Array<{ digest: string }>;
    };
    const blob = (digest: string) => path.join(zdir, 'blobs/sha256', digest.slice(7));
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0]!.digest), 'utf8')) as {
      layers: Array<{ mediaType: string; digest: string }>;
    };
    expect(manifest.layers.map((l) => l.mediaType)).toEqual(
      manifest.layers.map(() => 'application/vnd.oci.image.layer.v1.tar+zstd'),
    );
    for (const l of manifest.layers) expect(readFileSync(blob(l.digest)).readUInt32BE(0)).toBe(0x28b52ffd);
    const result = await ensureOciImage({ reference: `oci:${zdir}:v1`, dir: cache });
    expect(result.cached).toBe(false);
    checkDisk(result.file);

    // Debian's zstd program, cut in the middle of its frame, and with a damaged byte in its frame header.
    const zstd = (tar: Buffer) => {
      const out = spawnSync('zstd', ['-q', '-c', '-3'], { input: tar, maxBuffer: 64 << 20 });
      expect(out.status).toBe(0);
      return out.stdout;
    };
    const busybox = await busyboxLayers();
    const cut = writeLayout(
      path.join(scratch, 'zstd-cut'),
      busybox,
      'v1',
      { ...FIXTURE_CONFIG, author: 'cut' },
      {
        mediaType: 'application/vnd.oci.image.layer.v1.tar+zstd',
        compress: (tar) => {
          const bytes = zstd(tar);
          return bytes.subarray(0, Math.floor(bytes.length / 2));
        },
      },
    );
    await expect(ensureOciImage({ reference: `oci:${cut.dir}:v1`, dir: cache })).rejects.toThrow(
      `layer ${cut.layerDigests[0]} ends in the middle of a zstd frame`,
    );
    const damaged = writeLayout(
      path.join(scratch, 'zstd-damaged'),
      busybox,
      'v1',
      { ...FIXTURE_CONFIG, author: 'damaged' },
      {
        mediaType: 'application/vnd.oci.image.layer.v1.tar+zstd',
        compress: (tar) => {
          const bytes = Buffer.from(zstd(tar));
          bytes[4]! |= 0x08; // the frame header's reserved bit
          return bytes;
        },
      },
    );
    await expect(ensureOciImage({ reference: `oci:${damaged.dir}:v1`, dir: cache })).rejects.toThrow(
      new RegExp(`layer ${damaged.layerDigests[0]}: zstd failed: \\w`),
    );
    expect(readdirSync(cache).filter((n) => n.startsWith('build-') || n.includes('partial'))).toEqual([]);
  });

  it('a layer that is not a tar names the layer', async () => {
    const bad = writeLayout(
      path.join(scratch, 'bad'),
      [(await busyboxLayers())[0]!, Buffer.from('garbage'.repeat(200))],
      'v1',
      { ...FIXTURE_CONFIG, author: 'bad' },
    );
    await expect(ensureOciImage({ reference: `oci:${bad.dir}:v1`, dir: cache })).rejects.toThrow(
      `layer ${bad.layerDigests[1]}: the tar is truncated or damaged`,
    );
  });
});
