// Applying OCI image layers to a directory tree (docs/images.md, "How an OCI image is made"): each layer's tar in
// order, as the image-spec's layer.md says: whiteouts (`.wh.NAME`) and opaque directories (`.wh..wh..opq`) hide what
// lower layers made, an entry replaces what is at its path (a directory's attributes only, when both are
// directories), owners (when running as root), modes, times, extended attributes, hard links and symbolic links.
//
// No entry writes outside the tree: a name with a `..` component is refused, a leading `/` is dropped (as tar does),
// and every directory on the way to an entry is resolved inside the tree: a symbolic link met on the way is followed
// as the guest would follow it with the tree as its `/` (an absolute target starts from the tree, `..` stops at it),
// never through the host's file system. The entry's own name is never followed: what is there is replaced.
import {
  chmodSync,
  chownSync,
  closeSync,
  lchownSync,
  linkSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeSync,
  type Stats,
} from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { extract, type Header } from 'tar-stream';
import type { Ext4Xattr } from './rootfs-build.js';

/** An entry's data as tar-stream hands it over. */
type EntryData = AsyncIterable<Buffer> & { resume(): unknown };

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';
const MAX_SYMLINK_HOPS = 40;
/** An extended attribute's name: a namespace Linux has, then something. */
const XATTR_NAME = /^(user|trusted|security|system)\.[^\0]+$/;

/** A layer entry that cannot be applied: names the layer and the entry. */
export class LayerEntryError extends Error {
  constructor(layer: string, entry: string, why: string) {
    super(`layer ${layer}: entry ${JSON.stringify(entry)}: ${why}`);
    this.name = 'LayerEntryError';
  }
}

export interface ApplyStats {
  entries: number;
  /** Bytes of regular files written. */
  bytes: number;
  /** Device nodes, FIFOs and sockets left out (a VM's /dev is devtmpfs). */
  skipped: number;
}

/** Splits an entry's name into components: `./a//b/` is a, b; the root is []. Throws on `..`. */
export function entryComponents(name: string, layer: string): string[] {
  if (name.includes('\0')) throw new LayerEntryError(layer, name, 'its name has a NUL byte');
  const parts = name.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) {
    throw new LayerEntryError(layer, name, 'its name has a `..` component, which would reach outside the image');
  }
  return parts;
}

const join = (parts: string[]) => parts.join('/');

/**
 * The tree an image's layers are applied to. One per image: it remembers which directories it has resolved (where
 * each lexical directory path really is, with no symbolic link in it) across layers.
 */
export class LayerTree {
  readonly root: string;
  private readonly owners: boolean;
  /** Lexical directory path (components joined) to the real directory it resolves to; '' is the root. */
  private readonly resolved = new Map<string, string>([['', '']]);
  /** Real paths made by the layer being applied: its whiteouts do not hide them. */
  private made = new Set<string>();
  /**
   * The extended attributes the layers gave, by real path: set into the disk after mke2fs (setExt4Xattrs), never onto
   * the tree, whose file system may refuse them (tmpfs before Linux 6.6 has no user.*; only root may set trusted.*).
   * A hard link shares its source's map, as the inode is shared.
   */
  private readonly attrs = new Map<string, Map<string, Buffer>>();
  readonly stats: ApplyStats = { entries: 0, bytes: 0, skipped: 0 };
  /** Maps entry names (and hard links' targets), component by component, while a tar is applied. */
  private rename: ((parts: string[]) => string[]) | null = null;

  private readonly whiteouts: boolean;

  /**
   * `owners`: give entries their uid and gid (default: when running as root). `whiteouts: false` takes `.wh.` names
   * as the files they are (a plain tar, such as `smol cp` extracts), not as an image layer's deletions.
   */
  constructor(root: string, options: { owners?: boolean; whiteouts?: boolean } = {}) {
    this.root = path.resolve(root);
    this.owners = options.owners ?? process.getuid?.() === 0;
    this.whiteouts = options.whiteouts ?? true;
  }

  private abs(real: string): string {
    return real === '' ? this.root : `${this.root}/${real}`;
  }

