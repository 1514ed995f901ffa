// The throwaway sandbox a diff's disk reader runs in (docs/diff.md, "The reader and its sandbox"): guest disks are
// hostile data, so the well-kept tools that read them (e2fsprogs' debugfs, diffutils' diff) run as a child of their
// own in new mount, network, PID, IPC and UTS namespaces (a user namespace too when the engine is not root), in a
// root that is an empty tmpfs holding /usr (read-only), the one disk image (read-only) and the directories the run
// names (read-only, or one writable output directory the engine made empty for this run alone),
// as nobody (mapped root without capabilities in a user namespace) with no_new_privs and an empty bounding set,
// under rlimits (CPU seconds, address space, file size, open files, processes), a wall-clock timeout and a cap on
// what it may print. Whatever the disk makes the reader do, the engine sees an exit status and bounded bytes.
import { spawn } from 'node:child_process';
import { constants, mkdtempSync, rmdirSync } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import path from 'node:path';

/** What the reader may use; each has a default fit for a desktop's disks (docs/diff.md). */
export interface SandboxLimits {
  /** Wall-clock milliseconds before the reader is killed. */
  timeoutMs: number;
  /** CPU seconds (RLIMIT_CPU). */
  cpuSeconds: number;
  /** Address space in bytes (RLIMIT_AS). */
  memoryBytes: number;
  /** Largest file the reader may write into its scratch directory (RLIMIT_FSIZE). */
  fileBytes: number;
  /** Bytes of standard output read; past it the reader is killed. */
  outputBytes: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  timeoutMs: 60_000,
  cpuSeconds: 60,
  memoryBytes: 1024 * 2 ** 20,
  fileBytes: 64 * 2 ** 20,
  outputBytes: 256 * 2 ** 20,
};

/** A host directory shown in the sandbox at `at` (an absolute path of the engine's choosing, never a guest's). */
export interface SandboxMount {
  host: string;
  at: string;
  /**
   * Writable by the reader. Only a directory the engine has just made empty for this one run (freshOutputDir) and
   * reads afterwards only with O_NOFOLLOW: whatever the reader leaves in it is hostile (docs/diff.md).
   */
  writable?: boolean;
}

export interface SandboxRun {
  /** The program and its arguments, as the sandbox sees paths: the image is /disk, the mounts where they say. */
  argv: string[];
  /** The disk image to show read-only at /disk (absent: none). */
  image?: string;
  /** Host directories shown in the sandbox; read-only unless `writable`. */
  mounts: SandboxMount[];
  /**
   * The engine's own scratch directory (0700 above it, never shown to the reader): the sandbox's root is mounted,
   * in the sandbox's mount namespace only, on an empty directory made in it for the run.
   */
  scratch: string;
  limits: SandboxLimits;
}

export interface SandboxResult {
  stdout: Buffer;
  stderr: string;
  /** The exit code, or null when it ended by a signal or was killed. */
  code: number | null;
  /** Why the engine ended it, when it did: "timeout" or "output". */
  killed: 'timeout' | 'output' | null;
}

/** Thrown when this host cannot make the sandbox (no unshare(1), namespaces refused): nothing is read without it. */
export class SandboxUnavailable extends Error {}

const UNSHARE = '/usr/bin/unshare';
const STDERR_BYTES = 64 * 1024;

/**
 * The script unshare runs as root of the new namespaces: an empty tmpfs root with /usr read-only, the image
 * read-only and the run's mounts, then chroot, drop to nobody without capabilities, rlimits, and exec.
 * Positional parameters: $1 the root's mount point, $2 the image or "", $3 the rlimits, $4 1 when running as nobody,
 * $5 the number of mounts, then per mount its host directory, its path inside and ro or rw, then the command.
 * Nothing of the guest's is interpolated into it.
 */
