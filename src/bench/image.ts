// `smol bench image` (docs/images.md, "Measured"): pulling and converting an OCI image of about 100 MiB from a
// registry on loopback into a root disk, against doing it by hand with the usual tools in the same run: `skopeo
// copy` to an OCI layout, `tar -x` of each layer in order, then the same `mke2fs -d`. Runs alternate between the
// two, each from an empty cache. As root (both keep the image's owners).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  createReadStream,
  createWriteStream,
  ftruncateSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { pack } from 'tar-stream';
import { ensureOciImage, OCI_MIN_IMAGE_BYTES } from '../guest-build/oci-image.js';
import { mke2fsArgs, rootfsUuid } from '../guest-build/rootfs-build.js';
import { push, REGISTRY_BINARY, SKOPEO, startRegistry } from './loopback-registry.js';
import { median } from './stats.js';

export interface ImageBenchResult {
  name: 'image';
  runs: number;
  image: { layers: number; files: number; bytes: number; compressedBytes: number };
  ours: { p50_ms: number; samples_ms: number[] };
  byHand: { p50_ms: number; samples_ms: number[]; skopeo_p50_ms: number; tar_p50_ms: number; mke2fs_p50_ms: number };
  ratio: number;
  notes: string[];
}

/** Host files for the image: /usr/lib/python3.11 and the like, up to `bytes`, as they are on this machine. */
function pickFiles(bytes: number): { files: string[]; total: number } {
  const roots = ['/usr/lib/python3.11', '/usr/lib/python3', '/usr/share/perl', '/usr/lib/x86_64-linux-gnu'];
  const files: string[] = [];
  let total = 0;
  const walk = (dir: string) => {
    let names: string[];
    try {
      names = readdirSync(dir).sort();
    } catch {
      return;
    }
    for (const name of names) {
      if (total >= bytes) return;
      const file = path.join(dir, name);
      const stats = lstatSync(file);
      if (stats.isDirectory()) walk(file);
      else if (stats.isFile() || stats.isSymbolicLink()) {
        files.push(file);
        total += stats.isFile() ? stats.size : 0;
      }
    }
  };
  for (const root of roots) walk(root);
  return { files, total };
}

/** A gzip'd layer of `files` (with their directories), written to `out`; its digest and size. */
async function writeLayer(files: string[], out: string): Promise<{ digest: string; size: number; diffId: string }> {
  const archive = pack();
  const diff = createHash('sha256');
  const hashing = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      diff.update(chunk);
      callback(null, chunk);
    },
  });
  const done = pipeline(archive as unknown as Readable, hashing, createGzip({ level: 6 }), createWriteStream(out));
  const dirs = new Set<string>();
  const add = (header: Parameters<typeof archive.entry>[0], data?: Buffer) =>
    new Promise<void>((resolve, reject) => {
      const cb = (err?: Error | null) => (err ? reject(err) : resolve());
      if (data) archive.entry(header, data, cb);
      else archive.entry(header, cb);
    });
  for (const file of files) {
    const parts = file.slice(1).split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (dirs.has(dir)) continue;
      dirs.add(dir);
      await add({ name: `${dir}/`, type: 'directory', mode: 0o755, mtime: new Date(0) });
    }
    const stats = lstatSync(file);
    const header = { name: file.slice(1), mode: stats.mode & 0o7777, uid: 0, gid: 0, mtime: stats.mtime };
    if (stats.isSymbolicLink()) await add({ ...header, type: 'symlink', linkname: readlinkSync(file) });
    else await add({ ...header, size: stats.size }, readFileSync(file));
  }
  archive.finalize();
  await done;
  const hash = createHash('sha256');
  await pipeline(createReadStream(out), hash);
  return { digest: `sha256:${hash.digest('hex')}`, size: lstatSync(out).size, diffId: `sha256:${diff.digest('hex')}` };
}

