// `smol serve` started the way a person starts it, for the remote-engine tests: the real CLI on a test's data dir,
// ready once it has printed its URL (and, with TLS, its certificate's fingerprint).
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { eventually, root, type EngineHome } from './engine-home.js';

export interface Serving {
  child: ChildProcess;
  url: URL;
  fingerprint: string | null;
}

/** Starts `smol serve ARGS` on `home`'s data dir; `started` gets the child at once, to be stopped by the caller. */
export function startServe(home: EngineHome, args: string[], started: (child: ChildProcess) => void): Promise<Serving> {
  const child = spawn(process.execPath, [path.join(root, 'bin', 'smol.js'), 'serve', ...args], {
    env: { ...process.env, SMOL_HOME: home.dir },
  });
  started(child);
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  return eventually(
    'the URL on stdout',
    async () => {
      if (child.exitCode !== null) throw new Error(`exited ${child.exitCode} before serving:\n${output}`);
      const url = /(https?:\/\/\S+\/\?token=[\w-]+)\n/.exec(output)?.[1];
      if (!url || (url.startsWith('https') && !/fingerprint/.test(output))) return undefined;
      const fingerprint = /certificate SHA-256 fingerprint ([0-9A-F:]{95})/.exec(output)?.[1] ?? null;
      return { child, url: new URL(url), fingerprint };
    },
    60_000,
  );
}
