import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { parseSmolfile } from '../smolfile/smolfile.js';
import { UsageError } from './errors.js';
import { main } from './main.js';
import { captureOutput } from '../../tests/helpers/capture-output.js';
import { formatValidation, parseValidateArgs } from './validate.js';

const dir = mkdtempSync(path.join(tmpdir(), 'smol-validate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function smolfile(name: string, text: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('smol validate arguments', () => {
  it('reads ./Smolfile unless -f or --file names another', () => {
    expect(parseValidateArgs([])).toEqual({ file: 'Smolfile', json: false });
    expect(parseValidateArgs(['-f', 'x.smolfile', '--json'])).toEqual({ file: 'x.smolfile', json: true });
    expect(parseValidateArgs(['--file=y'])).toEqual({ file: 'y', json: false });
  });

  it('rejects what it does not know, and an empty file name', () => {
    expect(() => parseValidateArgs(['Smolfile'])).toThrow(new UsageError('validate', 'unexpected argument Smolfile'));
    expect(() => parseValidateArgs(['-f'])).toThrow(new UsageError('validate', '-f needs a value'));
    expect(() => parseValidateArgs(['-f', ''])).toThrow(new UsageError('validate', '--file needs a file'));
    expect(() => parseValidateArgs(['--strict'])).toThrow(new UsageError('validate', 'unknown option --strict'));
  });

  it('has --help', () => {
    expect(parseValidateArgs(['-h'])).toBe('help');
  });
});

describe('smol validate output', () => {
  it('a valid file gets one ok line with the resolved settings', () => {
    const text = 'cpus = 2\ninit = ["true", "true"]\nenv = ["A=1"]\n[snapshots]\nauto_checkpoint = "90s"\n';
    expect(formatValidation('Smolfile', parseSmolfile(text, { path: '/x/Smolfile' }))).toBe(
      'Smolfile: ok: image builtin, 2 vCPUs, 512 MiB, 1 env variable, 2 init commands, checkpoint every 1m30s, keep 10\n',
    );
  });

  it('problems come first, compiler style, then a count', () => {
    const text = 'cpus = 0\nenv = ["A=1", "A=2"]\nports = ["80"]\n';
    expect(formatValidation('my.smolfile', parseSmolfile(text, { path: '/x/my.smolfile' }))).toBe(
      [
        'my.smolfile:1:1: error: `cpus`: expected an integer from 1 to 64, found 0',
        'my.smolfile:2:15: warning: `env[1]` sets A again (first at line 2); the last one wins',
        'my.smolfile:3:1: error: `ports` needs a network, and this Smolfile has none (`net` is false by default); ' +
          'add net = true',
        'my.smolfile: 2 errors, 1 warning',
        '',
      ].join('\n'),
    );
  });

  it('a network is described with its forwards and allow lists', () => {
    const text = 'net = true\nports = ["8080:80", "3000"]\n[network]\nallow_hosts = ["pypi.org"]\n';
    expect(formatValidation('S', parseSmolfile(text, { path: '/x/S' }))).toBe(
      'S: ok: image builtin, 1 vCPU, 512 MiB, network (2 ports, allow 1 host)\n',
    );
  });

  it('volumes are described with their folders and guest paths', () => {
    const text = 'volumes = ["./tmp:/app", "/srv:/host:ro"]\n';
    expect(formatValidation('S', parseSmolfile(text, { path: '/S' }))).toBe(
      'S: ok: image builtin, 1 vCPU, 512 MiB, volume /tmp at /app, volume /srv at /host (read-only)\n',
    );
  });

  it('warnings alone still pass, and say so', () => {
    const result = parseSmolfile('[snapshots]\nkeep = 2\n', { path: '/x/S' });
    expect(formatValidation('S', result).split('\n').at(-2)).toBe('S: ok (1 warning): image builtin, 1 vCPU, 512 MiB');
  });
});

describe('smol validate exit status', () => {
  it('is 0 for a valid file', async () => {
    const output = captureOutput();
    expect(await main(['validate', '-f', smolfile('good.smolfile', 'memory = 64\n')])).toBe(0);
    expect(output.out()).toMatch(/good\.smolfile: ok: image builtin, 1 vCPU, 64 MiB\n$/);
  });

  it('is 1 for a file with errors, with each problem on stdout', async () => {
    const file = smolfile('bad.smolfile', 'cpus = 2\ncpu = 2\n');
    const output = captureOutput();
    expect(await main(['validate', '-f', file])).toBe(1);
    expect(output.out()).toBe(`${file}:2:1: error: unknown key \`cpu\`; did you mean \`cpus\`?\n${file}: 1 error\n`);
  });

  it('is 1 for a TOML syntax error', async () => {
    const file = smolfile('syntax.smolfile', 'cpus = [\n');
    const output = captureOutput();
    expect(await main(['validate', '-f', file])).toBe(1);
    expect(output.out()).toMatch(/^.*syntax\.smolfile:2:1: error: TOML syntax error: /);
  });

  it('is 1 when the file cannot be read, with one line on stderr', async () => {
    const output = captureOutput();
    const missing = path.join(dir, 'missing');
    expect(await main(['validate', '-f', missing])).toBe(1);
    expect(output.err()).toBe(`smol: ${missing}: no such file\n`);
  });

  it('is 2 for a usage error', async () => {
    const output = captureOutput();
    expect(await main(['validate', 'Smolfile'])).toBe(2);
    expect(output.err()).toBe('smol: validate: unexpected argument Smolfile; see smol validate --help\n');
  });

  it('--json gives the problems and the normalized Smolfile', async () => {
    const output = captureOutput();
    const file = smolfile('json.smolfile', 'cpus = 3\n');
    expect(await main(['validate', '--json', '-f', file])).toBe(0);
    const report = JSON.parse(output.out()) as { valid: boolean; problems: unknown[]; smolfile: { cpus: number } };
    expect(report).toMatchObject({ file, valid: true, problems: [], smolfile: { cpus: 3, path: file } });
  });
});