/** An OCI layout at `dir` of host files split in `layers` layers, tagged v1. */
async function writeBenchLayout(dir: string, bytes: number, layers: number) {
  const { files, total } = pickFiles(bytes);
  const blobs = path.join(dir, 'blobs', 'sha256');
  mkdirSync(blobs, { recursive: true });
  const per = Math.ceil(files.length / layers);
  const descriptors = [];
  const diffIds = [];
  for (let i = 0; i < layers; i++) {
    const tmp = path.join(dir, `layer-${i}.tmp`);
    const layer = await writeLayer(files.slice(i * per, (i + 1) * per), tmp);
    renameSync(tmp, path.join(blobs, layer.digest.slice(7)));
    descriptors.push({
      mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
      digest: layer.digest,
      size: layer.size,
    });
    diffIds.push(layer.diffId);
  }
  const put = (value: object) => {
    const bytes = Buffer.from(JSON.stringify(value));
    const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    writeFileSync(path.join(blobs, digest.slice(7)), bytes);
    return { digest, size: bytes.length };
  };
  const config = put({
    architecture: 'amd64',
    os: 'linux',
    config: { Env: ['PATH=/usr/bin:/bin'], Cmd: ['/bin/sh'] },
    rootfs: { type: 'layers', diff_ids: diffIds },
  });
  const manifest = put({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
    layers: descriptors,
  });
  writeFileSync(path.join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    path.join(dir, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          ...manifest,
          annotations: { 'org.opencontainers.image.ref.name': 'v1' },
        },
      ],
    }),
  );
  const compressed = descriptors.reduce((sum, d) => sum + d.size, 0);
  return { files: files.length, bytes: total, compressedBytes: compressed };
}

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')}: ${result.stderr || result.error?.message}`);
}

/** The same work by hand: skopeo copy to a layout, tar -x of each layer in order, mke2fs -d of the tree. */
function byHand(reference: string, work: string) {
  const layout = path.join(work, 'layout');
  const t0 = performance.now();
  run(SKOPEO, ['copy', '-q', '--src-tls-verify=false', `docker://${reference}`, `oci:${layout}:v1`]);
  const t1 = performance.now();
  const index = JSON.parse(readFileSync(path.join(layout, 'index.json'), 'utf8'));
  const blob = (digest: string) => path.join(layout, 'blobs', 'sha256', digest.slice(7));
  const manifest = JSON.parse(readFileSync(blob(index.manifests[0].digest), 'utf8'));
  const tree = path.join(work, 'tree');
  mkdirSync(tree);
  for (const layer of manifest.layers) {
    run('tar', ['-xzf', blob(layer.digest), '-C', tree, '--numeric-owner', '--xattrs', '--xattrs-include=*']);
  }
  const t2 = performance.now();
  const image = path.join(work, 'image.ext4');
  const fd = openSync(image, 'wx');
  ftruncateSync(fd, OCI_MIN_IMAGE_BYTES);
  closeSync(fd);
  run('/sbin/mke2fs', mke2fsArgs(tree, image, OCI_MIN_IMAGE_BYTES, rootfsUuid('bench')));
  const t3 = performance.now();
  return { total: t3 - t0, skopeo: t1 - t0, tar: t2 - t1, mke2fs: t3 - t2 };
}

