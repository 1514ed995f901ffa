// `smol image build|pull|ls|rm|prune`: the root disk images Smolfiles ask for with `image = "debian:<suite>"` or an
// OCI image reference (docs/images.md).
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { formatElapsed } from '../guest-build/build-progress.js';
import {
  debianRecipeOf,
  describeSizes,
  ensureDebianImage,
  imagesDir,
  locateDebianImage,
  type DebianImageRecipe,
  type DebianImageResult,
} from '../guest-build/debian-image.js';
import { listImages, type ImageEntry } from '../guest-build/image-list.js';
import {
  ensureOciImage,
  listOciImages,
  locateOciImage,
  type OciImageResult,
  type RemovedImage,
} from '../guest-build/oci-image.js';
import { parseReference, shortName } from '../guest-build/oci-reference.js';
import { workloadOf, type Workload } from '../guest-build/oci-run.js';
import { smolHomeDir } from '../smol-dirs.js';
import { ApiFailure } from '../api/engine-api.js';
import { fileImageOperations } from '../api/image-routes.js';
import { EXIT } from './engine-cli.js';
import { LayerDisplay } from './pull-progress.js';
import { formatProblem, loadSmolfile, type Smolfile } from '../smolfile/smolfile.js';
import { parseFlags } from './args.js';
import { CommandError, UsageError } from './errors.js';
import { runInterruptibleBuild } from './interruptible-build.js';

export const IMAGE_HELP = `Usage: smol image build [-f FILE] [--force] [--json]
       smol image pull REF [--force] [--json]
       smol image ls [--json]
       smol image rm REF|NAME [--force] [--json]
       smol image prune [--dry-run] [--json]

build   Builds the root disk image a Smolfile's image = "debian:<suite>" asks for, unless the
        cache has it: Debian's minbase from deb.debian.org (mmdebstrap), busybox-static and
        the guest agent, with the Smolfile's init commands run in it (as root, with this
        machine's network, env set), on a sparse 4 GiB ext4 image. Needs root; installs
        mmdebstrap and e2fsprogs when missing. About a minute for bookworm's minbase.
        image = "builtin" is built by smol guest build.
pull    Pulls an OCI image and makes it a root disk: python:3.12-slim (Docker Hub),
        host:port/org/app:tag, name@sha256:..., oci:DIR[:TAG], oci-archive:FILE[:TAG],
        docker-archive:FILE. A registry is asked for the tag's image every time; layers
        the cache has are not downloaded again, an image it has is not converted again
        (--force: convert again). Logins come from ~/.docker/config.json. Needs root.
ls      Lists the images: Debian and OCI, size as the guest sees it and what each takes on disk.
rm      Forgets a pulled reference (or an image by name, oci-<hash>); an image no reference
        names is removed from the cache. Refused (exit 4), naming them, while snapshots or
        VMs of the engine (SMOL_HOME) sit on it; --force removes it anyway, and their copy
        stays until prune finds it unused.
prune   Removes every image no snapshot or VM of the engine (SMOL_HOME) sits on, and the
        layers no image left needs. The builtin root disk is smol guest build's and stays.
        --dry-run: lists what it would remove, with sizes, and removes nothing.

Options:
  -f, --file FILE  the Smolfile (default: ./Smolfile)
  --force          build or convert again even when the cache has the image; rm: also
                   an image snapshots or VMs need
  --dry-run        prune: say what would be freed, free nothing
  --json           print the result as JSON
  -h, --help       show this help

Cache: \${SMOL_CACHE:-\${XDG_CACHE_HOME:-~/.cache}/smol-studio}/guest/images
Exit status: 0 done, 1 the build or pull failed or the Smolfile has errors, 2 usage error, 3 rm: no such
image, 4 rm: snapshots or VMs need it, 130 interrupted.
`;

export type ImageArgs =
  | { action: 'build'; file: string; force: boolean; json: boolean }
  | { action: 'pull'; reference: string; force: boolean; json: boolean }
  | { action: 'rm'; reference: string; force: boolean; json: boolean }
  | { action: 'prune'; dryRun: boolean; json: boolean }
  | { action: 'ls'; json: boolean };

