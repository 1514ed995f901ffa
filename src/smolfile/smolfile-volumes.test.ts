// `volumes` and `[dev] volumes` (docs/smolfile.md, "volumes"): smolvm's "HOST:GUEST[:ro]", host folders relative to
// the Smolfile, each checked at its own line.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSmolfile, type SmolfileResult } from './smolfile.js';

const dir = mkdtempSync(path.join(tmpdir(), 'smol-volumes-smolfile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
for (const folder of ['src', 'data', 'site', 'a', 'b', 'c', 'd', 'e']) mkdirSync(path.join(dir, folder));
writeFileSync(path.join(dir, 'file.txt'), 'not a folder\n');

function parse(text: string): SmolfileResult {
  return parseSmolfile(text, { path: path.join(dir, 'Smolfile') });
}

function problemsIn(text: string): string[] {
  const { smolfile, problems } = parse(text);
  if (problems.some((problem) => problem.severity === 'error')) expect(smolfile).toBeNull();
  return problems.map((p) => `${p.line}:${p.column} ${p.severity}: ${p.message}`);
}

const lines = (...text: string[]) => text.join('\n') + '\n';

describe('volumes', () => {
  it("reads HOST:GUEST and HOST:GUEST:ro, host folders from the Smolfile's directory", () => {
    const { smolfile, problems } = parse(
      lines(
        'image = "builtin"',
        'volumes = ["./src:/app", "data:/data/:ro", "' + path.join(dir, 'site') + ':/srv:rw"]',
      ),
    );
    expect(problems).toEqual([]);
    expect(smolfile?.volumes).toEqual([
      { host: path.join(dir, 'src'), guest: '/app', readOnly: false },
      { host: path.join(dir, 'data'), guest: '/data', readOnly: true },
      { host: path.join(dir, 'site'), guest: '/srv', readOnly: false },
    ]);
  });

  it('has none by default', () => {
    expect(parse('image = "builtin"\n').smolfile?.volumes).toEqual([]);
  });

  it('refuses a missing folder, a file, a relative or root guest path, a bad mode, each at its entry', () => {
    expect(
      problemsIn(
        lines(
          'image = "builtin"',
          'volumes = [',
          '  "./missing:/app",',
          '  "./file.txt:/f",',
          '  "./src:app",',
          '  "./src:/",',
          '  "./src:/x:rx",',
          '  "/app",',
          ']',
        ),
      ),
    ).toEqual([
      `3:3 error: \`volumes[0]\`: the host folder ./missing (${path.join(dir, 'missing')}) does not exist`,
      `4:3 error: \`volumes[1]\`: ./file.txt (${path.join(dir, 'file.txt')}) is not a directory: a volume is a folder`,
      '5:3 error: `volumes[2]`: the guest path "app" is not absolute',
      '6:3 error: `volumes[3]`: the guest path is `/`: a volume cannot replace the root',
      '7:3 error: `volumes[4]`: the mode after GUEST is "ro" or "rw", found "rx"',
      '8:3 error: `volumes[5]`: expected "HOST:GUEST" or "HOST:GUEST:ro", found "/app"',
    ]);
  });

  it("refuses the host's root and the engine's data dir (itself, inside it, holding it), each at its entry", () => {
    const saved = process.env.SMOL_HOME;
    process.env.SMOL_HOME = path.join(dir, 'a', 'home');
    mkdirSync(path.join(dir, 'a', 'home', 'snapshots'), { recursive: true });
    try {
      const home = path.join(dir, 'a', 'home');
      const data = "the engine's data dir " + home + ' (SMOL_HOME): a volume of it would copy the snapshots and disks';
      expect(
        problemsIn(
          lines(
            'image = "builtin"',
            'volumes = [',
            '  "/:/host",',
            `  "${home}:/home",`,
            '  "./a/home/snapshots:/s",',
            '  "./a:/a",',
            '  "./b:/b",',
            ']',
          ),
        ),
      ).toEqual([
        "3:3 error: `volumes[0]`: / (/) is the host's whole file system: a volume is a project's folder",
        `4:3 error: \`volumes[1]\`: ${home} (${home}) is ${data}`,
        `5:3 error: \`volumes[2]\`: ./a/home/snapshots (${home}/snapshots) is inside ${data}`,
        `6:3 error: \`volumes[3]\`: ./a (${path.join(dir, 'a')}) holds ${data}`,
      ]);
    } finally {
      if (saved === undefined) delete process.env.SMOL_HOME;
      else process.env.SMOL_HOME = saved;
      rmSync(path.join(dir, 'a', 'home'), { recursive: true, force: true });
    }
  });

  it('refuses a guest path twice, naming the first', () => {
    expect(problemsIn(lines('image = "builtin"', 'volumes = ["./a:/app", "./b:/app/"]'))).toEqual([
      '2:24 error: `volumes[1]`: /app is mounted already (`volumes[0]`, line 2); each guest path takes one volume',
    ]);
  });

  it('refuses more than 4', () => {
    const five = ['a', 'b', 'c', 'd', 'e'].map((f) => `"./${f}:/${f}"`).join(', ');
    expect(problemsIn(lines('image = "builtin"', `volumes = [${five}]`))).toEqual([
      '2:1 error: `volumes` has 5 volumes; at most 4 fit',
    ]);
  });

  it('needs an image (the engine mounts them in the guest)', () => {
    writeFileSync(path.join(dir, 'k.elf'), '');
    expect(problemsIn(lines('kernel = "k.elf"', 'volumes = ["./src:/app"]'))[0]).toMatch(
      /^2:1 error: `volumes` needs the guest agent, which comes with an image/,
    );
  });

  it('a non-empty dev.volumes replaces volumes, an empty one keeps them; both are checked', () => {
    const top = 'volumes = ["./src:/app"]';
    expect(parse(lines('image = "builtin"', top, '[dev]', 'volumes = ["./site:/srv:ro"]')).smolfile?.volumes).toEqual([
      { host: path.join(dir, 'site'), guest: '/srv', readOnly: true },
    ]);
    expect(parse(lines('image = "builtin"', top, '[dev]', 'volumes = []')).smolfile?.volumes).toEqual([
      { host: path.join(dir, 'src'), guest: '/app', readOnly: false },
    ]);
    expect(problemsIn(lines('image = "builtin"', '[dev]', 'volumes = ["./nope:/x"]'))).toEqual([
      `3:12 error: \`dev.volumes[0]\`: the host folder ./nope (${path.join(dir, 'nope')}) does not exist`,
    ]);
  });

  it("smolvm's doom-web and codex examples validate (their [dev] volumes with the folder present)", () => {
    // Mirrors examples/doom-web/doom.smolfile: python serving a folder, [service], [dev] volumes and ports. Its
    // folder is named from the repository's root, where smolvm is run; here paths are from the Smolfile's directory.
    mkdirSync(path.join(dir, 'examples/doom-web'), { recursive: true });
    const doom = lines(
      'image = "python:3.12-alpine"',
      'entrypoint = ["python3"]',
      'cmd = ["-m", "http.server", "8080", "--directory", "/var/www"]',
      'net = true',
      '[service]',
      'listen = 8080',
      'protocol = "http"',
      '[dev]',
      'volumes = ["./examples/doom-web:/var/www"]',
      'ports = ["8080:8080"]',
    );
    const { smolfile, problems } = parse(doom);
    expect(problems.filter((problem) => problem.severity === 'error')).toEqual([]);
    expect(smolfile?.volumes).toEqual([
      { host: path.join(dir, 'examples/doom-web'), guest: '/var/www', readOnly: false },
    ]);
    // Mirrors examples/codex/codex.smolfile: a node image, an entrypoint, the project in /workspace from [dev].
    const codex = lines(
      'image = "node:22-alpine"',
      'entrypoint = ["sh", "-c", "exec codex \\"$@\\"", "--"]',
      'cmd = ["--full-auto"]',
      'workdir = "/workspace"',
      'cpus = 4',
      'memory = 8192',
      'net = true',
      '[dev]',
      'volumes = [".:/workspace"]',
    );
    expect(parse(codex).problems).toEqual([]);
    expect(parse(codex).smolfile?.volumes).toEqual([{ host: dir, guest: '/workspace', readOnly: false }]);
  });
});
