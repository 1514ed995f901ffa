// A real engine serving the UI for the end-to-end tests, in one of two places:
//   - here (needs a usable /dev/kvm): `smol serve` in a throwaway data dir;
//   - in the KVM lab (SMOL_E2E_LAB=1): `smol serve --host 0.0.0.0` inside the lab, its port forwarded, so Chromium
//     on this machine drives an engine whose VMs run on the lab's KVM (docs/lab.md, "network").
// Nothing here imitates the engine: the page talks to the real one.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiClient } from '../src/api/api-client.js';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface UiEngine {
  /** The page URL with its token. */
  url: string;
  token: string;
  /** A client of the same engine over its TCP listener, for checking what the UI did. */
  api: ApiClient;
  /** The last output of the engine side, for a failing test's message. */
  log(): string;
  /** Runs `smol ARGS` on the engine's data dir (not in the lab): its exit status and output. */
  smol(args: string[]): Promise<{ status: number | null; output: string }>;
  close(): Promise<void>;
}

function enginePid(home: string): number | null {
  try {
    return (JSON.parse(readFileSync(path.join(home, 'engine.json'), 'utf8')) as { pid: number }).pid;
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function kvmUsable(): boolean {
  try {
    accessSync('/dev/kvm', constants.R_OK | constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** Resolves with the listener JSON that `smol serve --json` prints first. */
function listenerFrom(child: ChildProcess, output: { text: string }, timeoutMs: number): Promise<{ url: string }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`smol serve printed no URL within ${timeoutMs / 1000} s:\n${output.text.slice(-4000)}`)),
      timeoutMs,
    );
    const look = () => {
      const match = /\{\s*"url":\s*"([^"]+)"[^}]*\}/.exec(output.text);
      if (match) {
        clearTimeout(timer);
        resolve({ url: match[1]! });
      }
    };
    child.stdout!.on('data', look);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(
        new Error(
          `smol serve ended (${signal ?? `exit ${code}`}) before printing its URL:\n${output.text.slice(-4000)}`,
        ),
      );
    });
  });
}

/** `env`: more of the engine's environment (a throwaway SMOL_CACHE, say); here only, not in the lab. */
export async function startUiEngine(env: NodeJS.ProcessEnv = {}): Promise<UiEngine> {
  const inLab = process.env.SMOL_E2E_LAB === '1';
  if (!inLab && !kvmUsable()) {
    throw new Error(
      'the UI end-to-end tests boot real VMs and this machine has no usable /dev/kvm; run them against an engine ' +
        'in the KVM lab: SMOL_E2E_LAB=1 npx vitest run --project e2e',
    );
  }
  const output = { text: '' };
  let child: ChildProcess;
  let home: string | null = null;
  let port: number;
  if (inLab) {
    port = 20_000 + Math.floor(Math.random() * 20_000);
    // Inside the lab SMOL_HOME is passed through and /tmp is the lab's own tmpfs.
    const argv = ['scripts/lab.js', '--timeout', '1800', '--forward', String(port), '--'];
    argv.push('node', 'bin/smol.js', 'serve', '--host', '0.0.0.0', '--port', String(port), '--json');
    child = spawn(process.execPath, argv, { cwd: root, env: { ...process.env, SMOL_HOME: '/tmp/smol-e2e-home' } });
  } else {
    home = mkdtempSync(path.join(tmpdir(), 'smol-e2e-'));
    child = spawn(process.execPath, [path.join(root, 'bin', 'smol.js'), 'serve', '--json'], {
      cwd: root,
      env: { ...process.env, ...env, SMOL_HOME: home },
    });
  }
  child.stdout!.on('data', (data: Buffer) => (output.text += data.toString()));
  child.stderr!.on('data', (data: Buffer) => (output.text += data.toString()));
  const listener = await listenerFrom(child, output, inLab ? 300_000 : 60_000);
  // The lab's listener is on 0.0.0.0 there; here it is the forwarded 127.0.0.1:port.
  const printed = new URL(listener.url);
  const url = new URL(printed.pathname + printed.search, `http://127.0.0.1:${inLab ? port! : printed.port}`);
  const token = url.searchParams.get('token')!;
  const api = new ApiClient({ url: url.origin, token });
  return {
    url: url.href,
    token,
    api,
    smol: (args) => {
      if (!home) throw new Error('smol commands on the engine run only where the engine runs here, not in the lab');
      const run = spawn(process.execPath, [path.join(root, 'bin', 'smol.js'), ...args], {
        cwd: root,
        env: { ...process.env, SMOL_HOME: home },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let text = '';
      run.stdout.on('data', (data: Buffer) => (text += data.toString()));
      run.stderr.on('data', (data: Buffer) => (text += data.toString()));
      return new Promise((resolve) => run.once('close', (status) => resolve({ status, output: text })));
    },
    log: () => {
      let engineLog = '';
      try {
        if (home) engineLog = readFileSync(path.join(home, 'engine.log'), 'utf8').slice(-4000);
      } catch {
        // not written yet
      }
      return `${output.text.slice(-4000)}${engineLog ? `\nengine.log ends:\n${engineLog}` : ''}`;
    },
    close: async () => {
      api.close();
      if (!inLab) {
        // The engine outlives `smol serve`: stop it (its VMs are suspended into the throwaway data dir), and kill
        // it if it has not ended within a while, so no engine is left behind whatever happened.
        const local = new ApiClient({ socketPath: path.join(home!, 'engine.sock') });
        const pid = enginePid(home!);
        await Promise.race([
          local.call('shutdown').catch(() => undefined),
          new Promise((resolve) => setTimeout(resolve, 10_000)),
        ]);
        local.close();
        for (let i = 0; i < 100 && pid !== null && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
        if (pid !== null && alive(pid)) process.kill(pid, 'SIGKILL');
      }
      child.kill('SIGTERM');
      await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)));
      if (home) {
        // Give the engine a moment to finish suspending before its data dir goes.
        await new Promise((resolve) => setTimeout(resolve, 2000));
        rmSync(home, { recursive: true, force: true });
      }
    },
  };
}
