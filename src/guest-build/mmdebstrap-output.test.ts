import { describe, expect, it } from 'vitest';
import type { BuildProgress } from './build-progress.js';
import { MmdebstrapOutput } from './mmdebstrap-output.js';

const M = 'smol-init-0123456789ab:';
const CONTEXT = {
  suite: 'bookworm',
  mirror: 'http://deb.debian.org/debian',
  status: 'failed with status 25',
  log: '/l',
};

function feed(lines: string[], commands: string[] = []) {
  const reports: BuildProgress[] = [];
  const output = new MmdebstrapOutput(commands, M, (progress) => reports.push(progress));
  lines.forEach(output.line);
  return { output, reports };
}

// Lines as mmdebstrap 1.3.5 --verbose printed them for bookworm (trimmed).
const BUILD = [
  "I: chroot architecture amd64 is equal to the host's architecture",
  'I: running apt-get update...',
  'Get:1 http://deb.debian.org/debian bookworm InRelease [151 kB]',
  'Get:2 http://deb.debian.org/debian bookworm/main amd64 Packages [8790 kB]',
  'I: downloading packages with apt...',
  '0 upgraded, 4 newly installed, 0 to remove and 0 not upgraded.',
  'Get:1 http://deb.debian.org/debian bookworm/main amd64 gcc-12-base amd64 12.2.0-14+deb12u1 [37.6 kB]',
  'Get:2 http://deb.debian.org/debian bookworm/main amd64 libc6 amd64 2.36-9+deb12u14 [2759 kB]',
  'I: extracting archives...',
  'I: installing essential packages...',
  'Unpacking gcc-12-base:amd64 (12.2.0-14+deb12u1) ...',
  'Setting up gcc-12-base:amd64 (12.2.0-14+deb12u1) ...',
  'Setting up libc6:amd64 (2.36-9+deb12u14) ...',
];

describe('progress from mmdebstrap', () => {
  it('download counts packages fetched against what apt said it would install', () => {
    const { reports } = feed(BUILD.slice(0, 8));
    expect(reports).toEqual([
      { step: 'download', detail: 'apt-get update' },
      { step: 'download', detail: 'the essential packages' },
      { step: 'download', detail: 'get gcc-12-base 12.2.0-14+deb12u1', fraction: 0.25 },
      { step: 'download', detail: 'get libc6 2.36-9+deb12u14', fraction: 0.5 },
    ]);
  });

  it('install names each package dpkg unpacks and sets up, counting both', () => {
    const { reports } = feed(BUILD);
    expect(reports.slice(4)).toEqual([
      { step: 'install', detail: 'extracting the essential packages' },
      { step: 'install', detail: 'the essential packages' },
      { step: 'install', detail: 'unpacking gcc-12-base 12.2.0-14+deb12u1', fraction: 1 / 8 },
      { step: 'install', detail: 'setting up gcc-12-base 12.2.0-14+deb12u1', fraction: 2 / 8 },
      { step: 'install', detail: 'setting up libc6 2.36-9+deb12u14', fraction: 3 / 8 },
    ]);
  });

  it('a line redrawn with carriage returns counts as what a terminal shows last', () => {
    const { reports } = feed(['I: installing essential packages...', 'Progress: 10%\rUnpacking dash (0.5.12-2) ...\r']);
    expect(reports.at(-1)).toEqual({ step: 'install', detail: 'unpacking dash 0.5.12-2' });
  });
});

