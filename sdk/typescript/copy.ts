// Copying files and directories into and out of a VM's guest (`smol cp`, `Smol.copyIn`/`copyOut`; docs/images.md,
// "smol cp"): a tar stream through the agent's exec (the engine's exec WebSocket), with docker cp's rules for where
// things land. The guest's side is busybox tar: /.smol/busybox in an OCI image, busybox or tar otherwise. Owners
// (numeric), modes, times, symbolic and hard links are kept; what comes out of a guest is written with the same care
// as an image layer (src/guest-build/oci-layers.ts): nothing outside the destination's directory.
import { lstatSync, readdirSync, readlinkSync, createReadStream, statSync } from 'node:fs';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { pack, type Header } from 'tar-stream';
import { LayerTree } from '../../src/guest-build/oci-layers.js';
import type { Smol } from './smol.js';

export interface CopyResult {
  /** Entries (files, directories, links) copied, and bytes of file data. */
  entries: number;
  bytes: number;
}

const quoteless = (s: string) => !s.includes('\0');

/** As docker cp: root in the guest, whatever user the image's commands run as (owners come from the tar). */
const AS_ROOT = { user: '0' } as const;

/** How to run busybox's sh and tar in the guest: /.smol/busybox (an OCI image), else busybox, else sh and tar. */
async function guestTools(smol: Smol, vm: string): Promise<{ sh: string[]; tar: string }> {
  for (const busybox of ['/.smol/busybox', 'busybox']) {
    try {
      if ((await smol.exec(vm, [busybox, 'true'], AS_ROOT)).exitCode === 0)
        return { sh: [busybox, 'sh'], tar: `${busybox} tar` };
    } catch {
      // not there: the next
    }
  }
  return { sh: ['sh'], tar: 'tar' };
}

async function guestIsDirectory(smol: Smol, vm: string, sh: string[], guestPath: string): Promise<boolean> {
  const result = await smol.exec(vm, [...sh, '-c', '[ -d "$1" ]', 'sh', guestPath], AS_ROOT);
  return result.exitCode === 0;
}

function failed(what: string, result: { exitCode: number | null; signal: string | null; stderr: Buffer }): Error {
  const status = result.exitCode !== null ? `exit status ${result.exitCode}` : `signal ${result.signal}`;
  return new Error(`${what}: ${result.stderr.toString('utf8').trim() || status}`);
}

/** A tar of host `source` (a file or a directory, recursively) whose top entry is named `name`. */
export function packTree(source: string, name: string, counts: CopyResult): Readable {
  const archive = pack();
  const links = new Map<string, string>();
  const add = (header: Header | (Partial<Header> & { name: string }), body?: () => Readable) =>
    new Promise<void>((resolve, reject) => {
      const cb = (err?: Error | null) => (err ? reject(err) : resolve());
      if (!body) return archive.entry(header, cb);
      const sink = archive.entry(header, cb);
      const source = body();
      source.on('error', reject);
      source.pipe(sink as unknown as NodeJS.WritableStream);
    });
  const walk = async (file: string, entry: string) => {
    const stats = lstatSync(file);
    const header = {
      name: entry,
      mode: stats.mode & 0o7777,
      uid: stats.uid,
      gid: stats.gid,
      mtime: stats.mtime,
      uname: '',
      gname: '',
    };
    counts.entries++;
    if (stats.isDirectory()) {
      await add({ ...header, name: `${entry}/`, type: 'directory' });
      for (const child of readdirSync(file).sort()) await walk(path.join(file, child), `${entry}/${child}`);
    } else if (stats.isSymbolicLink()) {
      await add({ ...header, type: 'symlink', linkname: readlinkSync(file) });
    } else if (stats.isFile()) {
      const inode = `${stats.dev}:${stats.ino}`;
      const first = stats.nlink > 1 ? links.get(inode) : undefined;
      if (first !== undefined) return add({ ...header, type: 'link', linkname: first });
      if (stats.nlink > 1) links.set(inode, entry);
      counts.bytes += stats.size;
      await add({ ...header, type: 'file', size: stats.size }, () => createReadStream(file));
    } else counts.entries--; // sockets, FIFOs, devices: not copied
  };
  walk(source, name).then(
    () => archive.finalize(),
    (err: Error) => archive.destroy(err),
  );
  return archive as unknown as Readable;
}

/**
 * Copies host `source` into the guest at `target`, as `docker cp` does: into an existing directory `target` as
 * `target/<basename>`, else as `target` itself (its directory made).
 */
export async function copyIn(smol: Smol, vm: string, source: string, target: string): Promise<CopyResult> {
  if (!path.posix.isAbsolute(target) || !quoteless(target))
    throw new Error(`${vm}:${target}: a guest path is absolute`);
  try {
    lstatSync(source);
  } catch {
    throw new Error(`${source}: no such file or directory`);
  }
  const { sh, tar } = await guestTools(smol, vm);
  const into = await guestIsDirectory(smol, vm, sh, target);
  const dir = into ? target : path.posix.dirname(target);
  const name = into ? path.basename(path.resolve(source)) : path.posix.basename(target);
  const counts: CopyResult = { entries: 0, bytes: 0 };
  const stream = packTree(source, name, counts);
  const script = `mkdir -p "$1" && cd "$1" && exec ${tar} -x -f -`;
  const result = await smol.exec(vm, [...sh, '-c', script, 'sh', dir], { ...AS_ROOT, stdin: stream });
  if (result.exitCode !== 0) throw failed(`copying ${source} to ${vm}:${target}`, result);
  return counts;
}

/**
 * Copies the guest's `source` to host `target`, as `docker cp` does: into an existing directory `target` as
 * `target/<basename>`, else as `target`. Owners are kept when this runs as root.
 */
export async function copyOut(smol: Smol, vm: string, source: string, target: string): Promise<CopyResult> {
  if (!path.posix.isAbsolute(source) || !quoteless(source))
    throw new Error(`${vm}:${source}: a guest path is absolute`);
  const { sh, tar } = await guestTools(smol, vm);
  const resolved = path.resolve(target);
  const into = statSync(resolved, { throwIfNoEntry: false })?.isDirectory() ?? false;
  const dir = into ? resolved : path.dirname(resolved);
  const name = into ? path.posix.basename(source) : path.basename(resolved);
  const from = path.posix.basename(source);
  const data = new PassThrough({ highWaterMark: 1 << 20 });
  const tree = new LayerTree(dir, { whiteouts: false });
  const rename = (parts: string[]) => (parts[0] === from ? [name, ...parts.slice(1)] : ['', ...parts]);
  const applying = tree.apply(data, `${vm}:${source}`, (parts) => {
    const renamed = rename(parts);
    if (renamed[0] === '')
      throw new Error(`${vm}:${source}: the guest's tar has ${parts.join('/')}, outside what was asked`);
    return renamed;
  });
  applying.catch(() => undefined);
  const stderr: Buffer[] = [];
  const script = `cd "$1" && exec ${tar} -c -f - "$2"`;
  const exit = await smol.api.exec(
    vm,
    { argv: [...sh, '-c', script, 'sh', path.posix.dirname(source), from], ...AS_ROOT },
    { onStdout: (chunk) => data.write(chunk), onStderr: (chunk) => stderr.push(chunk) },
  ).exit;
  data.end();
  if (exit.exitCode !== 0) {
    await applying.catch(() => undefined);
    throw failed(`copying ${vm}:${source} to ${target}`, { ...exit, stderr: Buffer.concat(stderr) });
  }
  await applying;
  return { entries: tree.stats.entries, bytes: tree.stats.bytes };
}
