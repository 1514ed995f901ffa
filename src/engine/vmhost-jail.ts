// The vmhost's namespaces (docs/security.md, "The jail's mount table"): what a vmhost's root shows, and whether this
// host lets the engine start vmhosts in mount and PID namespaces of their own. The engine starts each vmhost through
// our launcher, native/launcher/smol-jail.c (mount and PID namespaces, --user when the engine is not root, --net when
// the episode's VMs have no network); the vmhost is then the first process of its PID namespace, and before anything else jailLockdown (native/vmm/jail.c) builds
// a tmpfs root holding only these paths and pivots into it. Firecracker's jailer does the same with a chroot.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readlinkSync, realpathSync } from 'node:fs';
import path from 'node:path';
import type { JailBind } from '../vmm/native.js';
import { findGuestAssets } from '../guest-build/guest-assets.js';
import { parseSmolfile } from '../smolfile/smolfile.js';
import { packageRoot } from '../package-root.js';
import { DISKS_DIR } from './disk-layers.js';
import type { VmHostJailPlan } from './vmhost-launcher.js';

/** What a vmhost is started in; `namespaces` false says why in `reason`. */
export interface JailSupport {
  namespaces: boolean;
  /** The engine is not root: a user namespace maps it to root inside (its uid outside). */
  userNamespace: boolean;
  reason: string | null;
  /** The launcher's arguments before `--` and the vmhost's command (without --net: that one is per episode). */
  launcherArgs: string[];
  launcher: string | null;
  /** The engine's mount namespace (/proc/self/ns/mnt): a vmhost still in it refuses to mount anything. */
  hostMntNs: string;
}

/** The launcher, built by `make -C native` (npm run build:native); packaged with native/out. */
export const LAUNCHER = path.join(packageRoot, 'native', 'out', 'launcher', 'smol-jail');

function probe(env: NodeJS.ProcessEnv): JailSupport {
  const hostMntNs = readMntNs();
  const userNamespace = process.geteuid?.() !== 0;
  const launcherArgs = userNamespace ? ['--user'] : [];
  const off = (reason: string, launcher: string | null = null): JailSupport => ({
    namespaces: false,
    userNamespace,
    reason,
    launcherArgs,
    launcher,
    hostMntNs,
  });
  if (env.SMOL_JAIL === '0') return off('SMOL_JAIL=0 turns the jail off');
  if (env.SMOL_JAIL_NAMESPACES === '0') return off('SMOL_JAIL_NAMESPACES=0 turns the namespaces off');
  if (!existsSync(LAUNCHER)) return off(`no launcher at ${LAUNCHER} (build it: make -C native launcher)`);
  // The same namespaces as a vmhost gets (an empty network one too), around a program that only exits: the kernel's
  // answer, not a guess.
  const tried = spawnSync(LAUNCHER, [...launcherArgs, '--net', '--', '/bin/true'], {
    encoding: 'utf8',
    timeout: 10_000,
  });
  if (tried.status !== 0) {
    const said = (tried.stderr || tried.error?.message || `exit ${tried.status ?? tried.signal}`).trim();
    const hint = userNamespace
      ? ' (an ordinary user needs user namespaces: sysctl kernel.unprivileged_userns_clone=1, or ' +
        'user.max_user_namespaces above 0)'
      : '';
    return off(`the kernel refused new namespaces: ${said}${hint}`, LAUNCHER);
  }
  return { namespaces: true, userNamespace, reason: null, launcherArgs, launcher: LAUNCHER, hostMntNs };
}

function readMntNs(): string {
  try {
    return readlinkSync('/proc/self/ns/mnt');
  } catch {
    return '';
  }
}

let cached: JailSupport | null = null;

/** Whether vmhosts get namespaces here (probed once per process). */
export function jailSupport(env: NodeJS.ProcessEnv = process.env): JailSupport {
  if (!cached || env !== process.env) {
    const found = probe(env);
    if (env !== process.env) return found;
    cached = found;
  }
  return cached;
}

