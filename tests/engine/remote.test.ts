// Tier 2: remote engines (docs/remote.md) through the real `smol` CLI, a real engine with the echo guest in a real
// VM, and the TypeScript SDK over HTTPS: the data dir's self-signed certificate and its fingerprint, pinning on
// first use and a changed certificate refused naming both; a wrong token, a read-only token that writes, a revoked
// token (and its open stream) each refused with a clear message; TLS required beyond the loopback.
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ApiClientError } from '../../src/api/api-client.js';
import { ClientConfig } from '../../src/api/client-config.js';
import type { CreatedToken, Vm } from '../../src/api/schema.js';
import { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome } from './engine-home.js';
import { startServe } from './smol-serve.js';

const home = new EngineHome();
const scratch = mkdtempSync(path.join(tmpdir(), 'smol-remote-'));
// The CLI's engines file (client-config.ts) for every smol this test runs, and the SDK's pins in the same file.
const enginesFile = path.join(scratch, 'engines.json');
process.env.SMOL_CLIENT_CONFIG = enginesFile;
afterAll(async () => {
  await home.destroy();
  rmSync(scratch, { recursive: true, force: true });
}, 120_000);

interface Served {
  child: ChildProcess;
  /** The printed URL, with the data dir's token. */
  url: URL;
  fingerprint: string | null;
}

let serving: ChildProcess | null = null;
afterEach(async () => stopServing());

async function stopServing(): Promise<void> {
  const child = serving;
  serving = null;
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.on('exit', resolve));
  child.kill('SIGINT');
  await exited;
}

function serve(args: string[]): Promise<Served> {
  return startServe(home, args, (child) => (serving = child));
}

/** What openssl itself says the certificate's SHA-256 is (not our code's reading). */
function opensslFingerprint(certFile: string): string {
  const out = execFileSync('openssl', ['x509', '-in', certFile, '-noout', '-fingerprint', '-sha256'], {
    encoding: 'utf8',
  });
  return /=([0-9A-F:]+)/.exec(out)![1]!;
}

const base = (url: URL) => `${url.protocol}//${url.host}`;
const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected a refusal');
    },
    (error: unknown) => error as Error,
  );