const SETUP = `set -eu
root=$1 image=$2 limits=$3 drop=$4 n=$5; shift 5
mount --make-rprivate /
mount -t tmpfs -o size=1m,mode=0755,nosuid,nodev smol-reader "$root"
mkdir "$root/usr"
for l in bin lib lib64 sbin; do ln -s usr/$l "$root/$l"; done
mount --rbind /usr "$root/usr"; mount -o remount,bind,ro,nosuid,nodev "$root/usr"
while [ "$n" -gt 0 ]; do
  mkdir -p "$root$2"; mount --bind "$1" "$root$2"; mount -o remount,bind,$3,nosuid,nodev,noexec "$root$2"
  shift 3; n=$((n - 1))
done
if [ -n "$image" ]; then
  : > "$root/disk"; mount --bind "$image" "$root/disk"; mount -o remount,bind,ro,nosuid,nodev,noexec "$root/disk"
fi
mount -o remount,ro,nosuid,nodev "$root"
if [ "$drop" = 1 ]; then who="--reuid=65534 --regid=65534 --clear-groups"; else who=""; fi
exec chroot "$root" /usr/bin/setpriv $who --inh-caps=-all --bounding-set=-all --no-new-privs \\
  /usr/bin/prlimit $limits -- "$@"
`;

/** Runs `run.argv` in the sandbox and gathers what it printed, within the limits. */
export function runSandboxed(run: SandboxRun): Promise<SandboxResult> {
  const asRoot = process.geteuid?.() === 0;
  for (const mount of run.mounts) {
    if (!/^\/[a-z0-9/-]+$/.test(mount.at) || mount.at.split('/').includes('..'))
      throw new Error(`a sandbox mount point must be a plain absolute path: ${mount.at}`);
  }
  const rootDir = mkdtempSync(path.join(run.scratch, 'root-'));
  const { cpuSeconds, memoryBytes, fileBytes } = run.limits;
  const limits = [
    `--cpu=${cpuSeconds}`,
    `--as=${memoryBytes}`,
    `--fsize=${fileBytes}`,
    '--nofile=64',
    '--nproc=64',
    '--core=0',
  ].join(' ');
  const namespaces = [
    ...(asRoot ? [] : ['--user', '--map-root-user']),
    '--mount',
    '--net',
    '--ipc',
    '--uts',
    '--pid',
    '--fork',
    '--kill-child',
  ];
  const args = [
    ...namespaces,
    '--',
    '/bin/sh',
    '-c',
    SETUP,
    'smol-reader',
    rootDir,
    run.image ?? '',
    limits,
    asRoot ? '1' : '0',
    String(run.mounts.length),
    ...run.mounts.flatMap((m) => [m.host, m.at, m.writable ? 'rw' : 'ro']),
    ...run.argv,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(UNSHARE, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: '/usr/bin:/usr/sbin' } });
    const out: Buffer[] = [];
    let outBytes = 0;
    let stderr = '';
    let killed: SandboxResult['killed'] = null;
    const kill = (why: 'timeout' | 'output') => {
      if (killed) return;
      killed = why;
      child.kill('SIGKILL'); // --kill-child: the reader dies with its unshare
    };
    const timer = setTimeout(() => kill('timeout'), run.limits.timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      if (killed) return;
      outBytes += chunk.length;
      if (outBytes > run.limits.outputBytes) return kill('output');
      out.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < STDERR_BYTES) stderr += chunk.toString('utf8').slice(0, STDERR_BYTES - stderr.length);
    });
    child.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      removeRoot(rootDir);
      reject(
        error.code === 'ENOENT'
          ? new SandboxUnavailable(`no ${UNSHARE} (Debian's util-linux): the disk reader has no sandbox`)
          : error,
      );
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      removeRoot(rootDir);
      resolve({ stdout: Buffer.concat(out), stderr, code, killed });
    });
  });
}

/** The root's mount point, empty here (its tmpfs was mounted on it in the sandbox's mount namespace only). */
function removeRoot(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // already gone ('error' and 'close' can both come)
  }
}

/**
 * A directory the reader may write for one run: made here, empty, in the engine's own `scratch` (never shown to
 * the reader, so nothing of a reader's can be at that name), and opened without following links to be made 0777
 * through its descriptor (nobody writes there). Fails when the name exists: no directory is reused across runs.
 */
export async function freshOutputDir(scratch: string, name: string): Promise<string> {
  const dir = path.join(scratch, name);
  await mkdir(dir, { mode: 0o700 });
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    await handle.chmod(0o777);
  } finally {
    await handle.close();
  }
  return dir;
}
