// smolvm's [dev] profile and [service] table, and Smolfiles built like the eight examples in smolvm's repository
// (smol-machines/smolvm, examples/*/*.smolfile). The example Smolfiles here are our own, written to use the same
// constructs as the one each names; they are not copies.
import { describe, expect, it } from 'vitest';
import { parseSmolfile, type SmolfileResult } from './smolfile.js';

function parse(text: string): SmolfileResult {
  return parseSmolfile(text, { path: '/nowhere/Smolfile' });
}

/** Each problem as `LINE:COL severity: message`; any error means no Smolfile. */
function problemsIn(text: string): string[] {
  const { smolfile, problems } = parse(text);
  if (problems.some((problem) => problem.severity === 'error')) expect(smolfile).toBeNull();
  return problems.map((p) => `${p.line}:${p.column} ${p.severity}: ${p.message}`);
}

const lines = (...text: string[]) => text.join('\n') + '\n';

describe('[dev], merged with the top level as smolvm merges it', () => {
  it('appends dev.env to env, so a name in both takes the [dev] value', () => {
    const text = lines('env = ["A=top", "B=top"]', '[dev]', 'env = ["B=dev", "C=dev"]');
    const { smolfile, problems } = parse(text);
    expect(problems).toEqual([]);
    expect(smolfile?.env).toEqual({ A: 'top', B: 'dev', C: 'dev' });
  });

  it('replaces init with a non-empty dev.init, and keeps it for an empty one', () => {
    expect(parse(lines('init = ["a", "b"]', '[dev]', 'init = ["c"]')).smolfile?.init).toEqual(['c']);
    expect(parse(lines('init = ["a", "b"]', '[dev]', 'init = []')).smolfile?.init).toEqual(['a', 'b']);
    expect(parse(lines('[dev]', 'init = ["c"]')).smolfile?.init).toEqual(['c']);
  });

  it('replaces workdir with dev.workdir', () => {
    expect(parse(lines('workdir = "/top"', '[dev]', 'workdir = "/dev"')).smolfile?.workdir).toBe('/dev');
    expect(parse(lines('workdir = "/top"', '[dev]', 'env = []')).smolfile?.workdir).toBe('/top');
  });

  it('replaces ports with a non-empty dev.ports, and keeps them for an empty one', () => {
    const top = lines('net = true', 'ports = ["8080:80"]', '[dev]');
    expect(parse(top + 'ports = ["3000:3000", "9000"]\n').smolfile?.network.ports).toEqual([
      { host: 3000, guest: 3000 },
      { host: null, guest: 9000 },
    ]);
    expect(parse(top + 'ports = []\n').smolfile?.network.ports).toEqual([{ host: 8080, guest: 80 }]);
  });

  it('checks the top-level key it shadows all the same', () => {
    expect(problemsIn(lines('init = [1]', '[dev]', 'init = ["c"]'))).toEqual([
      '1:9 error: `init[0]`: expected a string, found an integer 1',
    ]);
  });

  it('needs net = true for dev.ports, as for ports', () => {
    expect(problemsIn(lines('[dev]', 'ports = ["3000:3000"]'))).toEqual([
      '2:1 error: `dev.ports` needs a network, and this Smolfile has none (`net` is false by default); add net = true',
    ]);
  });

  it('needs the guest agent for dev.env, dev.init and dev.workdir', () => {
    const text = lines('kernel = "/bin/sh"', '[dev]', 'env = ["A=1"]', 'init = ["x"]', 'workdir = "/w"');
    expect(problemsIn(text).map((problem) => problem.slice(0, 46))).toEqual([
      '3:1 error: `dev.env` needs the guest agent, wh',
      '4:1 error: `dev.init` needs the guest agent, w',
      '5:1 error: `dev.workdir` needs the guest agent',
    ]);
  });
});

describe('bad [dev] input names the key and its line', () => {
  it('an unknown key, with a suggestion or the table keys', () => {
    expect(problemsIn(lines('[dev]', 'workdr = "/w"', 'cpus = 2'))).toEqual([
      '2:1 error: unknown key `dev.workdr` in [dev]; did you mean `dev.workdir`?',
      '3:1 error: unknown key `dev.cpus` in [dev] (its keys: env, init, workdir, ports, volumes)',
    ]);
  });

  it('a wrong type, an entry that is not NAME=value, a relative workdir, a bad port', () => {
    const text = lines(
      'net = true',
      '[dev]',
      'env = ["OK=1", "NOEQUALS"]',
      'init = "npm install"',
      'workdir = "app"',
      'ports = ["3000:70000"]',
    );
    expect(problemsIn(text)).toEqual([
      '3:16 error: `dev.env[1]`: expected "NAME=value", found "NOEQUALS" (no =)',
      '4:1 error: `dev.init`: expected an array of strings, such as ["a", "b"], found a string "npm install"',
      '5:1 error: `dev.workdir`: expected an absolute path, found a string "app"',
      '6:10 error: `dev.ports[0]` "3000:70000": port 70000 is outside 1 to 65535',
    ]);
  });

  it('[dev] that is not a table', () => {
    expect(problemsIn('dev = 3\n')).toEqual(['1:1 error: `dev`: expected a table ([dev]), found an integer 3']);
  });

  it('dev.volumes is read (smolfile-volumes.test.ts); a folder that is not there is an error at its entry', () => {
    expect(problemsIn(lines('image = "builtin"', '', '[dev]', 'volumes = ["./src:/app"]'))).toEqual([
      '4:12 error: `dev.volumes[0]`: the host folder ./src (/nowhere/src) does not exist',
    ]);
  });

  it('a name given twice in dev.env is a warning, as in env', () => {
    expect(problemsIn(lines('[dev]', 'env = ["A=1", "A=2"]'))).toEqual([
      '2:15 warning: `dev.env[1]` sets A again (first at line 2); the last one wins',
    ]);
  });
});