/** The devices a vmhost opens: KVM, and what glibc, libuv and OpenSSL's seeding read. */
const DEVICES = ['/dev/kvm', '/dev/null', '/dev/zero', '/dev/urandom', '/dev/random'];

/**
 * Host files a vmhost reads after it has started (measured with strace over the VMM and engine tests): glibc's
 * malloc counts CPUs in /sys/devices/system/cpu/online when it makes an arena; libslirp forwards the guest's DNS to
 * the servers in /etc/resolv.conf.
 */
const HOST_FILES = ['/sys/devices/system/cpu', '/etc/resolv.conf'];

/**
 * An episode's own directory of run/: its VMs' vsock muxer sockets and network configs, and a diff's exported disks.
 * A vmhost's root shows this one and no other: another episode's vsock socket would reach its guest's agent.
 */
export function episodeRunDir(home: string, episode: string): string {
  return path.join(home, 'run', episode);
}

/**
 * Every path the vmhost of `episode` may open, each where it is on the host: the store's directories it writes
 * (snapshots, the disk layers), its episode's run/ directory (episodeRunDir), the base images it reads, and `files`
 * (the Smolfile's kernel and initrd, read-only). Nothing else of SMOL_HOME (engine.json, engine.sock, the episode
 * records, consoles, machines, exports, other episodes' sockets) and nothing else of the host.
 */
export function vmhostBinds(home: string, episode: string, files: readonly string[] = []): JailBind[] {
  const store: JailBind[] = [
    { path: path.join(home, 'snapshots'), write: true },
    { path: path.join(home, DISKS_DIR), write: true },
    { path: episodeRunDir(home, episode), write: true },
    { path: path.join(home, 'images') },
    ...files.filter((file) => path.isAbsolute(file)).map((file) => ({ path: file })),
  ];
  // The store hands out paths as given and as resolved (its disks directory is a realpath): both are shown.
  const resolved = store.flatMap((bind) => {
    const real = realOrNull(bind.path);
    return real && real !== bind.path ? [{ ...bind, path: real }] : [];
  });
  const seen = new Set<string>();
  return [
    ...DEVICES.map((file) => ({ path: file, write: true, device: true })),
    ...HOST_FILES.map((file) => ({ path: file })),
    ...store,
    ...resolved,
  ].filter((bind) => !seen.has(bind.path) && seen.add(bind.path));
}

function realOrNull(file: string): string | null {
  try {
    return realpathSync(file);
  } catch {
    return null;
  }
}

/**
 * The jail plan of an episode's vmhost: the store's directories and the episode's run/ directory (made now if
 * missing: a path not there when the vmhost starts is not in its root) and the Smolfile's kernel and initrd, or the
 * guest kernel an image boots; and an empty network namespace when the Smolfile gives its VMs no network.
 */
export function vmhostJailPlan(
  home: string,
  episode: string,
  smolfile: { path: string; text: string },
  env: NodeJS.ProcessEnv = process.env,
): VmHostJailPlan {
  for (const dir of ['snapshots', DISKS_DIR, 'images']) mkdirSync(path.join(home, dir), { recursive: true });
  const runDir = episodeRunDir(home, episode);
  mkdirSync(runDir, { recursive: true, mode: 0o700 });
  const parsed = parseSmolfile(smolfile.text, { path: smolfile.path }).smolfile;
  const files: string[] = [];
  if (parsed?.kernel) files.push(parsed.kernel);
  if (parsed?.initrd) files.push(parsed.initrd);
  if (parsed?.image && !parsed.kernel) {
    const assets = findGuestAssets(env);
    if (assets.kernel) files.push(assets.kernel);
  }
  // VMs without a network device open no host socket but the Unix ones (the IPC channel, vsock's sockets in run/),
  // which a network namespace does not separate: such a vmhost gets an empty one. libslirp needs the host's.
  const network = !parsed || parsed.network.enabled || parsed.network.ports.length > 0;
  return { binds: vmhostBinds(home, episode, files), emptyNetwork: !network, runDir };
}