  /**
   * Applies one layer (an uncompressed tar stream). `layer` names it in errors (its digest). A truncated or damaged
   * tar fails naming the layer and the last entry read.
   */
  async apply(tar: Readable, layer: string, rename?: (parts: string[]) => string[]): Promise<void> {
    this.rename = rename ?? null;
    this.made = new Set();
    const reader = extract();
    let last = '(none: the first entry)';
    const failed = (err: unknown): never => {
      if (err instanceof LayerEntryError) throw err;
      // A full disk here is not a damaged tar: the caller says what filled up.
      if ((err as NodeJS.ErrnoException).code === 'ENOSPC') throw err;
      const message = (err as Error).message || String(err);
      throw new Error(
        `layer ${layer}: the tar is truncated or damaged after entry ${JSON.stringify(last)}: ${message}`,
        {
          cause: err,
        },
      );
    };
    tar.on('error', (err) => reader.destroy(err));
    tar.pipe(reader);
    try {
      for await (const entry of reader) {
        last = entry.header.name;
        await this.entry(entry.header, entry as unknown as EntryData, layer);
      }
    } catch (err) {
      tar.unpipe(reader);
      tar.destroy();
      failed(err);
    }
  }

  /** The extended attributes of what the layers left, by path relative to the root ('' is the root), sorted. */
  xattrs(): Ext4Xattr[] {
    const out: Ext4Xattr[] = [];
    for (const [real, attrs] of [...this.attrs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      for (const [name, value] of attrs) out.push({ path: real, name, value });
    }
    return out;
  }

  private async entry(header: Header, data: EntryData, layer: string): Promise<void> {
    const name = header.name;
    this.stats.entries++;
    const parts = this.components(name, layer);
    const base = parts.at(-1);
    if (this.whiteouts && base !== undefined && base.startsWith(WHITEOUT)) {
      data.resume();
      const parent = this.resolveDir(parts.slice(0, -1), layer, name, false);
      if (parent === null) return; // nothing below to hide
      if (base === OPAQUE) this.opaque(parent);
      else this.whiteout(parent, base.slice(WHITEOUT.length), layer, name);
      return;
    }
    const type = header.type ?? 'file';
    if (parts.length === 0) {
      data.resume();
      if (type === 'directory') this.attributes('', header, false);
      return;
    }
    const parent = this.resolveDir(parts.slice(0, -1), layer, name, true)!;
    const real = parent === '' ? base! : `${parent}/${base}`;
    const target = this.abs(real);
    const existing = lstatOrNull(target);

    if (type === 'directory') {
      data.resume();
      if (!existing?.isDirectory()) {
        if (existing) this.remove(real, existing);
        mkdirSync(target, { mode: 0o700 });
      }
      this.made.add(real);
      this.resolved.set(join(parts), real);
      this.resolved.set(real, real);
      this.attributes(real, header, false);
      return;
    }
    if (existing) this.remove(real, existing);
    this.made.add(real);
    switch (type) {
      case 'file':
      case 'contiguous-file':
        await this.writeFile(target, data);
        this.attributes(real, header, false);
        return;
      case 'symlink':
        data.resume();
        symlinkSync(header.linkname ?? '', target);
        this.attributes(real, header, true);
        return;
      case 'link': {
        data.resume();
        const linkname = header.linkname ?? '';
        if (linkname.split('/').includes('..')) {
          throw new LayerEntryError(
            layer,
            name,
            `a hard link to ${JSON.stringify(linkname)}, a name with a \`..\` component`,
          );
        }
        const from = this.components(linkname, layer);
        const fromParent = this.resolveDir(from.slice(0, -1), layer, name, false);
        const fromReal =
          fromParent === null || from.length === 0 ? null : join([fromParent, from.at(-1)!].filter(Boolean));
        const source = fromReal === null ? null : lstatOrNull(this.abs(fromReal));
        if (!source || source.isDirectory()) {
          const why = source ? 'which is a directory' : 'which the image does not have (so far)';
          throw new LayerEntryError(layer, name, `a hard link to ${JSON.stringify(linkname)}, ${why}`);
        }
        linkSync(this.abs(fromReal!), target);
        const shared = this.attrs.get(fromReal!);
        if (shared) this.attrs.set(real, shared);
        return;
      }
      default:
        // character and block devices, FIFOs: a VM's /dev is the kernel's devtmpfs, so these are left out.
        data.resume();
        this.made.delete(real);
        this.stats.skipped++;
    }
  }

  private components(name: string, layer: string): string[] {
    const parts = entryComponents(name, layer);
    return this.rename ? this.rename(parts) : parts;
  }

  private async writeFile(target: string, data: EntryData): Promise<void> {
    const fd = openSync(target, 'wx', 0o600);
    try {
      for await (const chunk of data) {
        let done = 0;
        while (done < chunk.length) done += writeSync(fd, chunk, done, chunk.length - done);
        this.stats.bytes += chunk.length;
      }
    } finally {
      closeSync(fd);
    }
  }

  /** Owner (as root), mode and time; xattrs are collected (see `attrs`). */
  private attributes(real: string, header: Header, symlink: boolean): void {
    const target = this.abs(real);
    const uid = header.uid ?? 0;
    const gid = header.gid ?? 0;
    if (this.owners) (symlink ? lchownSync : chownSync)(target, uid, gid);
    // After chown, which clears set-user-ID and set-group-ID bits.
    if (!symlink) chmodSync(target, (header.mode ?? (header.type === 'directory' ? 0o755 : 0o644)) & 0o7777);
    const mtime = header.mtime ?? new Date(0);
    (symlink ? lutimesSync : utimesSync)(target, mtime, mtime);
    const pax = header.pax as Record<string, string> | null | undefined;
    if (!pax) return;
    for (const [key, value] of Object.entries(pax)) {
      if (!key.startsWith('SCHILY.xattr.')) continue;
      const attribute = key.slice('SCHILY.xattr.'.length);
      // As containerd's applier does (the kernel refuses it with ENOTSUP there): left out. A disk has nowhere for it.
      if (!XATTR_NAME.test(attribute)) continue;
      // tar-stream decodes PAX values as UTF-8; an xattr's value is bytes, taken back as they were written.
      let attrs = this.attrs.get(real);
      if (!attrs) this.attrs.set(real, (attrs = new Map()));
      attrs.set(attribute, Buffer.from(value, 'utf8'));
    }
  }

  /**
   * The real directory (relative to the root, no symbolic link in it) that lexical directory `parts` names. Missing
   * directories are made (as a tar extractor makes them) when `create`, else null is returned.
   */
  private resolveDir(parts: string[], layer: string, entry: string, create: boolean): string | null {
    const key = join(parts);
    const known = this.resolved.get(key);
    if (known !== undefined) return known;
    let real = '';
    let hops = 0;
    const pending = [...parts];
    while (pending.length > 0) {
      const part = pending.shift()!;
      if (part === '.' || part === '') continue;
      if (part === '..') {
        real = real.includes('/') ? real.slice(0, real.lastIndexOf('/')) : '';
        continue;
      }
      const next = real === '' ? part : `${real}/${part}`;
      const stats = lstatOrNull(this.abs(next));
      if (stats?.isDirectory()) {
        real = next;
      } else if (stats?.isSymbolicLink()) {
        if (++hops > MAX_SYMLINK_HOPS) throw new LayerEntryError(layer, entry, 'too many levels of symbolic links');
        const link = readlinkSync(this.abs(next));
        // The link as the guest would follow it: from the tree's root when absolute, else from where it is.
        if (link.startsWith('/')) real = '';
        pending.unshift(...link.split('/'));
      } else if (!stats) {
        if (!create) return null;
        mkdirSync(this.abs(next), { mode: 0o755 });
        real = next;
      } else {
        throw new LayerEntryError(layer, entry, `${next} in the image is not a directory`);
      }
    }
    this.resolved.set(key, real);
    return real;
  }

  /** `.wh.NAME`: hides NAME of the layers below (not what this layer made). */
  private whiteout(parent: string, name: string, layer: string, entry: string): void {
    if (name === '' || name === '.' || name === '..' || name.includes('/'))
      throw new LayerEntryError(layer, entry, 'a whiteout of nothing');
    const real = parent === '' ? name : `${parent}/${name}`;
    if (this.made.has(real)) return;
    const stats = lstatOrNull(this.abs(real));
    if (stats) this.remove(real, stats);
  }

  /** `.wh..wh..opq`: hides every child the layers below gave the directory. */
  private opaque(dir: string): void {
    for (const name of readdirSync(this.abs(dir))) {
      const real = dir === '' ? name : `${dir}/${name}`;
      if (this.made.has(real)) continue;
      const stats = lstatOrNull(this.abs(real));
      if (stats) this.remove(real, stats);
    }
  }

  private remove(real: string, stats: Stats): void {
    if (stats.isDirectory()) {
      rmSync(this.abs(real), { recursive: true, force: true });
      for (const key of [...this.attrs.keys()]) if (key.startsWith(`${real}/`)) this.attrs.delete(key);
    } else {
      unlinkSync(this.abs(real));
    }
    this.attrs.delete(real);
    if (stats.isDirectory() || stats.isSymbolicLink()) {
      // Whatever resolved through it resolves differently now.
      for (const [key, value] of this.resolved) {
        if (value === real || value.startsWith(`${real}/`)) this.resolved.delete(key);
      }
      for (const key of [...this.resolved.keys()]) {
        if (key === real || key.startsWith(`${real}/`)) this.resolved.delete(key);
      }
      this.resolved.set('', '');
    }
  }
}

function lstatOrNull(file: string): Stats | null {
  try {
    return lstatSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}
