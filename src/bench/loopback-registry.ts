// A real registry on loopback for `smol bench image` and the OCI tests (tests/images): Debian's docker-registry
// (the CNCF distribution registry) on a free 127.0.0.1 port with a temporary storage directory, and skopeo to push
// images into it (plain http: --dest-tls-verify=false).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const REGISTRY_BINARY = '/usr/bin/docker-registry';
export const SKOPEO = '/usr/bin/skopeo';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

export interface Registry {
  /** `127.0.0.1:PORT` */
  host: string;
  stop(): Promise<void>;
}

/**
 * Starts docker-registry on a free loopback port with its storage under `dir`; resolves once it answers /v2/ (within
 * `timeoutMs`: in the KVM lab, under emulation, it takes far longer than here).
 */
export async function startRegistry(dir: string, timeoutMs = 20_000): Promise<Registry> {
  const port = await freePort();
  mkdirSync(path.join(dir, 'storage'), { recursive: true });
  const config = path.join(dir, 'config.yml');
  writeFileSync(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: error',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${path.join(dir, 'storage')}`,
      'http:',
      `  addr: 127.0.0.1:${port}`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(REGISTRY_BINARY, ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const host = `127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited with ${child.exitCode}: ${stderr}`);
    const ok = await fetch(`http://${host}/v2/`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`docker-registry did not answer on ${host} in ${timeoutMs / 1000} s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    host,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** `skopeo copy [--all] oci:LAYOUT:TAG docker://HOST/REPO` (plain http: --dest-tls-verify=false). */
export function push(source: string, host: string, repository: string, all = false): void {
  const args = [
    'copy',
    '-q',
    '--dest-tls-verify=false',
    ...(all ? ['--all'] : []),
    source,
    `docker://${host}/${repository}`,
  ];
  const result = spawnSync(SKOPEO, args, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`skopeo ${args.join(' ')}: ${result.stderr || result.error?.message}`);
}