describe('remote engines', () => {
  it('serve over TLS with the data dir’s certificate, pin it on first use and refuse a changed one', async () => {
    const first = await serve(['--tls']);
    expect(first.url.protocol).toBe('https:');
    const certFile = path.join(home.dir, 'tls', 'cert.pem');
    expect(first.fingerprint).toBe(opensslFingerprint(certFile));
    expect(statSync(path.join(home.dir, 'tls', 'key.pem')).mode & 0o777).toBe(0o600);
    const token = first.url.searchParams.get('token')!;

    // Trust on first use: the SDK pins what it sees into the engines file, and the CLI finds it there.
    const pins = ClientConfig.load(enginesFile);
    const smol = await Smol.connect({ url: base(first.url), token, pins });
    expect(await smol.vms()).toEqual([]);
    smol.api.close();
    expect(ClientConfig.load(enginesFile).get(first.url.host)?.fingerprint).toBe(first.fingerprint);
    const added = await home.smol(['engine', 'add', 'here', first.url.toString()]);
    expect(added.stderr).toBe('');
    expect(added.stdout).toContain(`certificate SHA-256 fingerprint ${first.fingerprint} (pinned)`);
    // A fingerprint typed as `sha256:` and lower case without colons is kept as the certificate spells it.
    const typed = `sha256:${first.fingerprint!.replace(/:/g, '').toLowerCase()}`;
    const addedTyped = await home.smol(['engine', 'add', 'typed', first.url.toString(), '--fingerprint', typed]);
    expect(addedTyped.status, addedTyped.stderr).toBe(0);
    expect((await home.smol(['--engine', 'typed', 'ls'])).status).toBe(0);
    const badPin = await home.smol(['engine', 'add', 'bad', first.url.toString(), '--fingerprint', 'abc']);
    expect(badPin.status).toBe(2);
    expect(badPin.stderr).toContain('--fingerprint abc is not a SHA-256 fingerprint');

    // The web page's token cookie is Secure on HTTPS, so a browser never sends it over plain HTTP.
    const page = await new Promise<string[]>((resolve, reject) =>
      https
        .get(`${base(first.url)}/?token=${token}`, { rejectUnauthorized: false }, (res) => {
          res.resume();
          resolve(res.headers['set-cookie'] ?? []);
        })
        .on('error', reject),
    );
    expect(page.join('\n')).toMatch(/HttpOnly; SameSite=Strict; Secure/);

    // A fingerprint given that is not the certificate's is refused before anything is sent.
    const zeros = Array(32).fill('00').join(':');
    const wrongPin = await refusal(Smol.connect({ url: base(first.url), token, fingerprint: zeros }));
    expect(wrongPin.message).toContain(`presented a certificate with SHA-256 fingerprint ${first.fingerprint}`);
    expect(wrongPin.message).toContain(`the fingerprint given is ${zeros}`);

    // The same address with another certificate: refused by the SDK and the CLI, naming both and how to re-trust.
    await stopServing();
    const other = path.join(scratch, 'other');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=impostor',
        '-keyout',
        `${other}.key`,
        '-out',
        `${other}.pem`,
      ],
      { stdio: 'ignore' },
    );
    const second = await serve(['--listen', first.url.host, '--cert', `${other}.pem`, '--key', `${other}.key`]);
    expect(second.url.host).toBe(first.url.host);
    expect(second.fingerprint).toBe(opensslFingerprint(`${other}.pem`));
    const changed = await refusal(Smol.connect({ url: base(second.url), token, pins: ClientConfig.load(enginesFile) }));
    expect(changed.message).toContain(`presented a certificate with SHA-256 fingerprint ${second.fingerprint}`);
    expect(changed.message).toContain(`it is pinned to ${first.fingerprint}`);
    expect(changed.message).toContain(`smol engine trust ${first.url.host}`);
    const cli = await home.smol(['--engine', 'here', 'ls']);
    expect(cli.status).toBe(5);
    expect(cli.stderr).toContain(`fingerprint ${second.fingerprint}, but since`);
    expect(cli.stderr).toContain('smol engine trust here');

    // Re-trusted on purpose, the engine answers again.
    // Trusting with a fingerprint that is not what the engine presents changes nothing.
    const notIt = await home.smol(['engine', 'trust', 'here', '--fingerprint', first.fingerprint!]);
    expect(notIt.status).toBe(1);
    expect(notIt.stderr).toContain(`fingerprint ${second.fingerprint}, not the ${first.fingerprint} given: refused`);
    expect(ClientConfig.load(enginesFile).get(first.url.host)?.fingerprint).toBe(first.fingerprint);
    const trusted = await home.smol(['engine', 'trust', 'here', '--fingerprint', second.fingerprint!]);
    expect(trusted.stdout).toContain(`now trusting SHA-256 ${second.fingerprint} (was ${first.fingerprint})`);
    expect((await home.smol(['--engine', 'here', 'ls'])).status).toBe(0);
  }, 180_000);

  it('refuse a wrong token, a read-only token that writes, and a revoked token at once', async () => {
    const smolfile = home.smolfile('echo', 'kernel = "@guests@/echo.elf"\nmemory = 16\n');
    const { vm } = await home.json<{ vm: Vm }>(['up', '-f', smolfile, '--name', 'remote']);
    const served = await serve(['--tls']);
    const url = base(served.url);
    const pins = ClientConfig.load(enginesFile);
    pins.forget(served.url.host); // the last test's certificate may hold this port's pin

    const wrong = await refusal(Smol.connect({ url, token: 'smol_not-a-token-of-this-engine', pins }));
    expect(wrong.message).toMatch(/^the engine at https:\/\/127\.0\.0\.1:\d+: refused the token: wrong token$/);

    const viewer = await home.json<CreatedToken>(['token', 'create', 'viewer', '--read-only']);
    expect(viewer.scope).toBe('read-only');
    const looking = await Smol.connect({ url, token: viewer.token, pins });
    expect((await looking.vms()).map((v) => v.id)).toEqual([vm.id]);
    const write = (await refusal(
      looking.api.call('checkpoint', { params: { vm: vm.id }, body: {} }),
    )) as ApiClientError;
    expect(write.status).toBe(403);
    expect(write.message).toBe(
      `the token viewer is read-only: POST /api/v1/vms/${vm.id}/checkpoint needs a full token`,
    );
    const tokens = (await refusal(looking.api.call('listTokens'))) as ApiClientError;
    expect(tokens.status).toBe(403);
    const exec = looking.api.exec(vm.id, { argv: ['true'] }, { onStdout: () => {}, onStderr: () => {} });
    expect((await refusal(exec.exit)).message).toBe(
      'the token viewer is read-only: running a command in a guest needs a full token',
    );
    // Its console shows the screen but types nothing.
    const screen = await new Promise<string>((resolve) => {
      const console = looking.api.console(vm.id, {
        onScreen: (data) => (console.close(), resolve(data)),
        onData: () => {},
      });
    });
    expect(typeof screen).toBe('string');
    looking.api.close();

    // A full named token works until it is revoked: then its open event stream closes and it opens nothing.
    const ci = await home.json<CreatedToken>(['token', 'create', 'ci']);
    const driving = await Smol.connect({ url, token: ci.token, pins });
    await driving.api.call('checkpoint', { params: { vm: vm.id }, body: { name: 'by-ci' } });
    const closed = new Promise<string>((resolve, reject) => {
      driving.api.events(() => {}, {
        onOpen: () => void home.smol(['token', 'rm', 'ci']).then((r) => r.status === 0 || reject(new Error(r.stderr))),
        onClose: resolve,
      });
    });
    expect(await closed).toBe('the token ci was revoked');
    const revoked = (await refusal(driving.api.call('listVms'))) as ApiClientError;
    expect([revoked.status, revoked.message]).toEqual([401, 'wrong token']);
    driving.api.close();

    const ls = await home.smol(['token', 'ls']);
    expect(ls.stdout).toMatch(/^NAME\s+SCOPE\s+CREATED\s+LAST USED\nviewer\s+read-only\s+\S+ ago\s+\S+ ago\n$/);
    expect(readFileSync(path.join(home.dir, 'tokens.json'), 'utf8')).not.toContain(viewer.token);
  }, 180_000);

  it('need TLS to listen beyond the loopback', async () => {
    const plain = await home.smol(['serve', '--listen', '0.0.0.0:0']);
    expect(plain.status).toBe(1);
    expect(plain.stderr).toMatch(/cannot listen on 0\.0\.0\.0:0 without TLS: .* in the clear \(smol serve --tls\)/);
  });
});