const ACTIONS = 'build, pull, ls, rm, prune';

export function parseImageArgs(argv: string[]): ImageArgs | 'help' {
  const [action, ...rest] = argv;
  if (action === undefined) throw new UsageError('image', `name an action: ${ACTIONS}`);
  if (action === '--help' || action === '-h') return 'help';
  const common = { json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } } as const;
  if (action === 'build') {
    const flags = parseFlags('image', rest, {
      ...common,
      file: { type: 'string', short: 'f', default: 'Smolfile' },
      force: { type: 'boolean', default: false },
    });
    if (flags.help) return 'help';
    if (flags.file === '') throw new UsageError('image', '--file needs a file');
    return { action, file: flags.file, force: flags.force, json: flags.json };
  }
  if (action === 'pull' || action === 'rm') {
    const references = rest.filter((arg) => !arg.startsWith('-'));
    const flags = parseFlags(
      'image',
      rest.filter((arg) => arg.startsWith('-')),
      { ...common, force: { type: 'boolean', default: false } },
    );
    if (flags.help) return 'help';
    if (references.length !== 1)
      throw new UsageError('image', `${action} takes one image reference (smol image ${action} python:3.12-slim)`);
    return { action, reference: references[0]!, force: flags.force, json: flags.json };
  }
  if (action === 'prune') {
    const flags = parseFlags('image', rest, { ...common, 'dry-run': { type: 'boolean', default: false } });
    return flags.help ? 'help' : { action, dryRun: flags['dry-run'], json: flags.json };
  }
  if (action === 'ls') {
    const flags = parseFlags('image', rest, common);
    return flags.help ? 'help' : { action, json: flags.json };
  }
  throw new UsageError('image', `unknown action ${action} (actions: ${ACTIONS})`);
}