describe('init commands in mmdebstrap output', () => {
  const commands = ['apt-get install -y python3-minimal', 'echo built > /etc/smol-built'];
  const run = [
    "I: running --customize-hook in shell: sh -c 'exec >&2",
    `echo '${M} begin 0'`, // the hook's text, echoed by mmdebstrap: not a marker
    `${M} begin 0`,
    'Get:1 http://deb.debian.org/debian bookworm/main amd64 libssl3 amd64 3.0.20-1~deb12u2 [2036 kB]',
    'Setting up python3-minimal (3.11.2-1+b1) ...',
    `${M} end 0 0`,
    `${M} begin 1`,
    `${M} end 1 0`,
    'I: cleaning package lists and apt cache...',
  ];

  it('collects each command output between its markers', () => {
    const { output, reports } = feed(run, commands);
    expect(output.initOutput()).toEqual([
      {
        command: commands[0],
        output:
          'Get:1 http://deb.debian.org/debian bookworm/main amd64 libssl3 amd64 3.0.20-1~deb12u2 [2036 kB]\n' +
          'Setting up python3-minimal (3.11.2-1+b1) ...\n',
      },
      { command: commands[1], output: '' },
    ]);
    expect(reports).toEqual([
      { step: 'init', detail: '[1/2] apt-get install -y python3-minimal', fraction: 0 },
      // A long line is cut to 100 characters.
      { step: 'init', detail: `[1/2] ${run[3]!.slice(0, 93)}…` },
      { step: 'init', detail: '[1/2] Setting up python3-minimal (3.11.2-1+b1) ...' },
      { step: 'init', detail: '[2/2] echo built > /etc/smol-built', fraction: 0.5 },
      { step: 'image', detail: "emptying apt's package lists and cache" },
    ]);
  });

  it('a failing command is named, with its status and output, and the log', () => {
    const { output } = feed(
      [
        `${M} begin 0`,
        'E: Unable to locate package pyhton3',
        `${M} end 0 100`,
        "E: command failed: sh -c 'exec >&2 ...'",
        'E: mmdebstrap failed to run',
      ],
      ['apt-get install -y pyhton3'],
    );
    expect(output.initOutput()).toEqual([]);
    expect(output.explainFailure(CONTEXT)).toBe(
      'init command 1 of 1 failed with status 100: apt-get install -y pyhton3; its output:\n' +
        '  E: Unable to locate package pyhton3\nfull log: /l',
    );
  });

  it('a command that never ended says so', () => {
    const { output } = feed([`${M} begin 0`], ['sleep 1000']);
    expect(output.explainFailure(CONTEXT)).toBe(
      'init command 1 of 1 did not finish: sleep 1000 (no output); full log: /l',
    );
  });
});

describe('why mmdebstrap failed, in one message', () => {
  it('a suite the mirror does not have', () => {
    const { output } = feed([
      'I: running apt-get update...',
      'Err:2 http://deb.debian.org/debian nosuchsuite Release',
      '  404  Not Found [IP: 203.0.113.80 80]',
      "E: The repository 'http://deb.debian.org/debian nosuchsuite Release' does not have a Release file.",
      'E: apt-get update --error-on=any -oAPT::Status-Fd=<$fd> -oDpkg::Use-Pty=false failed',
      'E: mmdebstrap failed to run',
    ]);
    expect(output.explainFailure({ ...CONTEXT, suite: 'nosuchsuite' })).toBe(
      "the mirror http://deb.debian.org/debian has no suite nosuchsuite (no Release file); check the Smolfile's " +
        'image; full log: /l',
    );
  });

  it('no network', () => {
    const { output } = feed([
      'I: running apt-get update...',
      "E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'",
      'E: Some index files failed to download. They have been ignored, or old ones used instead.',
      'E: apt-get update --error-on=any -oAPT::Status-Fd=<$fd> -oDpkg::Use-Pty=false failed',
      'E: mmdebstrap failed to run',
    ]);
    expect(output.explainFailure(CONTEXT)).toBe(
      'cannot reach the Debian mirror http://deb.debian.org/debian: Failed to fetch ' +
        "http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'; " +
        'the image is built on this machine, which needs its network for it; full log: /l',
    );
  });

  it('a package the suite lacks', () => {
    const { output } = feed(['E: Unable to locate package busybox-static', 'E: mmdebstrap failed to run']);
    expect(output.explainFailure(CONTEXT)).toBe('bookworm has no package busybox-static; full log: /l');
  });

  it('any other error: the first one that says why', () => {
    const { output } = feed(['E: cannot create /nowhere: Permission denied', 'E: mmdebstrap failed to run']);
    expect(output.explainFailure(CONTEXT)).toBe(
      'mmdebstrap failed: cannot create /nowhere: Permission denied; full log: /l',
    );
  });

  it('no error line at all: the status and the last lines', () => {
    const { output } = feed(['I: running apt-get update...', 'Segmentation fault']);
    expect(output.explainFailure(CONTEXT)).toBe(
      'mmdebstrap failed with status 25; its last lines:\n  I: running apt-get update...\n  Segmentation fault\n' +
        'full log: /l',
    );
  });
});
