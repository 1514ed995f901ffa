// OCI images as root disks (docs/images.md, "OCI images"): the image's layers applied in order to a tree, our static
// busybox, init and guest agent put in /.smol (with our /etc/inittab), and the tree made into a sparse ext4 with
// `mke2fs -d`: oci-<key>.ext4 under <guest cache>/images, the base of the VM's disk chain. The key covers the
// image's manifest digest and our files, so the same image pulled again is found, not converted again.
import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  createReadStream,
  existsSync,
  ftruncateSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { AGENT_BINARY } from '../agent-client/host-agent.js';
import { DISKS_DIR, IMAGES_DIR, LAYER_NAME, readLayerHeader } from '../engine/disk-layers.js';
import { MAKE_ROOM, requireRoomFor } from '../engine/disk-space.js';
import { zstdDecompressStream } from '../engine/zstd.js';
import { packageRoot } from '../package-root.js';
import type { ProgressCallback } from './build-progress.js';
import { createBuildDir, removeAbandonedBuildDirs } from './build-dir.js';
import { imagesDir } from './debian-image.js';
import { syncFile, writeFileAtomic } from './guest-assets.js';
import { isDynamicElf } from './initramfs-build.js';
import { runLogged } from './logged-command.js';
import { LayerTree } from './oci-layers.js';
import { parseReference, shortName, type OciReference } from './oci-reference.js';
import type { BlobProgress, Descriptor } from './oci-registry.js';
import { openImageSource, type ImageRunConfig, type ImageSource } from './oci-source.js';
import { mke2fsArgs, rootfsUuid, setExt4Xattrs } from './rootfs-build.js';

/** Bump when the steps below change the image they make. */
export const OCI_RECIPE_VERSION = 1;
/** The smallest disk the guest sees (sparse: what the files take is what the host's disk gives). */
export const OCI_MIN_IMAGE_BYTES = 4 * 1024 ** 3;
export const OCI_RESOURCES = path.join(packageRoot, 'resources', 'guest-oci');
/** The static busybox that runs /.smol/init and init itself (Debian's busybox-static, as the builtin image's). */
export const HOST_BUSYBOX = '/bin/busybox';
/** The kernel's init for an OCI image: ours, in /.smol, not the image's. */
export const OCI_INIT = '/.smol/init';
/** Layers downloading at once, as docker's max-concurrent-downloads. */
const CONCURRENT_DOWNLOADS = 3;
const BUILD_DIR_PREFIX = 'build-oci-';
const REFS_FILE = 'oci-refs.json';
const RECORD_FORMAT = 1;
const MKE2FS = '/sbin/mke2fs';
const E2FSCK = '/sbin/e2fsck';
const GiB = 1024 ** 3;

export interface OciImageRecord {
  format: number;
  kind: 'oci';
  /** The references that were pulled as this image (canonical spellings). */
  references: string[];
  digest: string;
  configDigest: string;
  layers: { digest: string; size: number }[];
  config: ImageRunConfig;
  key: string;
  built: string;
  seconds: number;
  /** Device nodes and FIFOs the layers had, left out. */
  skipped: number;
}

/** One layer's state as `docker pull` shows it. */
export interface LayerProgress {
  index: number;
  digest: string;
  status: 'waiting' | 'downloading' | 'downloaded' | 'cached' | 'extracting' | 'done';
  received: number;
  total: number;
}

export interface OciImageOptions {
  reference: string | OciReference;
  /** Ask the source again even when the reference was pulled before (a tag may have moved); `smol image pull` does. */
  refresh?: boolean;
  /** Convert again even when the image of that digest is here. */
  force?: boolean;
  onProgress?: ProgressCallback;
  onLayer?: (layer: LayerProgress) => void;
  signal?: AbortSignal;
  dir?: string;
  credentialsFile?: string;
}

export interface OciImageResult {
  reference: string;
  name: string;
  file: string;
  digest: string;
  config: ImageRunConfig;
  cached: boolean;
  size: number;
  allocated: number;
  seconds: number | null;
}

export interface InjectedFile {
  name: string;
  data: Buffer;
  mode: number;
}