const mib = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`;

/** What `smol image build` prints when the Smolfile names no image to build here. */
export function nothingToBuild(smolfile: Smolfile): string | null {
  if (smolfile.image === null) return 'no image to build: the Smolfile boots a bare kernel as it is\n';
  if (smolfile.image.kind === 'builtin') {
    return 'image = "builtin": the builtin image is built by smol guest build (docs/guest.md)\n';
  }
  if (smolfile.image.kind === 'oci') {
    return `image = "${smolfile.image.reference}" is an OCI image: smol image pull ${smolfile.image.reference} makes it\n`;
  }
  return null;
}

export function formatImageBuild(suite: string, result: DebianImageResult): string {
  const how = result.cached ? 'cached' : `built in ${formatElapsed((result.seconds ?? 0) * 1000)}`;
  const lines = [`debian:${suite}  ${result.file} (${describeSizes(result)}, ${how})`];
  for (const [i, { command, output }] of result.initOutput.entries()) {
    lines.push(`init ${i + 1}: ${command}`);
    const printed = output.trimEnd();
    if (printed !== '') lines.push(...printed.split('\n').map((line) => `  ${line}`));
  }
  return lines.join('\n') + '\n';
}

/** A row of `smol image ls`: a Debian image or an OCI image. */
export type ListedImage = Pick<ImageEntry, 'image' | 'hash' | 'size' | 'allocated' | 'built' | 'file'>;

export function listAllImages(dir: string): ListedImage[] {
  const oci = listOciImages(dir).map((image) => ({ ...image, hash: image.digest.slice(7, 19) }));
  return [...listImages(dir), ...oci];
}

export function formatImageList(dir: string, images: ListedImage[]): string {
  if (images.length === 0) {
    return `no images in ${dir}; build one with smol image build -f <Smolfile>, or smol image pull REF\n`;
  }
  const rows = images.map((image) => [
    image.image,
    image.hash,
    gib(image.size),
    mib(image.allocated),
    image.built.slice(0, 16).replace('T', ' '),
    image.file,
  ]);
  const header = ['IMAGE', 'HASH', 'SIZE', 'ON DISK', 'BUILT', 'FILE'];
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

async function loadForBuild(file: string): Promise<Smolfile> {
  let result;
  try {
    result = await loadSmolfile(file);
  } catch (err) {
    throw new CommandError((err as Error).message);
  }
  if (!result.smolfile) {
    const problems = result.problems.map((problem) => formatProblem(file, problem));
    throw new CommandError(`${file} has errors (smol validate -f ${file}):\n${problems.join('\n')}`);
  }
  return result.smolfile;
}

async function runBuild(args: { file: string; force: boolean; json: boolean }): Promise<number> {
  const smolfile = await loadForBuild(args.file);
  const recipe = debianRecipeOf(smolfile);
  if (!recipe) {
    const nothing = nothingToBuild(smolfile) ?? '';
    process.stdout.write(args.json ? JSON.stringify({ image: smolfile.image, file: null }) + '\n' : nothing);
    return 0;
  }
  const result = await buildDebian(recipe, args.force);
  const json = JSON.stringify({ image: `debian:${recipe.suite}`, ...result }, null, 2) + '\n';
  process.stdout.write(args.json ? json : formatImageBuild(recipe.suite, result));
  return 0;
}

/** ensureDebianImage with the progress on stderr and Ctrl-C honoured. */
function buildDebian(recipe: DebianImageRecipe, force = false): Promise<DebianImageResult> {
  return runInterruptibleBuild(`image build of debian:${recipe.suite}`, (onProgress, signal) =>
    ensureDebianImage({ ...recipe, force, onProgress, signal }),
  );
}

export async function runImage(argv: string[]): Promise<number> {
  const args = parseImageArgs(argv);
  if (args === 'help') {
    process.stdout.write(IMAGE_HELP);
    return 0;
  }
  const print = (json: unknown, text: string) =>
    process.stdout.write(args.json ? JSON.stringify(json, null, 2) + '\n' : text);
  switch (args.action) {
    case 'build':
      return runBuild(args);
    case 'pull': {
      const result = await pullImage(args.reference, { refresh: true, force: args.force });
      const how = result.cached ? 'cached' : `converted in ${result.seconds ?? 0} s`;
      print(
        result,
        `${shortName(parseReference(result.reference))}  ${result.digest}\n  ${result.file} (${describeSizes(result)}, ${how})\n`,
      );
      return 0;
    }
    case 'ls': {
      const dir = imagesDir();
      const images = listAllImages(dir);
      print(images, formatImageList(dir, images));
      return 0;
    }
    case 'rm': {
      const result = await cliImages()
        .remove(args.reference, args.force)
        .catch((err: Error) => {
          const status = err instanceof ApiFailure ? err.status : 0;
          const exit = status === 404 ? EXIT.notFound : status === 409 ? EXIT.conflict : EXIT.failed;
          throw new CommandError(`image rm: ${err.message}`, exit);
        });
      const kept = result.inUse
        ? ` (snapshots still sit on it: the engine's copy in ${path.join(smolHomeDir(), 'images')} stays until smol image prune finds it unused)`
        : '';
      print(result, `removed ${args.reference}: ${formatRemoved(result.removed)}${kept}\n`);
      return 0;
    }
    case 'prune': {
      const { removed } = await cliImages().prune(args.dryRun);
      print({ removed, dryRun: args.dryRun }, formatPruned(removed, args.dryRun));
      return 0;
    }
  }
}

/** The API's image operations on this data dir and cache, as the engine runs them, with refusals worded for here. */
const cliImages = () => fileImageOperations(smolHomeDir(), { forceOption: '--force' });

function formatRemoved(removed: RemovedImage[], verb = 'freed'): string {
  if (removed.length === 0) return `nothing ${verb}`;
  const bytes = removed.reduce((sum, r) => sum + r.bytes, 0);
  return `${removed.length} file${removed.length === 1 ? '' : 's'}, ${mib(bytes)} ${verb}`;
}