export async function benchImage(options: {
  runs: number;
  mib?: number;
  progress: (line: string) => void;
}): Promise<ImageBenchResult> {
  if (process.getuid?.() !== 0) throw new Error("smol bench image runs as root: both ways keep the image's owners");
  for (const tool of [REGISTRY_BINARY, SKOPEO]) {
    try {
      lstatSync(tool);
    } catch {
      throw new Error(`${tool} is missing: install docker-registry and skopeo (scripts/setup-system.sh)`);
    }
  }
  // Under the cache's disk rather than /tmp, which may be a small tmpfs.
  const scratch = mkdtempSync(path.join(process.env.SMOL_BENCH_DIR ?? os.homedir(), '.smol-bench-image-'));
  const registry = await startRegistry(path.join(scratch, 'registry'));
  try {
    options.progress(`writing a ${options.mib ?? 100} MiB image from this machine's files`);
    const image = await writeBenchLayout(path.join(scratch, 'source'), (options.mib ?? 100) * 1024 * 1024, 3);
    push(`oci:${path.join(scratch, 'source')}:v1`, registry.host, 'bench/image:v1');
    const reference = `${registry.host}/bench/image:v1`;
    const ours: number[] = [];
    const hand: ReturnType<typeof byHand>[] = [];
    // One warm-up of each (page cache, the registry's own caches), then alternating runs.
    for (let i = -1; i < options.runs; i++) {
      const a = path.join(scratch, `ours-${i}`);
      const t0 = performance.now();
      await ensureOciImage({ reference, dir: a });
      const ms = performance.now() - t0;
      rmSync(a, { recursive: true, force: true });
      const b = path.join(scratch, `hand-${i}`);
      mkdirSync(b);
      const h = byHand(reference, b);
      rmSync(b, { recursive: true, force: true });
      if (i < 0) continue;
      ours.push(ms);
      hand.push(h);
      options.progress(
        `run ${i + 1}/${options.runs}: ours ${(ms / 1000).toFixed(2)} s, by hand ${(h.total / 1000).toFixed(2)} s`,
      );
    }
    const p50 = median(ours);
    const handP50 = median(hand.map((h) => h.total));
    return {
      name: 'image',
      runs: options.runs,
      image: { layers: 3, ...image },
      ours: { p50_ms: p50, samples_ms: ours },
      byHand: {
        p50_ms: handP50,
        samples_ms: hand.map((h) => h.total),
        skopeo_p50_ms: median(hand.map((h) => h.skopeo)),
        tar_p50_ms: median(hand.map((h) => h.tar)),
        mke2fs_p50_ms: median(hand.map((h) => h.mke2fs)),
      },
      ratio: p50 / handP50,
      notes: [
        'ours: pull over the distribution API (digests checked), layers applied in order, our files injected, mke2fs -d, e2fsck -n, fsync',
        'by hand: skopeo copy docker:// to oci: (digests checked), tar -xzf of each layer, mke2fs -d (no check, no fsync)',
      ],
    };
  } finally {
    await registry.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

export function formatImageBenchResult(r: ImageBenchResult): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  return (
    [
      `image: ${r.runs} runs after 1 warm-up; ${r.image.layers} layers, ${r.image.files} files, ${(r.image.bytes / 2 ** 20).toFixed(1)} MiB (${(r.image.compressedBytes / 2 ** 20).toFixed(1)} MiB gzip'd), registry on loopback`,
      `ours (pull + convert)      p50 ${s(r.ours.p50_ms)}`,
      `by hand (skopeo+tar+mke2fs) p50 ${s(r.byHand.p50_ms)}  (skopeo ${s(r.byHand.skopeo_p50_ms)}, tar ${s(r.byHand.tar_p50_ms)}, mke2fs ${s(r.byHand.mke2fs_p50_ms)})`,
      `ratio ours/by hand         ${r.ratio.toFixed(2)}x (goal: at most 1.2x)`,
      ...r.notes.map((note) => `note: ${note}`),
    ].join('\n') + '\n'
  );
}

export interface ImageBootResult {
  name: 'image-boot';
  runs: number;
  /** One row per image: its first boots, each in a fresh data dir (so each bakes its base snapshot). */
  rows: {
    image: string;
    bytes: number;
    up_p50_ms: number;
    up_ms: number[];
    agent_p50_ms: number;
    agent_ms: number[];
  }[];
  /** The big OCI image's first boot (to the agent) over the builtin image's. */
  ratio: number;
  notes: string[];
}

/**
 * `smol bench image --boot` (the second figure): the first boot of an episode of an OCI image, against the
 * builtin image, in the same run, through a real engine in a fresh data dir each time: `up` (boot, bake the base
 * snapshot, running) and then the agent's first answer. Three images: builtin, a ~1 MiB OCI image and the ~`mib`
 * MiB one of the conversion benchmark, both pulled from the loopback registry first (not timed). A Linux guest:
 * run it in the KVM lab.
 */
export async function benchImageBoot(options: {
  runs: number;
  mib?: number;
  progress: (line: string) => void;
}): Promise<ImageBootResult> {
  if (process.getuid?.() !== 0) throw new Error("smol bench image runs as root: pulls keep the image's owners");
  const { withThrowawayEngine } = await import('./throwaway-engine.js');
  const scratch = mkdtempSync(path.join(process.env.SMOL_BENCH_DIR ?? os.homedir(), '.smol-bench-image-boot-'));
  const registry = await startRegistry(path.join(scratch, 'registry'), 600_000); // the lab is slow to start it
  try {
    const big = (options.mib ?? 100) * 1024 * 1024;
    const images: { image: string; bytes: number }[] = [{ image: 'builtin', bytes: 0 }];
    for (const [name, bytes] of [
      ['small', 1024 * 1024],
      ['big', big],
    ] as const) {
      options.progress(`writing and pulling a ${(bytes / 2 ** 20).toFixed(0)} MiB image`);
      const layout = path.join(scratch, name);
      const written = await writeBenchLayout(layout, bytes, name === 'small' ? 1 : 3);
      push(`oci:${layout}:v1`, registry.host, `bench/boot-${name}:v1`);
      const reference = `${registry.host}/bench/boot-${name}:v1`;
      await ensureOciImage({ reference, refresh: true });
      images.push({ image: reference, bytes: written.bytes });
    }
    const rows = images.map((image) => ({ ...image, up_ms: [] as number[], agent_ms: [] as number[] }));
    for (let run = 0; run < options.runs; run++) {
      for (const row of rows) {
        const smolfile = path.join(scratch, `boot-${rows.indexOf(row)}.smolfile`);
        writeFileSync(smolfile, `image = ${JSON.stringify(row.image)}\n`);
        await withThrowawayEngine('image-boot', async (smol) => {
          const t0 = performance.now();
          const { vm } = await smol.up(smolfile, { name: 'boot' });
          const t1 = performance.now();
          // The OCI images are host files with no `true` of their own: our busybox in /.smol has one.
          const argv = row.image === 'builtin' ? ['true'] : ['/.smol/busybox', 'true'];
          const { exitCode } = await smol.exec(vm.id, argv);
          const t2 = performance.now();
          if (exitCode !== 0) throw new Error(`the agent of ${row.image} ran true with exit status ${exitCode}`);
          row.up_ms.push(t1 - t0);
          row.agent_ms.push(t2 - t0);
          options.progress(
            `run ${run + 1}/${options.runs} ${row.image}: up ${((t1 - t0) / 1000).toFixed(2)} s, agent ${((t2 - t0) / 1000).toFixed(2)} s`,
          );
        });
      }
    }
    const done = rows.map(({ image, bytes, up_ms, agent_ms }) => ({
      image,
      bytes,
      up_p50_ms: median(up_ms),
      up_ms,
      agent_p50_ms: median(agent_ms),
      agent_ms,
    }));
    return {
      name: 'image-boot',
      runs: options.runs,
      rows: done,
      ratio: done[2]!.agent_p50_ms / done[0]!.agent_p50_ms,
      notes: [
        'each boot in a fresh data dir: the first boot of an episode, which bakes its base snapshot',
        'up: createEpisode answered (the VM running from its new base); agent: its first exec answered',
      ],
    };
  } finally {
    await registry.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

export function formatImageBootResult(r: ImageBootResult): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  return (
    [
      `image --boot: ${r.runs} run${r.runs === 1 ? '' : 's'} of each, a fresh data dir each time`,
      ...r.rows.map(
        (row) =>
          `${row.image.padEnd(44)} ${(row.bytes / 2 ** 20).toFixed(1).padStart(6)} MiB  up p50 ${s(row.up_p50_ms)}  agent p50 ${s(row.agent_p50_ms)}`,
      ),
      `ratio big OCI image / builtin (to the agent): ${r.ratio.toFixed(2)}x (goal: the image's size does not slow the boot)`,
      ...r.notes.map((note) => `note: ${note}`),
    ].join('\n') + '\n'
  );
}
