import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UNSUPPORTED_SMOLVM_KEYS } from './smolfile-keys.js';
import { parseSmolfile } from './smolfile.js';

const dir = mkdtempSync(path.join(tmpdir(), 'smolfile-errors-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(path.join(dir, 'tiny.elf'), 'x');
mkdirSync(path.join(dir, 'a-directory'));

/** Each problem as `LINE:COL severity: message`; and checks that any problem means no Smolfile. */
function problemsIn(text: string): string[] {
  const { smolfile, problems } = parseSmolfile(text, { path: path.join(dir, 'Smolfile') });
  if (problems.some((problem) => problem.severity === 'error')) expect(smolfile).toBeNull();
  return problems.map((p) => `${p.line}:${p.column} ${p.severity}: ${p.message}`);
}

describe('TOML syntax errors', () => {
  it('name the line and column', () => {
    expect(problemsIn('cpus = 2\nmemory = \n')).toEqual([
      '2:10 error: TOML syntax error: unexpected character, expecting string, number, datetime, boolean, ' +
        'inline array or inline table',
    ]);
    expect(problemsIn('cpus = 2\n\nimage = "builtin\n')).toEqual([
      '3:17 error: TOML syntax error: unterminated string',
    ]);
    expect(problemsIn('[health\n')).toEqual([
      '1:9 error: TOML syntax error: unexpected character, expected whitespace, . or ]',
    ]);
  });

  it('name a key or table defined twice, at the second definition', () => {
    expect(problemsIn('cpus = 1\nmemory = 64\n  cpus = 2\n')).toEqual([
      '3:3 error: TOML syntax error: `cpus` is already defined (a key or table can be defined only once)',
    ]);
    expect(problemsIn('[health]\nexec = ["a"]\n\n[ health ]\n')).toEqual([
      '4:1 error: TOML syntax error: `health` is already defined (a key or table can be defined only once)',
    ]);
    expect(problemsIn('snapshots.keep = 1\n[snapshots]\n')).toEqual([
      '2:1 error: TOML syntax error: `snapshots` is already defined (a key or table can be defined only once)',
    ]);
  });
});

describe('unknown keys', () => {
  it('name the line and suggest the key that was probably meant', () => {
    expect(problemsIn('image = "builtin"\n\ncpu = 2\nmemroy = 64\nInit = []\nmemory_mib = 1\n')).toEqual([
      '3:1 error: unknown key `cpu`; did you mean `cpus`?',
      '4:1 error: unknown key `memroy`; did you mean `memory`?',
      '5:1 error: unknown key `Init`; did you mean `init`?',
      '6:1 error: unknown key `memory_mib`; did you mean `memory`?',
    ]);
  });

  it('include names that JavaScript objects inherit', () => {
    expect(
      problemsIn('constructor = 1\ntoString = 2\n__proto__ = 3\n[health]\nexec = ["x"]\nhasOwnProperty = 4\n'),
    ).toEqual([
      '1:1 error: unknown key `constructor` (docs/smolfile.md lists the keys)',
      '2:1 error: unknown key `toString` (docs/smolfile.md lists the keys)',
      '3:1 error: unknown key `__proto__` (docs/smolfile.md lists the keys)',
      '6:1 error: unknown key `health.hasOwnProperty` in [health] (its keys: exec, interval, timeout, startup_grace, retries)',
    ]);
  });

  it('say where the keys are listed when nothing is close', () => {
    expect(problemsIn('frobnicate = true\n')).toEqual([
      '1:1 error: unknown key `frobnicate` (docs/smolfile.md lists the keys)',
    ]);
  });

  it('inside a table name the table, and list its keys when nothing is close', () => {
    expect(problemsIn('[health]\nexec = ["true"]\nintervall = "5s"\ncolour = "red"\n')).toEqual([
      '3:1 error: unknown key `health.intervall` in [health]; did you mean `health.interval`?',
      '4:1 error: unknown key `health.colour` in [health] (its keys: exec, interval, timeout, startup_grace, retries)',
    ]);
  });

  it('include a misspelt table, reported once at its header', () => {
    expect(problemsIn('cpus = 1\n[snapshot]\nkeep = 3\nauto_checkpoint = "5m"\n')).toEqual([
      '2:1 error: unknown key `snapshot`; did you mean `snapshots`?',
    ]);
  });

  it('include keys in inline tables and dotted keys', () => {
    expect(problemsIn('health = { exec = ["true"], retry = 3 }\nsnapshots.kep = 2\n')).toEqual([
      '1:29 error: unknown key `health.retry` in [health]; did you mean `health.retries`?',
      '2:1 error: unknown key `snapshots.kep` in [snapshots]; did you mean `snapshots.keep`?',
    ]);
  });
});

describe("smolvm's keys that Smol Studio does not support yet", () => {
  it.each(Object.keys(UNSUPPORTED_SMOLVM_KEYS))('`%s` says so exactly, at its line', (key) => {
    const [problem, ...rest] = problemsIn(`cpus = 1\n${key} = true\n`);
    expect(rest).toEqual([]);
    expect(problem).toMatch(new RegExp(`^2:1 error: smolvm's \`${key}\` is not supported by Smol Studio yet: .+`));
  });

  it('are reported once per table, at its header, with what to do instead', () => {
    const text = '[auth]\nssh_agent = true\n\n[fork]\nenabled = true\n\n[restart]\npolicy = "always"\n';
    expect(problemsIn(text)).toEqual([
      "1:1 error: smolvm's `auth` is not supported by Smol Studio yet: no SSH agent is forwarded into the guest; " +
        'remove the table',
      "4:1 error: smolvm's `fork` is not supported by Smol Studio yet: fork any running VM or snapshot with " +
        '`smol fork`; automatic checkpoints are set in `[snapshots]`',
      "7:1 error: smolvm's `restart` is not supported by Smol Studio yet: remove the table (a stopped episode is " +
        'started again with `smol start`)',
    ]);
  });

  it("take smolvm's own example apart key by key", () => {
    const text = [
      'image = "python:3.12-alpine"',
      'net = true',
      'cpus = 4',
      'memory = 4096',
      'ports = ["8000:8000", "5173-5180:5173-5180"]',
      'volumes = ["./src:/app"]',
      'init = ["pip install -r /app/requirements.txt"]',
      '[network]',
      'allow_hosts = ["api.stripe.com", "pypi.org"]',
      '[auth]',
      'ssh_agent = true',
    ].join('\n');
    // The OCI image, `net`, `ports`, `volumes` and `[network]` are ones Smol Studio takes; `volumes` is an error
    // only because ./src is not next to this Smolfile (it is in /nowhere).
    expect(problemsIn(text).map((line) => line.slice(0, line.indexOf(' error')))).toEqual(['6:12', '10:1']);
  });
});

describe('wrong types', () => {
  it('say what was expected and what was found, as written', () => {
    const text = [
      'cpus = "2"',
      'memory = 512.0',
      'image = 5',
      'cmd = "echo hi"',
      'workdir = ["/"]',
      'kernel = false',
      'cmdline = 1979-05-27',
      'health = 5',
      'snapshots = []',
    ].join('\n');
    expect(problemsIn(text)).toEqual([
      '1:1 error: `cpus`: expected an integer from 1 to 64, found a string "2"',
      '2:1 error: `memory`: expected a whole number of MiB from 2 to 262144, found a float 512.0',
      '3:1 error: `image`: expected "builtin", "debian:<suite>" such as "debian:bookworm", or an OCI image: a ' +
        'registry reference such as "python:3.12-slim" or "host:port/org/app:tag", or oci:DIR[:TAG], ' +
        'oci-archive:FILE[:TAG], docker-archive:FILE, found an integer 5',
      '4:1 error: `cmd`: expected an array of strings, such as ["a", "b"], found a string "echo hi"',
      '5:1 error: `workdir`: expected an absolute path in the guest, found an array',
      '6:1 error: `kernel`: expected a file path, found a boolean false',
      '7:1 error: `cmdline`: expected a string, found a date-time 1979-05-27',
      '8:1 error: `health`: expected a table ([health]), found an integer 5',
      '9:1 error: `snapshots`: expected a table ([snapshots]), found an array',
    ]);
  });

  it('in an array are reported at the element, on its own line', () => {
    const text = 'init = [\n  "echo one",\n  2,\n  "echo three",\n  ["nested"],\n]\n';
    expect(problemsIn(text)).toEqual([
      '3:3 error: `init[1]`: expected a string, found an integer 2',
      '5:3 error: `init[3]`: expected a string, found an array',
    ]);
  });
});

describe('numbers out of range', () => {
  it.each([
    ['cpus = 0', '`cpus`: expected an integer from 1 to 64, found 0'],
    ['cpus = 65', '`cpus`: expected an integer from 1 to 64, found 65'],
    ['cpus = -1', '`cpus`: expected an integer from 1 to 64, found -1'],
    ['memory = 1', '`memory`: expected a whole number of MiB from 2 to 262144, found 1'],
    ['memory = 262_145', '`memory`: expected a whole number of MiB from 2 to 262144, found 262_145'],
    [
      'memory = 99999999999999999999',
      '`memory`: expected a whole number of MiB from 2 to 262144, found 99999999999999999999',
    ],
    ['memory = inf', '`memory`: expected a whole number of MiB from 2 to 262144, found a float inf'],
    ['[health]\nexec = ["true"]\nretries = 0', '`health.retries`: expected an integer from 1 to 1000, found 0'],
    ['[snapshots]\nauto_checkpoint = "1m"\nkeep = 0', '`snapshots.keep`: expected an integer from 1 to 10000, found 0'],
  ])('%s', (text, message) => {
    const line = text.split('\n').length;
    expect(problemsIn(text + '\n')).toEqual([`${line}:1 error: ${message}`]);
  });
});

describe('durations', () => {
  const examples = '"500ms", "10s", "2m" or "1m30s"';
  it.each([
    [
      'interval = "5 seconds"',
      `\`health.interval\`: expected a duration such as ${examples}, found a string "5 seconds"`,
    ],
    [
      'interval = 5',
      `\`health.interval\`: expected a duration such as ${examples}, found an integer 5 (write "5s" for seconds)`,
    ],
    ['timeout = "0s"', '`health.timeout`: expected a duration from 1ms to 24h, found "0s"'],
    ['startup_grace = "25h"', '`health.startup_grace`: expected a duration from 0s to 24h, found "25h"'],
  ])('[health] %s', (line, message) => {
    expect(problemsIn(`[health]\nexec = ["true"]\n${line}\n`)).toEqual([`3:1 error: ${message}`]);
  });

  it.each([
    ['"500ms"', '`snapshots.auto_checkpoint`: expected a duration from 1s to 24h, found "500ms"'],
    ['true', `\`snapshots.auto_checkpoint\`: expected a duration such as ${examples}, or "off", found a boolean true`],
    [
      '"never"',
      `\`snapshots.auto_checkpoint\`: expected a duration such as ${examples}, or "off", found a string "never"`,
    ],
  ])('auto_checkpoint = %s', (value, message) => {
    expect(problemsIn(`[snapshots]\nauto_checkpoint = ${value}\n`)).toEqual([`2:1 error: ${message}`]);
  });
});

describe('paths', () => {
  it('a missing kernel names the key, the line and the resolved path', () => {
    expect(problemsIn('memory = 16\nkernel = "guests/hello.elf"\n')).toEqual([
      `2:1 error: \`kernel\`: no such file: ${path.join(dir, 'guests/hello.elf')} (relative paths start from the ` +
        `Smolfile's directory, ${dir})`,
    ]);
    expect(problemsIn('kernel = "/nonexistent/vmlinux"\n')).toEqual([
      '1:1 error: `kernel`: no such file: /nonexistent/vmlinux',
    ]);
    expect(problemsIn('kernel = "~/vmlinux"\n')).toEqual([
      `1:1 error: \`kernel\`: no such file: ${path.join(dir, '~/vmlinux')} (relative paths start from the ` +
        `Smolfile's directory, ${dir}); ~ is not expanded`,
    ]);
  });

  it('a directory or an empty path is not a kernel', () => {
    expect(problemsIn('kernel = "a-directory"\n')).toEqual([
      `1:1 error: \`kernel\`: ${path.join(dir, 'a-directory')} is not a regular file`,
    ]);
    expect(problemsIn('kernel = ""\n')).toEqual(['1:1 error: `kernel`: expected a file path, found a string ""']);
  });

  it('an initrd goes with a bare kernel only', () => {
    expect(problemsIn('initrd = "tiny.elf"\n')).toEqual([
      '1:1 error: `initrd` needs a `kernel` to boot with: an initrd is for a bare kernel (`kernel` and `initrd`, ' +
        'no `image`)',
    ]);
    expect(problemsIn('image = "builtin"\nkernel = "tiny.elf"\ninitrd = "tiny.elf"\n')).toEqual([
      '3:1 error: `initrd` is for a bare kernel (`kernel` and no `image`); an image brings its own root ' +
        'filesystem, so remove `image` or `initrd`',
    ]);
  });

  it('a bare kernel cannot have what needs the guest agent', () => {
    expect(problemsIn('kernel = "tiny.elf"\ninit = ["true"]\nenv = ["A=1"]\n')).toEqual([
      '2:1 error: `init` needs the guest agent, which comes with an image, but this Smolfile boots a bare kernel ' +
        '(`kernel` and no `image`); add image = "builtin" or remove `init`',
      '3:1 error: `env` needs the guest agent, which comes with an image, but this Smolfile boots a bare kernel ' +
        '(`kernel` and no `image`); add image = "builtin" or remove `env`',
    ]);
  });
});

describe('values that have the right type but not the right form', () => {
  it('images that are neither builtin, debian:<suite> nor an OCI reference', () => {
    expect(problemsIn('image = "Python:3.12"\n')).toEqual([
      '1:1 error: `image`: "Python:3.12" is not an image reference: "Python" is not a repository name component ' +
        '(lower-case letters, digits and separators . _ -) (expected "builtin", "debian:<suite>" such as ' +
        '"debian:bookworm", or an OCI image: a registry reference such as "python:3.12-slim" or ' +
        '"host:port/org/app:tag", or oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE)',
    ]);
    expect(problemsIn('image = "debian:Bookworm"\n')).toEqual([
      '1:1 error: `image`: expected "debian:<suite>", found a string "debian:Bookworm" (a Debian suite is a ' +
        'lower-case name such as bookworm, trixie or stable)',
    ]);
    expect(problemsIn('image = "oci:no-such-layout:v1"\n')[0]).toMatch(
      /^1:1 error: `image`: oci: no such directory \/.*\/no-such-layout \(relative paths start from the Smolfile's directory/,
    );
  });

  it('env entries, workdir, user and cmdline', () => {
    const text = [
      'env = ["GOOD=1", "NOEQUALS", "1BAD=x", "SP ACE=x"]',
      'workdir = "relative/dir"',
      'user = "two words"',
      'cmdline = "a\\u0000b"',
    ].join('\n');
    expect(problemsIn(text)).toEqual([
      '1:18 error: `env[1]`: expected "NAME=value", found "NOEQUALS" (no =)',
      '1:30 error: `env[2]`: expected "NAME=value", found "1BAD=x" (a name is letters, digits and _, not ' +
        'starting with a digit)',
      '1:40 error: `env[3]`: expected "NAME=value", found "SP ACE=x" (a name is letters, digits and _, not ' +
        'starting with a digit)',
      '2:1 error: `workdir`: expected an absolute path, found a string "relative/dir"',
      '3:1 error: `user`: expected a user name or uid, optionally with :group, found a string "two words"',
      '4:1 error: `cmdline`: expected a command line without NUL characters, found a string "a\\u0000b"',
    ]);
  });

  it('a command line longer than the boot page holds', () => {
    expect(problemsIn(`cmdline = "${'x'.repeat(2047)}"\n`)).toEqual([]);
    expect(problemsIn(`cmdline = "${'é'.repeat(1024)}"\n`)).toEqual([
      '1:1 error: `cmdline`: expected at most 2047 bytes, found 2048',
    ]);
  });

  it('a health check without a command', () => {
    expect(problemsIn('[health]\ninterval = "5s"\n')).toEqual([
      '1:1 error: `health.exec` is missing: a health check needs a command, such as ["test", "-e", "/ready"]',
    ]);
    expect(problemsIn('[health]\nexec = []\n')).toEqual([
      '2:1 error: `health.exec`: expected a non-empty array of strings, found an array',
    ]);
  });
});

describe('warnings', () => {
  it('keep without automatic checkpoints does nothing', () => {
    expect(problemsIn('[snapshots]\nkeep = 5\n')).toEqual([
      '2:1 warning: `snapshots.keep` has no effect while `snapshots.auto_checkpoint` is off: it limits automatic ' +
        'checkpoints only',
    ]);
  });
});

describe('a file with many problems', () => {
  it('reports all of them, in file order', () => {
    const text = [
      '[health]',
      'exec = "curl -f localhost"',
      'retries = 0',
      '',
      '[snapshots]',
      'auto_checkpoint = "5 min"',
      '',
      '[ports]',
      '',
      '[extra]',
    ].join('\n');
    const lines = ['cpus = 100', 'gpu = true', text].join('\n');
    expect(
      problemsIn(lines).map((line) => line.replace(/ error: (`[^`]*`|unknown key `\w+`|smolvm's `\w+`).*/, ' $1')),
    ).toEqual([
      '1:1 `cpus`',
      "2:1 smolvm's `gpu`",
      '4:1 `health.exec`',
      '5:1 `health.retries`',
      '8:1 `snapshots.auto_checkpoint`',
      '10:1 `ports`',
      '10:1 `ports`',
      '12:1 unknown key `extra`',
    ]);
  });
});
