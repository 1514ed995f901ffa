import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { formatProblem, loadSmolfile, parseSmolfile, SMOLFILE_DEFAULTS } from './smolfile.js';

const root = mkdtempSync(path.join(tmpdir(), 'smolfile-test-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let count = 0;
/** A fresh directory with the given files in it (contents are placeholders: only their existence matters). */
function directoryWith(files: string[] = []): string {
  const dir = path.join(root, String(count++));
  for (const file of files) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), 'x');
  }
  mkdirSync(dir, { recursive: true });
  return dir;
}

describe('a valid Smolfile', () => {
  it('can be empty: the builtin image with every default', () => {
    const dir = directoryWith();
    expect(parseSmolfile('', { path: path.join(dir, 'Smolfile') })).toEqual({
      smolfile: {
        path: path.join(dir, 'Smolfile'),
        image: { kind: 'builtin' },
        kernel: null,
        initrd: null,
        cmdline: '',
        cpus: 1,
        memoryMiB: 512,
        entrypoint: null,
        cmd: null,
        env: {},
        workdir: null,
        user: null,
        init: [],
        health: null,
        snapshots: { autoCheckpointMs: null, keep: 10 },
        network: { enabled: false, ports: [], allowHosts: [], allowCidrs: [] },
        volumes: [],
      },
      problems: [],
    });
    expect(SMOLFILE_DEFAULTS).toMatchObject({ cpus: 1, memoryMiB: 512 });
  });

  it('gives every key its normalized value', () => {
    const text = `
image = "debian:bookworm"
cpus = 4
memory = 2048
entrypoint = ["/usr/bin/env"]
cmd = ["python3", "-m", "http.server"]
env = ["PATH=/usr/local/bin:/usr/bin:/bin", "EMPTY=", "EQUALS=a=b"]
workdir = "/srv"
user = "app:app"
init = ["apt-get install -y python3", "mkdir -p /srv"]
net = true
ports = ["8080:80", "3000", "5173-5174:6173-6174"]
cmdline = "quiet loglevel=3"

[health]
exec = ["test", "-e", "/srv/ready"]
interval = "1m30s"
timeout = "500ms"
startup_grace = "20s"
retries = 5

[snapshots]
auto_checkpoint = "5m"
keep = 20

[network]
allow_hosts = ["pypi.org", "*.example.com", "host.smol.internal:8000"]
allow_cidrs = ["203.0.113.0/24", "2001:db8::/32"]
`;
    const { smolfile, problems } = parseSmolfile(text, { path: '/nowhere/Smolfile' });
    expect(problems).toEqual([]);
    expect(smolfile).toEqual({
      path: '/nowhere/Smolfile',
      image: { kind: 'debian', suite: 'bookworm' },
      kernel: null,
      initrd: null,
      cmdline: 'quiet loglevel=3',
      cpus: 4,
      memoryMiB: 2048,
      entrypoint: ['/usr/bin/env'],
      cmd: ['python3', '-m', 'http.server'],
      env: { PATH: '/usr/local/bin:/usr/bin:/bin', EMPTY: '', EQUALS: 'a=b' },
      workdir: '/srv',
      user: 'app:app',
      init: ['apt-get install -y python3', 'mkdir -p /srv'],
      health: {
        exec: ['test', '-e', '/srv/ready'],
        intervalMs: 90_000,
        timeoutMs: 500,
        startupGraceMs: 20_000,
        retries: 5,
      },
      snapshots: { autoCheckpointMs: 300_000, keep: 20 },
      network: {
        enabled: true,
        ports: [
          { host: 8080, guest: 80 },
          { host: null, guest: 3000 },
          { host: 5173, guest: 6173 },
          { host: 5174, guest: 6174 },
        ],
        allowHosts: ['pypi.org', '*.example.com', 'host.smol.internal:8000'],
        allowCidrs: ['203.0.113.0/24', '2001:db8::/32'],
      },
      volumes: [],
    });
  });

  it('fills in health check defaults', () => {
    const { smolfile } = parseSmolfile('[health]\nexec = ["true"]\n', { path: '/x/Smolfile' });
    expect(smolfile?.health).toEqual({
      exec: ['true'],
      intervalMs: 10_000,
      timeoutMs: 5_000,
      startupGraceMs: 0,
      retries: 3,
    });
  });

  it('resolves kernel and initrd paths from the Smolfile directory, not the current one', () => {
    const dir = directoryWith(['guests/tiny.elf', 'guests/tiny.cpio']);
    const text = 'kernel = "../guests/tiny.elf"\ninitrd = "../guests/tiny.cpio"\nmemory = 16\ncmdline = "x=1"\n';
    const { smolfile, problems } = parseSmolfile(text, { path: path.join(dir, 'examples', 'tiny.smolfile') });
    expect(problems).toEqual([]);
    expect(smolfile).toMatchObject({
      image: null,
      kernel: path.join(dir, 'guests/tiny.elf'),
      initrd: path.join(dir, 'guests/tiny.cpio'),
      memoryMiB: 16,
      cmdline: 'x=1',
    });
  });

  it('takes OCI references: Docker Hub names, registries with ports, digests, and local layouts and archives', () => {
    const dir = directoryWith(['image.tar']);
    const image = (value: string) =>
      parseSmolfile(`image = ${JSON.stringify(value)}\n`, { path: path.join(dir, 'Smolfile') }).smolfile?.image;
    expect(image('python:3.12-slim')).toEqual({ kind: 'oci', reference: 'docker.io/library/python:3.12-slim' });
    expect(image('127.0.0.1:5000/org/app:v2')).toEqual({ kind: 'oci', reference: '127.0.0.1:5000/org/app:v2' });
    const digest = `sha256:${'a'.repeat(64)}`;
    expect(image(`ghcr.io/org/app@${digest}`)).toEqual({ kind: 'oci', reference: `ghcr.io/org/app@${digest}` });
    expect(image('alpine')).toEqual({ kind: 'oci', reference: 'docker.io/library/alpine:latest' });
    // Local ones are resolved from the Smolfile's directory, which has them.
    expect(image('oci:.:v1')).toEqual({ kind: 'oci', reference: `oci:${dir}:v1` });
    expect(image('docker-archive:image.tar')).toEqual({ kind: 'oci', reference: `docker-archive:${dir}/image.tar` });
  });

  it('takes an absolute kernel path as it is, and a kernel next to an image boots with that image', () => {
    const dir = directoryWith(['vmlinux']);
    const text = `image = "builtin"\nkernel = ${JSON.stringify(path.join(dir, 'vmlinux'))}\n`;
    const { smolfile } = parseSmolfile(text, { path: '/elsewhere/Smolfile' });
    expect(smolfile).toMatchObject({ image: { kind: 'builtin' }, kernel: path.join(dir, 'vmlinux') });
  });

  it.each([
    ['"off"', null],
    ['0', null],
    ['"0s"', null],
    ['"1s"', 1000],
    ['"24h"', 86_400_000],
  ])('takes auto_checkpoint = %s', (value, ms) => {
    const { smolfile, problems } = parseSmolfile(`[snapshots]\nauto_checkpoint = ${value}\n`, { path: '/x/S' });
    expect(problems).toEqual([]);
    expect(smolfile?.snapshots).toEqual({ autoCheckpointMs: ms, keep: 10 });
  });

  it('ignores a byte order mark', () => {
    expect(parseSmolfile('\ufeffcpus = 2\n', { path: '/x/S' }).smolfile?.cpus).toBe(2);
  });

  it('keeps the Smolfile when there are only warnings', () => {
    const { smolfile, problems } = parseSmolfile('env = [\n  "A=1",\n  "B=2",\n  "A=3",\n]\n', { path: '/x/S' });
    expect(smolfile?.env).toEqual({ A: '3', B: '2' });
    expect(problems).toEqual([
      {
        severity: 'warning',
        key: 'env[2]',
        line: 4,
        column: 3,
        message: '`env[2]` sets A again (first at line 2); the last one wins',
      },
    ]);
  });

  it('accepts env names that are also Object.prototype names as plain keys', () => {
    const { smolfile } = parseSmolfile('env = ["__proto__=x", "constructor=y"]\n', { path: '/x/S' });
    expect(Object.getPrototypeOf(smolfile?.env)).toBe(Object.prototype);
    expect(Object.entries(smolfile?.env ?? {})).toEqual([
      ['__proto__', 'x'],
      ['constructor', 'y'],
    ]);
  });
});

