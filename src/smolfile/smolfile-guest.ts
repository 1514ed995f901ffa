// What a Smolfile boots: `image`, `kernel`, `initrd` and `cmdline` (docs/smolfile.md, "What boots").
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import path from 'node:path';
import type { ProblemList } from './smolfile-problems.js';
import type { TomlTable } from './toml-values.js';
import { describeValue, expected, readString } from './toml-values.js';
import { VM_LIMITS } from '../vmm/vm-options.js';
import { parseReference } from '../guest-build/oci-reference.js';

/**
 * The root filesystem and guest agent a VM boots with. An OCI image's `reference` is its canonical spelling
 * (`docker.io/library/python:3.12-slim`, `oci:/abs/dir:tag`: local paths resolved from the Smolfile's directory).
 */
export type SmolfileImage =
  { kind: 'builtin' } | { kind: 'debian'; suite: string } | { kind: 'oci'; reference: string };

export interface SmolfileGuest {
  image: SmolfileImage | null;
  kernel: string | null;
  initrd: string | null;
  cmdline: string;
}

const SUPPORTED_IMAGES =
  '"builtin", "debian:<suite>" such as "debian:bookworm", or an OCI image: a registry reference such as ' +
  '"python:3.12-slim" or "host:port/org/app:tag", or oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE';

/**
 * Why a relative host path cannot be used, or null: a Smolfile given as text with no directory (`dir` null) has
 * nothing to resolve it from (docs/smolfile.md, "A Smolfile as text").
 */
export function relativeRefused(given: string, dir: string | null): string | null {
  if (dir !== null || path.isAbsolute(given)) return null;
  return (
    `${JSON.stringify(given)} is a relative path, and this Smolfile was given as text with no directory to start ` +
    'it from: write an absolute path on the engine’s machine, or give the directory relative paths start from'
  );
}

function readImage(problems: ProblemList, value: unknown, dir: string | null): SmolfileImage | undefined {
  if (typeof value !== 'string') return expected(problems, ['image'], SUPPORTED_IMAGES, value);
  if (value === 'builtin') return { kind: 'builtin' };
  const debian = /^debian:([a-z][a-z0-9-]*)$/.exec(value);
  if (debian?.[1]) return { kind: 'debian', suite: debian[1] };
  const found = describeValue(value, problems.raw(['image']));
  if (/^debian(:|$)/.test(value)) {
    problems.error(
      ['image'],
      `\`image\`: expected "debian:<suite>", found ${found} (a Debian suite is a lower-case name such as ` +
        'bookworm, trixie or stable)',
    );
    return undefined;
  }
  const local = /^(oci|oci-archive|docker-archive):(.*)$/s.exec(value)?.[2];
  const refused = local === undefined ? null : relativeRefused(local, dir);
  if (refused) {
    problems.error(['image'], `\`image\`: ${refused}`);
    return undefined;
  }
  let reference;
  try {
    reference = parseReference(value, dir ?? '/');
  } catch (err) {
    problems.error(['image'], `\`image\`: ${(err as Error).message} (expected ${SUPPORTED_IMAGES})`);
    return undefined;
  }
  if (reference.transport !== 'registry' && !existsSync(reference.path)) {
    const relative = path.isAbsolute(value.slice(value.indexOf(':') + 1))
      ? ''
      : ` (relative paths start from the Smolfile's directory, ${dir})`;
    problems.error(
      ['image'],
      `\`image\`: ${reference.transport}: no such ${reference.transport === 'oci' ? 'directory' : 'file'} ${reference.path}${relative}`,
    );
    return undefined;
  }
  return { kind: 'oci', reference: reference.canonical };
}

/** A host file named relative to the Smolfile's directory; it must be a readable regular file. */
function readHostFile(problems: ProblemList, key: string, value: unknown, dir: string | null): string | undefined {
  const given = readString(problems, [key], value, 'a file path');
  if (given === undefined) return undefined;
  if (given === '') return expected(problems, [key], 'a file path', value);
  const fail = (why: string) => {
    problems.error([key], `\`${key}\`: ${why}`);
    return undefined;
  };
  const refused = relativeRefused(given, dir);
  if (refused) return fail(refused);
  const resolved = path.resolve(dir ?? '/', given);
  try {
    if (!statSync(resolved).isFile()) return fail(`${resolved} is not a regular file`);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') return fail(`cannot use ${resolved}: ${code ?? String(err)}`);
    const relative = path.isAbsolute(given) ? '' : ` (relative paths start from the Smolfile's directory, ${dir})`;
    const tilde = given.startsWith('~') ? '; ~ is not expanded' : '';
    return fail(`no such file: ${resolved}${relative}${tilde}`);
  }
  try {
    accessSync(resolved, constants.R_OK);
  } catch {
    return fail(`${resolved} is not readable by this user`);
  }
  return resolved;
}

function readCmdline(problems: ProblemList, value: unknown): string | undefined {
  const cmdline = readString(problems, ['cmdline'], value);
  if (cmdline === undefined) return undefined;
  if (cmdline.includes('\0')) return expected(problems, ['cmdline'], 'a command line without NUL characters', value);
  const bytes = Buffer.byteLength(cmdline);
  if (bytes > VM_LIMITS.cmdlineMaxBytes) {
    problems.error(['cmdline'], `\`cmdline\`: expected at most ${VM_LIMITS.cmdlineMaxBytes} bytes, found ${bytes}`);
    return undefined;
  }
  return cmdline;
}

/**
 * No `image` and no `kernel`: the builtin image. `kernel` without `image`: a bare kernel, booted as it is with its
 * `initrd`. `image` with `kernel`: that kernel with the image's root filesystem. An `initrd` goes with a bare kernel
 * only, since every image brings its own.
 */
export function readGuest(problems: ProblemList, document: TomlTable, dir: string | null): SmolfileGuest {
  const image =
    document.image === undefined
      ? document.kernel === undefined
        ? { kind: 'builtin' as const }
        : null
      : readImage(problems, document.image, dir);
  const kernel = document.kernel === undefined ? null : readHostFile(problems, 'kernel', document.kernel, dir);
  const initrd = document.initrd === undefined ? null : readHostFile(problems, 'initrd', document.initrd, dir);
  if (document.initrd !== undefined && document.kernel === undefined) {
    problems.error(
      ['initrd'],
      '`initrd` needs a `kernel` to boot with: an initrd is for a bare kernel (`kernel` and `initrd`, no `image`)',
    );
  } else if (document.initrd !== undefined && document.image !== undefined) {
    problems.error(
      ['initrd'],
      '`initrd` is for a bare kernel (`kernel` and no `image`); an image brings its own root filesystem, ' +
        'so remove `image` or `initrd`',
    );
  }
  const cmdline = document.cmdline === undefined ? '' : readCmdline(problems, document.cmdline);
  // When any of these failed, the problems say so and the caller discards the result; the fallbacks only keep the
  // type simple.
  return { image: image ?? null, kernel: kernel ?? null, initrd: initrd ?? null, cmdline: cmdline ?? '' };
}