/** What goes into /.smol: busybox, the agent and resources/guest-oci's scripts; checked to be there and static. */
export function readInjectedFiles(): InjectedFile[] {
  for (const [file, how] of [
    [AGENT_BINARY, 'build the guest agent first (make -C native agent)'],
    [HOST_BUSYBOX, 'install busybox-static (scripts/setup-system.sh)'],
  ] as const) {
    if (!existsSync(file)) throw new Error(`${file} is missing: ${how}`);
    if (isDynamicElf(file))
      throw new Error(`${file} is dynamically linked; an OCI image's VM needs it static (${how})`);
  }
  const resources = readdirSync(OCI_RESOURCES)
    .sort()
    .map((name) => ({
      name,
      data: readFileSync(path.join(OCI_RESOURCES, name)),
      mode: name === 'inittab' ? 0o644 : 0o755,
    }));
  return [
    ...resources,
    { name: 'busybox', data: readFileSync(HOST_BUSYBOX), mode: 0o755 },
    { name: 'smol-agent', data: readFileSync(AGENT_BINARY), mode: 0o755 },
  ];
}

/** The cache key of the disk made of image `digest` with `files`: recipe, digest and our files, length-prefixed. */
export function ociImageKey(digest: string, files: InjectedFile[]): string {
  const hash = createHash('sha256').update(`smol-oci-image\0recipe ${OCI_RECIPE_VERSION}\0digest ${digest}\0`);
  for (const file of files) hash.update(`file ${file.name} ${file.mode} ${file.data.length}\0`).update(file.data);
  return hash.digest('hex').slice(0, 16);
}

export const ociImageName = (key: string) => `oci-${key}`;
export const blobFile = (dir: string, digest: string) =>
  path.join(dir, 'blobs', 'sha256', digest.replace(/^sha256:/, ''));

interface RefsFile {
  format: 1;
  refs: Record<string, { name: string; digest: string; pulled: string }>;
}

export function readRefs(dir: string): RefsFile {
  try {
    const parsed = JSON.parse(readFileSync(path.join(dir, REFS_FILE), 'utf8')) as RefsFile;
    if (parsed.format === 1 && parsed.refs && typeof parsed.refs === 'object') return parsed;
  } catch {
    // none yet, or unreadable: no references
  }
  return { format: 1, refs: {} };
}

function writeRefs(dir: string, refs: RefsFile): void {
  writeFileAtomic(path.join(dir, REFS_FILE), JSON.stringify(refs, null, 2) + '\n');
}

export function readOciRecord(dir: string, name: string): OciImageRecord | null {
  try {
    const record = JSON.parse(readFileSync(path.join(dir, `${name}.json`), 'utf8')) as OciImageRecord;
    return record.format === RECORD_FORMAT && record.kind === 'oci' ? record : null;
  } catch {
    return null;
  }
}

export interface LocatedOciImage {
  reference: string;
  name: string;
  file: string;
  record: OciImageRecord;
}

/** The converted image a reference was last pulled as, or null (never pulled, or its files are gone). Never pulls. */
export function locateOciImage(reference: string | OciReference, dir = imagesDir()): LocatedOciImage | null {
  const ref = typeof reference === 'string' ? parseReference(reference) : reference;
  const entry = readRefs(dir).refs[ref.canonical];
  if (!entry) return null;
  const file = path.join(dir, `${entry.name}.ext4`);
  const record = readOciRecord(dir, entry.name);
  if (!record || !existsSync(file)) return null;
  return { reference: ref.canonical, name: entry.name, file, record };
}

const sizes = (file: string) => {
  const stats = statSync(file);
  return { size: stats.size, allocated: stats.blocks * 512 };
};

/**
 * The image `reference` names as a root disk: found in the cache when it was pulled before (unless `refresh`), else
 * pulled or read, converted and published. Nothing half-made is left in the cache when it fails or is aborted.
 */