describe('loading a Smolfile from disk', () => {
  it('reads the file and resolves paths next to it', async () => {
    const dir = directoryWith(['k.elf']);
    writeFileSync(path.join(dir, 'Smolfile'), 'kernel = "k.elf"\n');
    const { smolfile } = await loadSmolfile(path.join(dir, 'Smolfile'));
    expect(smolfile?.kernel).toBe(path.join(dir, 'k.elf'));
  });

  it('says when the file is not there', async () => {
    const dir = directoryWith();
    await expect(loadSmolfile(path.join(dir, 'Smolfile'))).rejects.toThrow(
      `${path.join(dir, 'Smolfile')}: no such file`,
    );
    await expect(loadSmolfile(dir)).rejects.toThrow(`${dir}: is a directory`);
  });

  it('points at the first byte that is not UTF-8', async () => {
    const dir = directoryWith();
    const file = path.join(dir, 'Smolfile');
    writeFileSync(file, Buffer.concat([Buffer.from('cpus = 1\nuser = "ab'), Buffer.from([0xff]), Buffer.from('"\n')]));
    const { smolfile, problems } = await loadSmolfile(file);
    expect(smolfile).toBeNull();
    expect(problems.map((problem) => formatProblem('Smolfile', problem))).toEqual([
      'Smolfile:2:11: error: the file is not UTF-8 text (a Smolfile is TOML, which must be UTF-8)',
    ]);
  });
});
