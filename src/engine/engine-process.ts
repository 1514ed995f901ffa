// The engine process (docs/engine.md, "Processes"): takes the data dir's lock, opens the engine, serves the API on
// the data dir's Unix socket, resumes what the last engine suspended, and suspends everything when told to stop.
import { appendFileSync, mkdirSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../package-root.js';
import { startApiServer } from './api-server.js';
import { ServeIdentity } from './serve-identity.js';
import { ApiTokens } from './api-tokens.js';
import { RemoteEngines } from './remote-engines.js';
import { clientConfigFile } from '../api/client-config.js';
import { dataDirCertificate, loadCertificate } from './tls-certificate.js';
import { Engine } from './engine.js';
import { writeFileAtomic } from './atomic-file.js';
import { enginePaths } from './engine-paths.js';
import type { VmHostLauncher } from './vmhost-launcher.js';

import { pidAlive } from '../pid-alive.js';
import { takeLock } from './pid-lock.js';

export { pidAlive, takeLock };

function describe(reason: unknown): string {
  return reason instanceof Error ? (reason.stack ?? reason.message) : String(reason);
}

/** Runs the engine until SIGTERM/SIGINT/SIGHUP or an API shutdown; resolves when it has suspended everything. */
export async function runEngine(options: {
  home: string;
  version: string;
  launchVmHost?: VmHostLauncher;
}): Promise<number> {
  const paths = enginePaths(options.home);
  mkdirSync(paths.home, { recursive: true, mode: 0o700 });
  const log = (line: string) => {
    const stamped = `${new Date().toISOString()} ${line}\n`;
    // In the background stderr is the log file already (for crash output); in a terminal, show it there too.
    if (process.stderr.isTTY) process.stderr.write(stamped);
    try {
      appendFileSync(paths.log, stamped);
    } catch {
      // logging must never take the engine down
    }
  };
  const lock = takeLock(paths.lock);
  if (!lock.ok) {
    process.stderr.write(`smol engine: an engine (pid ${lock.holder}) already serves ${paths.home}\n`);
    return 3;
  }
  let engine: Engine;
  try {
    engine = await Engine.open({ home: paths.home, version: options.version, log, launchVmHost: options.launchVmHost });
  } catch (error) {
    lock.release();
    throw error;
  }
  // The built UI for web mode (npm run build:renderer makes it).
  const staticRoot = path.join(packageRoot, 'dist', 'renderer');
  const tokens = new ApiTokens(paths.home, log);
  const remotes = new RemoteEngines(clientConfigFile(), log);
  const server = await startApiServer({ api: engine, socketPath: paths.socket, staticRoot, tokens, remotes });
  // Before any other await: a client that connects the moment the socket appears (smol serve right after starting
  // the engine) must find the engine able to open listeners. No request is handled before this continuation runs.
  // One token for the data dir's listeners, kept across engines, and each host address's last port taken again
  // when free (serve-identity.ts): a page of the last engine's URL goes on working with the next one.
  const identity = new ServeIdentity({ home: paths.home, log });
  engine.tokens = tokens;
  engine.remotes = remotes;
  engine.listeners = {
    add: async (host, port, tlsFiles) => {
      const preferred = port === 0 ? identity.preferredPort(host) : null;
      const token = identity.token;
      // HTTPS with the files given, else the data dir's own certificate (docs/remote.md, "TLS").
      const certificate = !tlsFiles
        ? null
        : tlsFiles.cert && tlsFiles.key
          ? loadCertificate(tlsFiles.cert, tlsFiles.key)
          : await dataDirCertificate(paths.home, host);
      if (certificate && 'made' in certificate && certificate.made) {
        log(`engine: made a self-signed certificate ${certificate.certFile} (SHA-256 ${certificate.fingerprint})`);
      }
      const tls = certificate ? { cert: certificate.cert, key: certificate.key } : undefined;
      let listener = preferred ? await server.addTcp({ host, port: preferred, token, tls }).catch(() => null) : null;
      listener ??= await server.addTcp({ host, port, token, tls });
      identity.remember(host, listener.port);
      const movedFrom = preferred !== null && preferred !== listener.port ? preferred : null;
      return { ...listener, movedFrom, fingerprint: certificate?.fingerprint ?? null };
    },
    close: (port) => server.closeTcp(port),
    rotateToken: () => server.setTcpToken(identity.rotate()),
  };
  await writeFileAtomic(
    paths.info,
    JSON.stringify({ pid: process.pid, version: options.version, started: new Date().toISOString() }),
  );
  log(`engine: serving ${paths.socket} (pid ${process.pid})`);

  let stopping: Promise<void> | null = null;
  let stopped!: () => void;
  const done = new Promise<void>((resolve) => (stopped = resolve));
  const stop = (why: string) => {
    stopping ??= (async () => {
      log(`engine: stopping (${why}): suspending running VMs`);
      await engine.suspendAll();
      await server.close();
      try {
        unlinkSync(paths.info);
      } catch {
        // fine
      }
      lock.release();
      log('engine: stopped');
      stopped();
    })();
    return stopping;
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGHUP', () => void stop('SIGHUP: its terminal closed'));
  // A bug in one operation must not take every episode down: log it; a thrown exception also stops the engine,
  // suspending what runs, since its state can no longer be trusted.
  process.on('unhandledRejection', (reason) => log(`engine: BUG: unhandled rejection: ${describe(reason)}`));
  process.on('uncaughtException', (error) => {
    log(`engine: BUG: uncaught exception: ${describe(error)}`);
    void stop('an uncaught exception');
  });
  engine.onShutdownRequest = () => void stop('asked through the API');
  void engine.resumeSuspended();
  await done;
  return 0;
}
