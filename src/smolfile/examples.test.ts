import { readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../package-root.js';
import { formatProblem, loadSmolfile } from './smolfile.js';

const dir = path.join(packageRoot, 'smolfiles');
const examples = readdirSync(dir).filter((name) => name.endsWith('.smolfile') || name === 'Smolfile');

describe('the example Smolfiles in smolfiles/', () => {
  it('include a bare tiny guest and the default Linux guest', () => {
    expect(examples).toEqual(expect.arrayContaining(['hello.smolfile', 'shell.smolfile']));
  });

  it.each(examples)('%s validates without errors or warnings', async (name) => {
    const { smolfile, problems } = await loadSmolfile(path.join(dir, name));
    // A missing native/out/guests/*.elf means the guests are not built: make -C native guests (npm ci does it).
    expect(problems.map((problem) => formatProblem(`smolfiles/${name}`, problem))).toEqual([]);
    expect(smolfile).not.toBeNull();
  });

  it('hello.smolfile boots the hello guest from native/out, in 16 MiB', async () => {
    const { smolfile } = await loadSmolfile(path.join(dir, 'hello.smolfile'));
    expect(smolfile).toMatchObject({
      image: null,
      kernel: path.join(packageRoot, 'native/out/guests/hello.elf'),
      memoryMiB: 16,
    });
  });

  it('shell.smolfile runs the builtin image with init commands and automatic checkpoints', async () => {
    const { smolfile } = await loadSmolfile(path.join(dir, 'shell.smolfile'));
    expect(smolfile).toMatchObject({
      image: { kind: 'builtin' },
      kernel: null,
      cpus: 2,
      snapshots: { autoCheckpointMs: 5 * 60_000, keep: 12 },
    });
    expect(smolfile?.init.length).toBeGreaterThan(0);
  });

  it('debian.smolfile asks for a Debian bookworm image with init commands (built by smol image build)', async () => {
    const { smolfile } = await loadSmolfile(path.join(dir, 'debian.smolfile'));
    expect(smolfile).toMatchObject({ image: { kind: 'debian', suite: 'bookworm' }, kernel: null });
    // tests/linux/debian-image.test.ts boots this image and checks what these made.
    expect(smolfile?.init).toContain('echo built > /etc/smol-built');
  });
});