export async function ensureOciImage(options: OciImageOptions): Promise<OciImageResult> {
  const dir = options.dir ?? imagesDir();
  const report = options.onProgress ?? (() => {});
  const reference = typeof options.reference === 'string' ? parseReference(options.reference) : options.reference;
  mkdirSync(dir, { recursive: true });
  const files = readInjectedFiles();
  const known = locateOciImage(reference, dir);
  // A digest names one image for good; a local image is read again only when asked to (it may have changed).
  if (known && !options.force && !options.refresh && ociImageKey(known.record.digest, files) === known.record.key) {
    report({ step: 'image', detail: `cached ${known.name}.ext4`, fraction: 1 });
    return result(reference, known.name, known.file, known.record, true, null);
  }
  for (const dead of removeAbandonedBuildDirs(dir, BUILD_DIR_PREFIX)) {
    report({ step: 'prepare', detail: `removed ${dead}, left behind by a conversion that died` });
  }
  const started = Date.now();
  const work = createBuildDir(dir, BUILD_DIR_PREFIX);
  // Stops this pull's other downloads when it fails, so that none goes on writing into the cache after it returns.
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
  try {
    report({ step: 'resolve', detail: shortName(reference) });
    const source = await openImageSource(reference, {
      blobFile: (digest) => blobFile(dir, digest),
      work: () => work,
      signal,
      ...(options.credentialsFile && { credentialsFile: options.credentialsFile }),
    });
    const key = ociImageKey(source.digest, files);
    const name = ociImageName(key);
    const file = path.join(dir, `${name}.ext4`);
    let record = readOciRecord(dir, name);
    let cached = true;
    if (!record || !existsSync(file) || options.force) {
      cached = false;
      record = await convert({ ...options, signal, stop, source, key, name, file, work, dir, files, report, started });
    }
    remember(dir, reference, name, record);
    record = readOciRecord(dir, name) ?? record;
    return result(reference, name, file, record, cached, cached ? null : record.seconds);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function result(
  reference: OciReference,
  name: string,
  file: string,
  record: OciImageRecord,
  cached: boolean,
  seconds: number | null,
): OciImageResult {
  return {
    reference: reference.canonical,
    name,
    file,
    digest: record.digest,
    config: record.config,
    cached,
    ...sizes(file),
    seconds,
  };
}

/** Points the reference at `name` and adds it to the record's references. */
function remember(dir: string, reference: OciReference, name: string, record: OciImageRecord): void {
  const refs = readRefs(dir);
  refs.refs[reference.canonical] = { name, digest: record.digest, pulled: new Date().toISOString() };
  writeRefs(dir, refs);
  if (!record.references.includes(reference.canonical)) {
    record.references.push(reference.canonical);
    writeFileAtomic(path.join(dir, `${name}.json`), JSON.stringify(record, null, 2) + '\n');
  }
}

interface ConvertOptions extends OciImageOptions {
  signal: AbortSignal;
  /** Aborts `signal`: the downloads still running when the conversion fails. */
  stop: AbortController;
  source: ImageSource;
  key: string;
  name: string;
  file: string;
  work: string;
  dir: string;
  files: InjectedFile[];
  report: ProgressCallback;
  started: number;
}

/** Layers into a tree (downloads in parallel, applied in order as they arrive), our files, mke2fs, publish. */
async function convert(options: ConvertOptions): Promise<OciImageRecord> {
  const { source, dir, work, report, name } = options;
  if (process.getuid?.() !== 0) {
    throw new Error(
      "converting an OCI image needs root, to give the image's files their owners (uid and gid) in the disk; " +
        'run it as root (sudo smol image pull REF)',
    );
  }
  const tree = path.join(work, 'tree');
  mkdirSync(tree);
  const layerTree = new LayerTree(tree, { owners: true });
  const onLayer = options.onLayer ?? (() => {});
  const state = source.layers.map((layer, index): LayerProgress => ({
    index,
    digest: layer.digest,
    status: 'waiting',
    received: 0,
    total: layer.size,
  }));
  const tell = (index: number, change: Partial<LayerProgress>) => onLayer(Object.assign(state[index]!, change));
  state.forEach((_s, i) => tell(i, {}));
  // The layers' sizes are in the manifest: a pull they would take below the disk reserve is refused before any.
  const missing = source.layers.filter((layer) => !existsSync(blobFile(dir, layer.digest)));
  const download = missing.reduce((sum, layer) => sum + layer.size, 0);
  const what = `the pull of ${shortName(parseRefSafe(options.reference))}`;
  requireRoomFor(dir, download, `${what} (${missing.length} of its ${source.layers.length} layers to download)`);
  const downloads = fetchAll(source, dir, tell, options.signal);
  // A failed download is seen where it is awaited; the others must not be unhandled meanwhile.
  for (const download of downloads) download.catch(() => undefined);
  const total = source.layers.reduce((sum, layer) => sum + layer.size, 0);
  let applied = 0;
  try {
    for (const [index, layer] of source.layers.entries()) {
      report({
        step: 'layers',
        detail: `layer ${index + 1}/${source.layers.length} ${short(layer.digest)}`,
        fraction: applied / Math.max(1, total),
      });
      await downloads[index];
      tell(index, { status: 'extracting' });
      await layerTree.apply(decompress(blobFile(dir, layer.digest), layer), layer.digest);
      tell(index, { status: 'done' });
      applied += layer.size;
    }
  } catch (error) {
    // A full disk (ENOSPC) or a bad layer: the downloads still running stop and remove their partial files before
    // the caller removes the build directory, so nothing of this pull is left half-written.
    options.stop.abort(error);
    await Promise.allSettled(downloads);
    throw filledUp(error, what, dir);
  }
  options.signal.throwIfAborted();
  injectFiles(tree, options.files);
  // The files are in the tree now: the disk image takes about as much again.
  requireRoomFor(dir, layerTree.stats.bytes, `${what} (its root disk, of the files unpacked)`);
  const imageBytes = Math.max(OCI_MIN_IMAGE_BYTES, Math.ceil((2 * layerTree.stats.bytes + GiB) / GiB) * GiB);
  report({
    step: 'image',
    detail: `mke2fs ${name}.ext4 (${(layerTree.stats.bytes / 1024 ** 2).toFixed(1)} MiB of files)`,
    fraction: 0.2,
  });
  const image = path.join(work, `${name}.ext4`);
  const fd = openSync(image, 'wx');
  try {
    ftruncateSync(fd, imageBytes);
  } finally {
    closeSync(fd);
  }
  mkdirSync(path.join(dir, 'logs'), { recursive: true });
  const log = path.join(dir, 'logs', `${name}.log`);
  writeFileSync(log, `smol image pull: ${shortName(parseRefSafe(options.reference))} ${source.digest} as ${name}\n`);
  await runLogged(MKE2FS, mke2fsArgs(tree, image, imageBytes, rootfsUuid(options.key)), {
    cwd: work,
    log,
    signal: options.signal,
  });
  // The layers' xattrs go into the disk, not onto the tree (oci-layers.ts); /.smol is ours, made anew.
  const xattrs = layerTree.xattrs().filter((x) => x.path !== '.smol' && !x.path.startsWith('.smol/'));
  await setExt4Xattrs(image, xattrs, { work, log, signal: options.signal });
  await runLogged(E2FSCK, ['-f', '-n', image], { cwd: work, log, signal: options.signal });
  syncFile(image);
  const record: OciImageRecord = {
    format: RECORD_FORMAT,
    kind: 'oci',
    references: [],
    digest: source.digest,
    configDigest: source.configDigest,
    layers: source.layers.map((l) => ({ digest: l.digest, size: l.size })),
    config: source.config,
    key: options.key,
    built: new Date().toISOString(),
    seconds: Math.round((Date.now() - options.started) / 100) / 10,
    skipped: layerTree.stats.skipped,
  };
  writeFileAtomic(path.join(dir, `${name}.json`), JSON.stringify(record, null, 2) + '\n');
  // A link, not a rename: an image of the same key another conversion published meanwhile is kept (same bytes but
  // for times; layers may already sit on it). --force replaces it.
  if (options.force) renameSync(image, options.file);
  else {
    try {
      linkSync(image, options.file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  report({ step: 'image', detail: `${name}.ext4`, fraction: 1 });
  return record;
}

/** ENOSPC mid-way, said with what filled the disk, where, and that nothing of it is kept; other errors as they are. */
function filledUp(error: unknown, what: string, dir: string): unknown {
  if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') return error;
  const message =
    `no space left on device for ${what}: ${dir} filled up while its layers were written ` +
    `(${(error as Error).message}); nothing of it was kept; ${MAKE_ROOM}, or smol image prune`;
  return Object.assign(new Error(message), { code: 'ENOSPC' });
}

const parseRefSafe = (reference: string | OciReference) =>
  typeof reference === 'string' ? parseReference(reference) : reference;
const short = (digest: string) => digest.replace(/^sha256:/, '').slice(0, 12);

/** Starts every layer's download (at most CONCURRENT_DOWNLOADS at once); a layer already in the store is not fetched. */
function fetchAll(
  source: ImageSource,
  dir: string,
  tell: (index: number, change: Partial<LayerProgress>) => void,
  signal?: AbortSignal,
): Promise<void>[] {
  let running = 0;
  const queue: (() => void)[] = [];
  const slot = () =>
    new Promise<void>((resolve) => {
      if (running < CONCURRENT_DOWNLOADS) {
        running++;
        resolve();
      } else
        queue.push(() => {
          running++;
          resolve();
        });
    });
  const release = () => {
    running--;
    queue.shift()?.();
  };
  return source.layers.map(async (layer: Descriptor, index) => {
    const file = blobFile(dir, layer.digest);
    if (existsSync(file)) return tell(index, { status: 'cached', received: layer.size });
    await slot();
    try {
      signal?.throwIfAborted();
      tell(index, { status: 'downloading' });
      await source.fetchLayer(layer, file, (p: BlobProgress) => tell(index, { received: p.received }));
      tell(index, { status: 'downloaded', received: layer.size });
    } finally {
      release();
    }
  });
}

/** The layer's tar: gunzipped when gzip, unzstd'ed when zstd (by its first bytes, whatever the media type says). */
function decompress(file: string, layer: Descriptor): Readable {
  const magic = Buffer.alloc(4);
  const fd = openSync(file, 'r');
  try {
    readSyncFully(fd, magic);
  } finally {
    closeSync(fd);
  }
  const stream = createReadStream(file, { highWaterMark: 1 << 20 });
  if (magic.readUInt32BE(0) === 0x28b52ffd) {
    // zstd (`tar+zstd`): Node 20's zlib has none; the addon's libzstd reads it as a stream (src/engine/zstd.ts).
    const unzstd = zstdDecompressStream(stream, `layer ${layer.digest}`);
    if (!unzstd) {
      stream.destroy();
      throw new Error(
        `layer ${layer.digest} is zstd-compressed, which needs the native addon (not built here: npm run build:native)`,
      );
    }
    stream.on('error', (err) => unzstd.destroy(err));
    return unzstd;
  }
  if (magic[0] !== 0x1f || magic[1] !== 0x8b) return stream;
  const gunzip = createGunzip({ chunkSize: 1 << 18 });
  stream.on('error', (err) => gunzip.destroy(err));
  return stream.pipe(gunzip);
}

function readSyncFully(fd: number, buffer: Buffer): void {
  // A blob shorter than 4 bytes is neither gzip nor zstd; the tar reader then says what is wrong with it.
  buffer.fill(0);
  readSync(fd, buffer, 0, buffer.length, 0);
}

/** Our files in /.smol, our /etc/inittab (with the image's shell), the mount points /.smol/init needs, a hostname. */
export function injectFiles(tree: string, files: InjectedFile[]): void {
  const smol = path.join(tree, '.smol');
  rmSync(smol, { recursive: true, force: true });
  mkdirSync(smol, { mode: 0o755 });
  let inittab = '';
  for (const file of files) {
    if (file.name === 'inittab') {
      inittab = file.data.toString('utf8');
      continue;
    }
    writeFileSync(path.join(smol, file.name), file.data, { mode: file.mode });
    chmodSync(path.join(smol, file.name), file.mode);
  }
  const has = (p: string) => {
    try {
      lstatSync(path.join(tree, p));
      return true;
    } catch {
      return false;
    }
  };
  const shell = has('bin/bash') ? '/bin/bash -l' : has('bin/sh') ? '/bin/sh -l' : '/.smol/busybox sh -l';
  for (const dir of ['proc', 'sys', 'dev', 'tmp', 'run', 'etc', 'root']) {
    const at = path.join(tree, dir);
    if (!existsSync(at) && !has(dir)) mkdirSync(at, { mode: dir === 'tmp' ? 0o1777 : 0o755 });
  }
  const etc = path.join(tree, 'etc');
  if (lstatSync(etc).isSymbolicLink()) throw new Error("the image's /etc is a symbolic link; it must be a directory");
  for (const name of ['inittab', 'hostname', 'hosts']) {
    const at = path.join(etc, name);
    if (has(`etc/${name}`) && lstatSync(at).isSymbolicLink()) rmSync(at); // never written through a link
  }
  writeFileSync(path.join(etc, 'inittab'), inittab.replace('@SHELL@', shell), { mode: 0o644 });
  if (!has('etc/hostname') || statSync(path.join(etc, 'hostname')).size === 0)
    writeFileSync(path.join(etc, 'hostname'), 'smol\n');
  if (!has('etc/hosts') || statSync(path.join(etc, 'hosts')).size === 0) {
    writeFileSync(
      path.join(etc, 'hosts'),
      '127.0.0.1\tlocalhost\n127.0.1.1\tsmol\n::1\tlocalhost ip6-localhost ip6-loopback\n',
    );
  }
}

export interface OciImageEntry {
  /** What `smol image ls` shows: the references pulled as it, shortest spelling. */
  image: string;
  references: string[];
  name: string;
  file: string;
  digest: string;
  size: number;
  allocated: number;
  built: string;
  seconds: number | null;
}

/** The converted OCI images in `dir`, by name. */
export function listOciImages(dir = imagesDir()): OciImageEntry[] {
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return [];
  }
  const refs = readRefs(dir).refs;
  const entries: OciImageEntry[] = [];
  for (const fileName of names) {
    const match = /^(oci-[0-9a-f]{16})\.ext4$/.exec(fileName);
    if (!match) continue;
    const name = match[1]!;
    const record = readOciRecord(dir, name);
    const file = path.join(dir, fileName);
    if (!record || !existsSync(file)) continue;
    const references = Object.keys(refs).filter((ref) => refs[ref]!.name === name);
    const shown = references.map((ref) => shortName(parseReference(ref)));
    entries.push({
      image: shown.join(', ') || `<none>@${record.digest.slice(0, 19)}`,
      references,
      name,
      file,
      digest: record.digest,
      ...sizes(file),
      built: record.built,
      seconds: record.seconds,
    });
  }
  return entries;
}

/**
 * The base images the engine's disk layers sit on: the names in SMOL_HOME/images that a layer in SMOL_HOME/disks
 * (a snapshot's or a live VM's) has as the image below it. Those must stay for as long as the layers do.
 */
export async function basesInUse(home: string): Promise<Set<string>> {
  const used = new Set<string>();
  const disks = path.join(home, DISKS_DIR);
  const images = path.join(home, IMAGES_DIR);
  let names: string[] = [];
  try {
    names = readdirSync(disks);
  } catch {
    return used;
  }
  for (const name of names.filter((n) => LAYER_NAME.test(n))) {
    const header = await readLayerHeader(path.join(disks, name));
    if (header && path.dirname(header.below) === images) used.add(path.basename(header.below));
  }
  // Read-only volumes have no layer: their snapshots name the images they use (docs/disks.md, "Volumes").
  const snapshots = path.join(home, 'snapshots');
  for (const id of existsSync(snapshots) ? readdirSync(snapshots) : []) {
    try {
      const manifest = JSON.parse(readFileSync(path.join(snapshots, id, 'manifest.json'), 'utf8')) as {
        volumeImages?: unknown;
      };
      if (Array.isArray(manifest.volumeImages)) for (const image of manifest.volumeImages) used.add(String(image));
    } catch {
      // not a snapshot, or one without a readable manifest: it names nothing
    }
  }
  return used;
}

export interface RemovedImage {
  name: string;
  /** Where it was: the guest cache, or SMOL_HOME/images (the engine's copy). */
  file: string;
  bytes: number;
}

/** Removes `file` (only counts it when `dryRun`) and says what that frees. */
function removeFile(file: string, removed: RemovedImage[], name: string, dryRun = false): void {
  let bytes = 0;
  try {
    bytes = statSync(file).blocks * 512;
  } catch {
    return;
  }
  if (!dryRun) rmSync(file, { force: true });
  removed.push({ name, file, bytes });
}

/** Removes the blobs no OCI image record in `dir` names, but for the images in `gone`; returns them. */
function pruneBlobs(dir: string, removed: RemovedImage[], dryRun = false, gone = new Set<string>()): void {
  const keep = new Set<string>();
  for (const image of listOciImages(dir)) {
    if (gone.has(image.name)) continue;
    const record = readOciRecord(dir, image.name);
    record?.layers.forEach((l) => keep.add(l.digest.slice(7)));
    if (record) keep.add(record.configDigest.slice(7));
  }
  const blobs = path.join(dir, 'blobs', 'sha256');
  let names: string[] = [];
  try {
    names = readdirSync(blobs);
  } catch {
    return;
  }
  for (const name of names) {
    if (!keep.has(name)) removeFile(path.join(blobs, name), removed, `blob sha256:${name}`, dryRun);
  }
}

/**
 * `smol image rm REF`: forgets a pulled reference; an image no reference names any more is removed from the cache
 * with the blobs only it had. The engine's copy of it in SMOL_HOME/images stays while snapshots need it (`inUse`).
 */
export async function removeOciImage(
  reference: string,
  options: { dir?: string; home: string },
): Promise<{ removed: RemovedImage[]; name: string; inUse: boolean }> {
  const dir = options.dir ?? imagesDir();
  const refs = readRefs(dir);
  const byName = /^oci-[0-9a-f]{16}$/.test(reference) ? reference : null;
  const canonical = byName ? null : parseReference(reference).canonical;
  const name = byName ?? (canonical ? refs.refs[canonical]?.name : undefined);
  if (!name || !existsSync(path.join(dir, `${name}.ext4`))) {
    const known = listOciImages(dir).map((image) => image.image);
    throw new Error(`no image ${reference} in ${dir} (the images: ${known.join('; ') || 'none'}; smol image ls)`);
  }
  for (const [ref, entry] of Object.entries(refs.refs)) {
    if (ref === canonical || (byName && entry.name === name)) delete refs.refs[ref];
  }
  writeRefs(dir, refs);
  const removed: RemovedImage[] = [];
  if (!Object.values(refs.refs).some((entry) => entry.name === name)) {
    removeFile(path.join(dir, `${name}.ext4`), removed, name);
    rmSync(path.join(dir, `${name}.json`), { force: true });
    rmSync(path.join(dir, 'logs', `${name}.log`), { force: true });
    pruneBlobs(dir, removed);
  }
  const inUse = (await basesInUse(options.home)).has(`${name}.ext4`);
  return { removed, name, inUse };
}

/**
 * `smol image prune`: removes every image no disk layer of the engine sits on (no snapshot, no VM): from the guest
 * cache (OCI and Debian images, with their records; the builtin root disk is `smol guest build`'s), from
 * SMOL_HOME/images (the engine's copies), and the blobs no image left needs. `dryRun`: what it would remove, kept.
 */
export async function pruneImages(options: { dir?: string; home: string; dryRun?: boolean }): Promise<RemovedImage[]> {
  const dir = options.dir ?? imagesDir();
  const dryRun = options.dryRun ?? false;
  const used = await basesInUse(options.home);
  const removed: RemovedImage[] = [];
  const engineImages = path.join(options.home, IMAGES_DIR);
  for (const name of existsSync(engineImages) ? readdirSync(engineImages) : []) {
    if (!name.endsWith('.ext4') || used.has(name)) continue;
    removeFile(path.join(engineImages, name), removed, name.replace(/\.ext4$/, ''), dryRun);
  }
  const refs = readRefs(dir);
  const gone = new Set<string>();
  for (const name of existsSync(dir) ? readdirSync(dir) : []) {
    const match = /^((?:oci|volume|debian-[a-z][a-z0-9-]*)-[0-9a-f]{16})\.ext4$/.exec(name);
    if (!match || used.has(name)) continue;
    gone.add(match[1]!);
    removeFile(path.join(dir, name), removed, match[1]!, dryRun);
    if (dryRun) continue;
    rmSync(path.join(dir, `${match[1]}.json`), { force: true });
    for (const [ref, entry] of Object.entries(refs.refs)) if (entry.name === match[1]) delete refs.refs[ref];
  }
  if (existsSync(dir) && !dryRun) writeRefs(dir, refs);
  pruneBlobs(dir, removed, dryRun, gone);
  return removed;
}
