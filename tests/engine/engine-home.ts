// A throwaway data dir with a real engine in it, driven through the real `smol` CLI and the SDK. Every engine and
// vmhost started in it is gone after `destroy`, whatever happened.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Smol } from '../../sdk/typescript/smol.js';
import { sweepEngine } from '../../src/engine/cgroups.js';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const smolBin = path.join(root, 'bin', 'smol.js');

export interface SmolResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

export class EngineHome {
  readonly dir = mkdtempSync(path.join(tmpdir(), 'smol-home-'));
  readonly #clients: Smol[] = [];

  /** Runs `smol ARGS` with SMOL_HOME set to this data dir. */
  smol(args: string[], options: { input?: string; timeoutMs?: number } = {}): Promise<SmolResult> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [smolBin, ...args], {
        env: { ...process.env, SMOL_HOME: this.dir },
        timeout: options.timeoutMs ?? 120_000,
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('error', reject);
      child.on('close', (status) => resolve({ status, stdout, stderr }));
      child.stdin.end(options.input ?? '');
    });
  }

  /** `smol ARGS --json`, which must succeed; its parsed output. */
  async json<T>(args: string[]): Promise<T> {
    const result = await this.smol([...args, '--json']);
    if (result.status !== 0) {
      throw new Error(`smol ${args.join(' ')} --json exited ${result.status}:\n${result.stderr}${result.stdout}`);
    }
    return JSON.parse(result.stdout) as T;
  }

  async client(): Promise<Smol> {
    // In the KVM lab the engine's modules load over 9p from a host that other jobs may keep busy: a start has been
    // seen to take over a minute there, never on a host.
    const timeoutMs = process.env.SMOL_IN_LAB === '1' ? 240_000 : undefined;
    const smol = await Smol.connect({ home: this.dir, timeoutMs }).catch((error: Error) => {
      throw new Error(`${error.message}\nengine.log ends:\n${this.logTail()}`);
    });
    this.#clients.push(smol);
    return smol;
  }

  /** A Smolfile in the data dir's parent, with `kernel` paths resolved against the checkout. */
  smolfile(name: string, text: string): string {
    const file = path.join(this.dir, '..', `${path.basename(this.dir)}-${name}.smolfile`);
    writeFileSync(file, text.replaceAll('@guests@', path.join(root, 'native', 'out', 'guests')));
    return file;
  }

  /** The last lines of the data dir's engine.log (what a failing test shows). */
  logTail(lines = 40): string {
    try {
      return readFileSync(path.join(this.dir, 'engine.log'), 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no engine.log)';
    }
  }

  /** The engine's pid from engine.json, or null when none runs. */
  enginePid(): number | null {
    try {
      return (JSON.parse(readFileSync(path.join(this.dir, 'engine.json'), 'utf8')) as { pid: number }).pid;
    } catch {
      return null;
    }
  }

  /**
   * Pids of this data dir's vmhost processes, by episode id (found through their environment); not the launcher
   * (smol-jail) each jailed one is started through, which has the same environment (docs/security.md).
   */
  vmhosts(): Map<string, number> {
    const hosts = new Map<string, number>();
    for (const [pid, environ] of this.#environs()) {
      const label = environ.find((v) => v.startsWith('SMOL_VMHOST='));
      if (label && commOf(pid) !== 'smol-jail') hosts.set(label.slice('SMOL_VMHOST='.length), pid);
    }
    return hosts;
  }

  #processes(): number[] {
    return [...this.#environs().keys()];
  }

  /** The environment of every process that has SMOL_HOME set to this data dir. */
  #environs(): Map<number, string[]> {
    const found = new Map<number, string[]>();
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const environ = readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0');
        if (environ.includes(`SMOL_HOME=${this.dir}`)) found.set(Number(entry), environ);
      } catch {
        // gone, or not ours to read
      }
    }
    return found;
  }

  /** Kills the engine and every vmhost (no suspending: nothing here is kept), then removes the data dir. */
  async destroy(): Promise<void> {
    for (const client of this.#clients) client.api.close?.();
    // Every process started for this data dir: the engine (also one that has not written engine.json yet) and
    // its vmhosts, found through their environment.
    const engine = this.enginePid();
    for (const pid of [engine, ...this.#processes()]) {
      if (pid === null || pid === process.pid) continue;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    // The vmhosts' cgroups (docs/security.md, "Limits"): an engine killed outright leaves them; removed once
    // the killed vmhosts are reaped.
    for (let tries = 0; engine !== null && sweepEngine(engine).length > 0 && tries < 100; tries++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    if (existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true });
    for (const file of readdirSync(path.dirname(this.dir))) {
      if (file.startsWith(`${path.basename(this.dir)}-`))
        rmSync(path.join(path.dirname(this.dir), file), { force: true });
    }
  }
}

function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns a value that is not undefined; fails with `what` after `timeoutMs`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
}

/**
 * Runs a command in a Linux VM's console shell and resolves with its output, LF line ends (the shell computes the
 * markers, so the echo of the typed line does not match them).
 */
export async function consoleRun(smol: Smol, vm: string, command: string, tag: number, timeoutMs = 120_000) {
  const done = smol.waitForOutput(vm, new RegExp(`<<${tag}>>\\r?\\n([\\s\\S]*?)<<${tag}:end>>`), timeoutMs);
  await smol.write(vm, `echo "<<$((${tag}))>>"; ${command}; echo "<<$((${tag})):end>>"\n`);
  return (await done)[1]!.replace(/\r\n/g, '\n');
}
