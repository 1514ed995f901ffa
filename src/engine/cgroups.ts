// What this host's cgroups allow the engine (docs/security.md, "Limits"): which version is in use, which of the
// controllers the vmhost limits need it has, and where smol's own cgroups go — a `smol` directory under the engine's
// own cgroup in each hierarchy, or under SMOL_CGROUP_ROOT. Firecracker's jailer finds its hierarchies the same way
// (cgroup.rs: /proc/mounts for the mount points, one per v1 controller, the unified one for v2). Nothing here fails
// a VM: an engine that may not create cgroups runs its VMs without limits and says why (`smol doctor`, the VM's
// record).
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pidAlive } from '../pid-alive.js';

/** The controllers the limits use: memory (the cap, the OOM count), cpu (the quota), pids; cpuacct on v1 (usage). */
export const LIMIT_CONTROLLERS = ['memory', 'cpu', 'pids'] as const;
export type Controller = (typeof LIMIT_CONTROLLERS)[number] | 'cpuacct';

export interface CgroupLayout {
  version: 1 | 2;
  /** The directory smol's cgroups go under, per controller (v2: the same one for all). */
  parents: Partial<Record<Controller, string>>;
  /** The engine made those directories (`smol` under its own cgroup) and removes them when empty; not a configured root. */
  ownsParents: boolean;
}

export interface CgroupSupport {
  /** The version the engine uses (null: no cgroup hierarchy with a memory controller is mounted). */
  version: 1 | 2 | null;
  /** The controllers available where smol's cgroups go. */
  controllers: string[];
  /** Where they go (the memory hierarchy's directory), when known. */
  root: string | null;
  /** Set when the engine can create its cgroups there. */
  layout: CgroupLayout | null;
  /** Why not, when it cannot. */
  reason: string | null;
}

interface Mount {
  /** The cgroup path the mount shows at its mount point (mountinfo's root field). */
  root: string;
  dir: string;
  type: 'cgroup' | 'cgroup2';
  options: string[];
}

export interface CgroupSources {
  mountinfo: string;
  /** /proc/self/cgroup */
  self: string;
  /** A cgroup path ("/smol.slice") to put smol's cgroups under instead of the engine's own cgroup. */
  configuredRoot?: string | undefined;
}

function readSources(env: NodeJS.ProcessEnv): CgroupSources {
  return {
    mountinfo: readFileSync('/proc/self/mountinfo', 'utf8'),
    self: readFileSync('/proc/self/cgroup', 'utf8'),
    configuredRoot: env.SMOL_CGROUP_ROOT || undefined,
  };
}

function parseMounts(mountinfo: string): Mount[] {
  const mounts: Mount[] = [];
  for (const line of mountinfo.split('\n')) {
    const [before, after] = line.split(' - ');
    if (!before || !after) continue;
    const fields = before.split(' ');
    const [type, , superOptions = ''] = after.split(' ');
    if (type !== 'cgroup' && type !== 'cgroup2') continue;
    mounts.push({ root: fields[3] ?? '/', dir: fields[4] ?? '', type, options: superOptions.split(',') });
  }
  return mounts;
}

/** The engine's own cgroup path per v1 controller ("memory" → "/a/b"), and under "" its v2 one. */
function parseSelf(self: string): Map<string, string> {
  const own = new Map<string, string>();
  for (const line of self.split('\n')) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!match) continue;
    for (const controller of match[1]!.split(',')) own.set(controller, match[2]!);
  }
  return own;
}

/** The directory of cgroup `cgroupPath` in `mount`, or null when the mount does not show it. */
function dirIn(mount: Mount, cgroupPath: string): string | null {
  const relative = path.posix.relative(mount.root, cgroupPath);
  if (relative.startsWith('..')) return null;
  return path.join(mount.dir, relative);
}