/** What `smol image prune [--dry-run]` prints: the total, then each file with its size. */
export function formatPruned(removed: RemovedImage[], dryRun: boolean): string {
  if (removed.length === 0)
    return 'nothing to prune: every image left is in use by a snapshot or VM, or there is none\n';
  const head = dryRun
    ? `a prune would free ${formatRemoved(removed, 'in all')} (nothing removed: --dry-run)`
    : `pruned ${formatRemoved(removed)}`;
  const width = Math.max(...removed.map((r) => mib(r.bytes).length));
  return [head, ...removed.map((r) => `  ${mib(r.bytes).padStart(width)}  ${r.name}  ${r.file}`)].join('\n') + '\n';
}

/** ensureOciImage with the step progress and one line per layer on stderr, and Ctrl-C honoured. */
export function pullImage(
  reference: string,
  options: { refresh?: boolean; force?: boolean } = {},
): Promise<OciImageResult> {
  return runInterruptibleBuild(`pull of ${reference}`, (onProgress, signal, display) => {
    const layers = new LayerDisplay(process.stderr);
    let drawing = false;
    return ensureOciImage({
      reference,
      ...options,
      signal,
      onProgress: (progress) => {
        if (progress.step === 'layers') return; // the layers' own lines say it
        if (drawing) {
          layers.finish();
          drawing = false;
        }
        onProgress(progress);
      },
      onLayer: (layer) => {
        if (!drawing) display.finish();
        drawing = true;
        layers.report(layer);
      },
    }).finally(() => layers.finish());
  });
}

/**
 * Before `smol up` or `smol run`: builds the Smolfile's Debian image here, or pulls its OCI image when it was never
 * pulled, with the progress on stderr and Ctrl-C honoured (the engine would do it too, but silently). Nothing for
 * other Smolfiles, nor for one with errors (the engine says what they are).
 */
export async function buildImageFirst(file: string): Promise<void> {
  const { smolfile } = await loadSmolfile(file).catch(() => ({ smolfile: null }));
  if (smolfile?.image?.kind === 'oci') {
    if (!locateOciImage(smolfile.image.reference)) await pullImage(smolfile.image.reference);
    return;
  }
  const recipe = smolfile && debianRecipeOf(smolfile);
  if (recipe && !locateDebianImage(recipe).built) await buildDebian(recipe);
}

/**
 * The Smolfile `smol up` and `smol run` start from: `-f FILE`; with `--image REF` instead, a Smolfile of that image
 * alone, written to SMOL_HOME/smolfiles/ (the engine reads an episode's Smolfile by its path, on reset too); with
 * neither, ./Smolfile when there is one, else such a Smolfile of the builtin image.
 */
export function chooseSmolfile(
  command: string,
  flags: { file?: string; image?: string },
  home = smolHomeDir(),
): string {
  if (flags.image !== undefined && flags.file !== undefined) {
    throw new UsageError(command, '--image and -f are either-or: --image REF starts the image without a Smolfile');
  }
  if (flags.file !== undefined) {
    if (flags.file === '') throw new UsageError(command, '--file needs a file');
    return path.resolve(flags.file);
  }
  if (flags.image === undefined && existsSync(path.resolve('Smolfile'))) return path.resolve('Smolfile');
  let image = 'builtin';
  if (flags.image !== undefined) {
    try {
      image = /^(builtin|debian:.*)$/.test(flags.image) ? flags.image : parseReference(flags.image).canonical;
    } catch (err) {
      throw new UsageError(command, `--image: ${(err as Error).message}`);
    }
  }
  const text = `# Written by smol ${command}${flags.image === undefined ? ' (no Smolfile here)' : ` --image ${flags.image}`}.\nimage = ${JSON.stringify(image)}\n`;
  const name = `image-${createHash('sha256').update(text).digest('hex').slice(0, 16)}.smolfile`;
  const file = path.join(home, 'smolfiles', name);
  if (!existsSync(file)) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
  return file;
}

/** What `smol run` runs in a Smolfile's episode: its workload over its OCI image's config (none for other images). */
export async function workloadFor(file: string): Promise<Workload | null> {
  const { smolfile } = await loadSmolfile(file).catch(() => ({ smolfile: null }));
  if (!smolfile) return null;
  const config =
    smolfile.image?.kind === 'oci' ? (locateOciImage(smolfile.image.reference)?.record.config ?? null) : null;
  return workloadOf(smolfile, config);
}
