// A containerd of the test's own (Debian's `containerd` and `ctr`): its root, state, config and sockets in a temp
// dir, never the system's, the smol shim (npm run build:shim) first on its PATH and the engine's data dir in its
// environment, as a node's containerd has them (docs/kubernetes.md). The native snapshotter: it needs no overlay
// module (the KVM lab's kernel has none loaded) and the smol runtime does not run the rootfs anyway.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  accessSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { root, type SmolResult } from '../engine/engine-home.js';

export const SHIM = path.join(root, 'shim', 'bin', 'containerd-shim-smol-v2');
export const RUNTIME = 'io.containerd.smol.v2';
const NAMESPACE = 'smol-test';

export class Containerd {
  readonly socket: string;
  readonly #process: ChildProcess;
  readonly #log: string;

  readonly #unmount: string | null;

  private constructor(
    readonly dir: string,
    process: ChildProcess,
    log: string,
    unmount: string | null,
  ) {
    this.socket = path.join(dir, 'containerd.sock');
    this.#process = process;
    this.#log = log;
    this.#unmount = unmount;
  }

  /** Starts containerd in `dir` for the engine of `smolHome`; resolves once ctr reaches it. */
  static async start(dir: string, smolHome: string): Promise<Containerd> {
    for (const binary of ['/usr/bin/containerd', '/usr/bin/ctr']) {
      if (!existsSync(binary)) throw new Error(`${binary} is missing: apt-get install containerd`);
    }
    if (!existsSync(SHIM)) throw new Error(`${SHIM} is missing: run npm run build:shim`);
    mkdirSync(dir, { recursive: true });
    const unmount = socketRootInLab();
    const config = path.join(dir, 'config.toml');
    writeFileSync(
      config,
      [
        'version = 2',
        `root = ${JSON.stringify(path.join(dir, 'root'))}`,
        `state = ${JSON.stringify(path.join(dir, 'state'))}`,
        // Kubernetes' plugin needs CNI and more; ctr does not.
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        '[grpc]',
        `  address = ${JSON.stringify(path.join(dir, 'containerd.sock'))}`,
        '[ttrpc]',
        `  address = ${JSON.stringify(path.join(dir, 'containerd.sock.ttrpc'))}`,
        '',
      ].join('\n'),
    );
    const log = path.join(dir, 'containerd.log');
    const env = { ...process.env, SMOL_HOME: smolHome, PATH: `${path.dirname(SHIM)}:${process.env.PATH}` };
    const out = openSync(log, 'a');
    const child = spawn('/usr/bin/containerd', ['--config', config], { env, stdio: ['ignore', out, out] });
    const containerd = new Containerd(dir, child, log, unmount);
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`containerd exited ${child.exitCode}:\n${containerd.logTail()}`);
      if ((await containerd.ctr(['version'])).status === 0) return containerd;
      if (Date.now() > deadline) throw new Error(`containerd did not answer in 60 s:\n${containerd.logTail()}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /** Runs `ctr ARGS` against this containerd, in the test's namespace. */
  ctr(args: string[], { timeoutMs = 120_000 } = {}): Promise<SmolResult> {
    return new Promise((resolve, reject) => {
      const child = this.spawnCtr(args, timeoutMs);
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('error', reject);
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });
  }

  /** `ctr ARGS` as a child of the caller's, its stdin closed. */
  spawnCtr(args: string[], timeoutMs = 600_000): ChildProcess {
    return spawn('/usr/bin/ctr', ['--address', this.socket, '--namespace', NAMESPACE, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: timeoutMs,
    });
  }

  logTail(lines = 40): string {
    try {
      return readFileSync(this.#log, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no containerd.log)';
    }
  }

  /** The shims this containerd started: the processes working in its state dir (each in a bundle there). */
  shimPids(): number[] {
    const state = path.join(this.dir, 'state') + path.sep;
    return readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => {
        try {
          return readlinkSync(`/proc/${pid}/cwd`).startsWith(state);
        } catch {
          return false;
        }
      })
      .map(Number);
  }

  /** Stops containerd and every shim it started (shims outlive containerd by design). */
  async stop(): Promise<void> {
    const shims = this.shimPids();
    this.#process.kill('SIGTERM');
    await new Promise((resolve) =>
      this.#process.exitCode !== null ? resolve(null) : this.#process.once('exit', resolve),
    );
    for (const pid of shims) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    if (this.#unmount) spawnSync('umount', [this.#unmount]);
  }
}

/**
 * Shims listen under /run/containerd/s/ whatever containerd's own state dir is (containerd 1.6's shim library fixes
 * it). The KVM lab's / is the host's, read-only: there a tmpfs goes over /run/containerd (or /run when the host has
 * no /run/containerd), inside the lab VM only. Answers what to unmount afterwards.
 */
function socketRootInLab(): string | null {
  if (process.env.SMOL_IN_LAB !== '1') return null;
  try {
    accessSync('/run/containerd', constants.W_OK);
    return null;
  } catch {
    // read-only, or missing
  }
  const target = existsSync('/run/containerd') ? '/run/containerd' : '/run';
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'mode=0711', 'tmpfs', target], { encoding: 'utf8' });
  if (mounted.status !== 0) throw new Error(`mount -t tmpfs tmpfs ${target}: ${mounted.stderr}`);
  return target;
}
