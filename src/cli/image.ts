// `smol image build` and `smol image ls`: the root disk images Smolfiles ask for with `image = "debian:<suite>"`
// (docs/images.md).
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
import { formatProblem, loadSmolfile, type Smolfile } from '../smolfile/smolfile.js';
import { parseFlags } from './args.js';
import { CommandError, UsageError } from './errors.js';
import { runInterruptibleBuild } from './interruptible-build.js';

export const IMAGE_HELP = `Usage: smol image build [-f FILE] [--force] [--json]
       smol image ls [--json]

build   Builds the root disk image a Smolfile's image = "debian:<suite>" asks for, unless the
        cache has it: Debian's minbase from deb.debian.org (mmdebstrap), busybox-static and
        the guest agent, with the Smolfile's init commands run in it (as root, with this
        machine's network, env set), on a sparse 4 GiB ext4 image. Needs root; installs
        mmdebstrap and e2fsprogs when missing. About a minute for bookworm's minbase.
        image = "builtin" is built by smol guest build.
ls      Lists the built images: size as the guest sees it and what each takes on disk.

Options:
  -f, --file FILE  the Smolfile (default: ./Smolfile)
  --force          build again even when the cache has an image of the same recipe
  --json           print the result as JSON
  -h, --help       show this help

Cache: \${SMOL_CACHE:-\${XDG_CACHE_HOME:-~/.cache}/smol-studio}/guest/images
Exit status: 0 done, 1 the build failed or the Smolfile has errors, 2 usage error, 130 interrupted.
`;

export type ImageArgs =
  { action: 'build'; file: string; force: boolean; json: boolean } | { action: 'ls'; json: boolean };

export function parseImageArgs(argv: string[]): ImageArgs | 'help' {
  const [action, ...rest] = argv;
  if (action === undefined) throw new UsageError('image', 'name an action: build or ls');
  if (action === '--help' || action === '-h') return 'help';
  if (action === 'build') {
    const flags = parseFlags('image', rest, {
      file: { type: 'string', short: 'f', default: 'Smolfile' },
      force: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    });
    if (flags.help) return 'help';
    if (flags.file === '') throw new UsageError('image', '--file needs a file');
    return { action, file: flags.file, force: flags.force, json: flags.json };
  }
  if (action === 'ls') {
    const flags = parseFlags('image', rest, {
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    });
    return flags.help ? 'help' : { action, json: flags.json };
  }
  throw new UsageError('image', `unknown action ${action} (actions: build, ls)`);
}

const mib = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`;

/** What `smol image build` prints when the Smolfile names no image to build here. */
export function nothingToBuild(smolfile: Smolfile): string | null {
  if (smolfile.image === null) return 'no image to build: the Smolfile boots a bare kernel as it is\n';
  if (smolfile.image.kind === 'builtin') {
    return 'image = "builtin": the builtin image is built by smol guest build (docs/guest.md)\n';
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

export function formatImageList(dir: string, images: ImageEntry[]): string {
  if (images.length === 0) return `no images built in ${dir}; build one with smol image build -f <Smolfile>\n`;
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
  if (args.action === 'build') return runBuild(args);
  const dir = imagesDir();
  const images = listImages(dir);
  process.stdout.write(args.json ? JSON.stringify(images, null, 2) + '\n' : formatImageList(dir, images));
  return 0;
}

/**
 * Before `smol up` or `smol run`: builds the Smolfile's Debian image here, with the progress on stderr and Ctrl-C
 * honoured, when it is not built yet (the engine would build it too, but silently). Nothing for other Smolfiles,
 * nor for one with errors (the engine says what they are).
 */
export async function buildImageFirst(file: string): Promise<void> {
  const { smolfile } = await loadSmolfile(file).catch(() => ({ smolfile: null }));
  const recipe = smolfile && debianRecipeOf(smolfile);
  if (recipe && !locateDebianImage(recipe).built) await buildDebian(recipe);
}