function readQuiet(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function errorText(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  return e.code ? `${e.code}` : e.message;
}

/** The v1 layout: per controller, its hierarchy's mount and the engine's cgroup there, plus `smol`. */
function v1Layout(mounts: Mount[], own: Map<string, string>, configured?: string): CgroupSupport {
  const parents: Partial<Record<Controller, string>> = {};
  const controllers: string[] = [];
  for (const controller of [...LIMIT_CONTROLLERS, 'cpuacct'] as const) {
    const mount = mounts.find((m) => m.type === 'cgroup' && m.options.includes(controller));
    const ownPath = own.get(controller);
    if (!mount || ownPath === undefined) continue;
    const dir = dirIn(mount, configured ?? path.posix.join(ownPath, 'smol'));
    if (!dir) continue;
    parents[controller] = dir;
    controllers.push(controller);
  }
  return {
    version: 1,
    controllers,
    root: parents.memory ?? null,
    layout: { version: 1, parents, ownsParents: !configured },
    reason: null,
  };
}

/** The v2 layout: the unified hierarchy, with the controllers enabled down to smol's directory. */
function v2Layout(mount: Mount, own: Map<string, string>, configured?: string): CgroupSupport {
  const ownPath = own.get('') ?? '/';
  const parentPath = configured ?? path.posix.join(ownPath, 'smol');
  const dir = dirIn(mount, parentPath);
  const ownDir = dirIn(mount, ownPath);
  const available = (readQuiet(path.join(ownDir ?? mount.dir, 'cgroup.controllers')) ?? '').trim().split(/\s+/);
  const controllers = LIMIT_CONTROLLERS.filter((c) => available.includes(c));
  const support: CgroupSupport = { version: 2, controllers, root: dir, layout: null, reason: null };
  if (!dir) return { ...support, reason: `the cgroup ${parentPath} is outside the mounted hierarchy ${mount.dir}` };
  const parents = Object.fromEntries(controllers.map((c) => [c, dir]));
  return { ...support, layout: { version: 2, parents, ownsParents: !configured } };
}

/** What the host's cgroups offer, from the mount table and this process's cgroup (no directory is created). */
export function describeCgroups(sources: CgroupSources): CgroupSupport {
  const mounts = parseMounts(sources.mountinfo);
  const own = parseSelf(sources.self);
  const configured = sources.configuredRoot;
  if (configured !== undefined && !configured.startsWith('/'))
    return {
      version: null,
      controllers: [],
      root: null,
      layout: null,
      reason: `SMOL_CGROUP_ROOT must be a cgroup path starting with /, not ${JSON.stringify(configured)}`,
    };
  // A v1 memory hierarchy wins (a hybrid host mounts an empty unified one beside it, as this build machine does).
  if (mounts.some((m) => m.type === 'cgroup' && m.options.includes('memory'))) {
    const support = v1Layout(mounts, own, configured);
    return support.layout?.parents.memory ? support : { ...support, layout: null, reason: 'no memory hierarchy' };
  }
  const unified = mounts.find((m) => m.type === 'cgroup2');
  if (!unified)
    return { version: null, controllers: [], root: null, layout: null, reason: 'no cgroup hierarchy is mounted' };
  const support = v2Layout(unified, own, configured);
  if (!support.controllers.includes('memory'))
    return { ...support, layout: null, reason: `the memory controller is not available in ${support.root}` };
  return support;
}

/**
 * Makes smol's parent directories (and, on v2, enables the controllers in the engine's cgroup and in smol's) so
 * that vmhost cgroups can be made under them; throws, saying where and why, when it cannot.
 */
export function prepareParents(layout: CgroupLayout): void {
  for (const [controller, dir] of Object.entries(layout.parents)) {
    // A configured root is the administrator's (delegated, controllers enabled): used as it is, never made.
    if (!layout.ownsParents) {
      if (!existsSync(dir)) throw new Error(`SMOL_CGROUP_ROOT has no ${controller} cgroup ${dir}`);
      continue;
    }
    try {
      mkdirSync(dir, { recursive: true });
    } catch (error) {
      throw new Error(`cannot create the ${controller} cgroup ${dir} (${errorText(error)})`);
    }
  }
  if (layout.version !== 2) return;
  const dir = layout.parents.memory!;
  const enable = Object.keys(layout.parents)
    .map((c) => `+${c}`)
    .join(' ');
  // v2's rule: only a cgroup without processes of its own may give its children controllers (the root is exempt).
  for (const at of layout.ownsParents ? [path.dirname(dir), dir] : [dir]) {
    const enabled = (readQuiet(path.join(at, 'cgroup.subtree_control')) ?? '').trim().split(/\s+/);
    if (Object.keys(layout.parents).every((c) => enabled.includes(c))) continue;
    try {
      writeFileSync(path.join(at, 'cgroup.subtree_control'), enable);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const why =
        code === 'EBUSY'
          ? `it holds processes, and cgroup v2 lets only a cgroup without processes give its children controllers; ` +
            `set SMOL_CGROUP_ROOT to a delegated cgroup`
          : errorText(error);
      throw new Error(`cannot enable ${enable} in ${at} (${why})`);
    }
  }
}

/** What a host allows, for `smol doctor`: the description, and whether a probe cgroup can be made and removed. */
export function probeCgroups(env: NodeJS.ProcessEnv = process.env): CgroupSupport {
  let support: CgroupSupport;
  try {
    support = describeCgroups(readSources(env));
  } catch (error) {
    return { version: null, controllers: [], root: null, layout: null, reason: (error as Error).message };
  }
  if (!support.layout) return support;
  try {
    prepareParents(support.layout);
    const made: string[] = [];
    try {
      for (const dir of new Set(Object.values(support.layout.parents))) {
        const probe = path.join(dir, `probe-${process.pid}`);
        mkdirSync(probe);
        made.push(probe);
      }
    } finally {
      for (const probe of made) rmdirSync(probe);
      removeParents(support.layout);
    }
    return support;
  } catch (error) {
    return { ...support, layout: null, reason: (error as Error).message };
  }
}

/** The engine's cgroup layout, or why there is none (read once per engine). */
export function engineCgroups(env: NodeJS.ProcessEnv = process.env): CgroupSupport {
  if (env.SMOL_CGROUPS === '0')
    return { version: null, controllers: [], root: null, layout: null, reason: 'turned off (SMOL_CGROUPS=0)' };
  try {
    const support = describeCgroups(readSources(env));
    if (support.layout) {
      sweepStale(support.layout);
      prepareParents(support.layout);
    }
    return support;
  } catch (error) {
    return { version: null, controllers: [], root: null, layout: null, reason: (error as Error).message };
  }
}

/**
 * Removes the vmhost cgroups (`<engine pid>-<episode>`) of engines that are gone: an engine killed outright (SIGKILL,
 * a crash) cannot remove its own. Only empty cgroups can be removed, so a live process is never touched; `engine`
 * limits it to that engine's (the test harness, after killing one).
 */
export function sweepStale(layout: CgroupLayout, engine?: number): void {
  for (const dir of new Set(Object.values(layout.parents))) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      const owner = /^(\d+)-/.exec(name)?.[1];
      if (!owner || (engine !== undefined ? Number(owner) !== engine : pidAlive(Number(owner)))) continue;
      try {
        rmdirSync(path.join(dir, name));
      } catch {
        // still has a process, or gone
      }
    }
  }
}

/** Removes smol's parent directories where they are empty (another engine's vmhosts keep theirs). */
export function removeParents(layout: CgroupLayout): void {
  if (!layout.ownsParents) return;
  for (const dir of new Set(Object.values(layout.parents))) {
    try {
      rmdirSync(dir);
    } catch {
      // not empty (another engine's cgroups), or gone
    }
  }
}

/**
 * Removes what engine `engine` (killed outright, as the test harness does) left: its vmhosts' empty cgroups and the
 * `smol` parents if nothing else is in them. Returns the directories still there (a vmhost not yet reaped).
 */
export function sweepEngine(engine: number, env: NodeJS.ProcessEnv = process.env): string[] {
  const { layout } = describeCgroups(readSources(env));
  if (!layout) return [];
  sweepStale(layout, engine);
  const left = [...new Set(Object.values(layout.parents))].flatMap((dir) => {
    try {
      return readdirSync(dir)
        .filter((name) => name.startsWith(`${engine}-`))
        .map((name) => path.join(dir, name));
    } catch {
      return [];
    }
  });
  removeParents(layout);
  return left;
}