describe("smolvm's [service]", () => {
  it('is checked and has no effect, which a warning says', () => {
    const { smolfile, problems } = parse(lines('[service]', 'listen = 18789', 'protocol = "http"'));
    expect(smolfile).not.toBeNull();
    expect(problems.map((p) => `${p.line}:${p.column} ${p.severity}`)).toEqual(['1:1 warning']);
    expect(problems[0]?.message).toMatch(/^`\[service\]` is smolvm's deployment metadata and has no effect/);
  });

  it('names a bad port, protocol or key', () => {
    const text = lines('[service]', 'port = 0', 'protocol = "udp"', 'address = "x"');
    expect(problemsIn(text).filter((problem) => problem.includes('error'))).toEqual([
      '2:1 error: `service.port`: expected a port from 1 to 65535, found 0',
      '3:1 error: `service.protocol`: expected "http" or "tcp", found a string "udp"',
      '4:1 error: unknown key `service.address` in [service] (its keys: port, listen, protocol)',
    ]);
  });
});

describe('Smolfiles built like the examples in smolvm’s repository', () => {
  it('node-app and python-app (an image, entrypoint, net, [dev] ports and init) validate', () => {
    // Mirrors examples/node-app/node.smolfile and examples/python-app/python.smolfile.
    const text = lines(
      'image = "python:3.12-slim"',
      'entrypoint = ["python3"]',
      'cpus = 2',
      'memory = 1024',
      'net = true',
      '[dev]',
      'ports = ["8000:8000"]',
      'init = ["pip install requests"]',
    );
    const { smolfile, problems } = parse(text);
    expect(problems).toEqual([]);
    expect(smolfile).toMatchObject({
      entrypoint: ['python3'],
      cpus: 2,
      memoryMiB: 1024,
      init: ['pip install requests'],
      network: { enabled: true, ports: [{ host: 8000, guest: 8000 }] },
    });
    expect(smolfile?.image).toMatchObject({ kind: 'oci' });
  });

  it('openclaw-app (an image with a namespace, entrypoint and cmd, [service], [dev] ports) validates with a warning', () => {
    // Mirrors examples/openclaw-app/openclaw.smolfile.
    const text = lines(
      'image = "someorg/gateway:edge"',
      'entrypoint = ["gateway"]',
      'cmd = ["--port", "9090"]',
      'net = true',
      '[service]',
      'listen = 9090',
      'protocol = "http"',
      '[dev]',
      'ports = ["9090:9090"]',
    );
    const { smolfile, problems } = parse(text);
    expect(problems.map((p) => `${p.line} ${p.severity} ${p.key}`)).toEqual(['5 warning service']);
    expect(smolfile).toMatchObject({ cmd: ['--port', '9090'], network: { ports: [{ host: 9090, guest: 9090 }] } });
  });

  it('doom-web and codex fail here only on their [dev] volumes folder, which /nowhere does not have', () => {
    // Mirrors examples/doom-web/doom.smolfile (also [service]) and examples/codex/codex.smolfile; with the folder
    // present they validate (smolfile-volumes.test.ts).
    const text = lines(
      'image = "python:3.12-alpine"',
      'cmd = ["-m", "http.server", "8000"]',
      'workdir = "/srv"',
      'net = true',
      '[service]',
      'listen = 8000',
      '[dev]',
      'volumes = ["./site:/srv"]',
      'ports = ["8000:8000"]',
    );
    expect(problemsIn(text).filter((problem) => problem.includes('error'))).toEqual([
      '8:12 error: `dev.volumes[0]`: the host folder ./site (/nowhere/site) does not exist',
    ]);
  });

  it('docker-in-vm fails on storage and docker_socket (no Docker socket forwarding)', () => {
    // Mirrors examples/docker-in-vm/docker.smolfile: no image, net, storage, docker_socket, init.
    const text = lines(
      'memory = 2048',
      'net = true',
      'storage = 10',
      'docker_socket = true',
      'init = ["apk add docker"]',
    );
    expect(problemsIn(text).map((problem) => problem.slice(0, problem.indexOf(' is not supported')))).toEqual([
      "3:1 error: smolvm's `storage`",
      "4:1 error: smolvm's `docker_socket`",
    ]);
  });

  it('headless-browser and local-llm fail on gpu and gpu_vram (no GPU)', () => {
    // Mirrors examples/headless-browser/browser.smolfile and examples/local-llm/local-llm.smolfile.
    const text = lines(
      'image = "debian:trixie"',
      'gpu = true',
      'gpu_vram = 1024',
      'net = true',
      'env = ["VK_ICD_FILENAMES=/x.json"]',
      '[dev]',
      'init = ["apt-get install -y vulkan-tools"]',
    );
    expect(problemsIn(text).map((problem) => problem.slice(0, problem.indexOf(' is not supported')))).toEqual([
      "2:1 error: smolvm's `gpu`",
      "3:1 error: smolvm's `gpu_vram`",
    ]);
  });
});
