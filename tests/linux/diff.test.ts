// `smol diff` in the KVM lab (docs/diff.md): a builtin-image guest with a read-write volume changes files between
// two checkpoints; the diff of the two names exactly what was added, removed and changed on the volume's disk (read
// by the sandboxed debugfs from the exported chains), a text diff of the edited file, and the console between.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome } from '../engine/engine-home.js';

const home = new EngineHome();
let scratch: string;
let vm: string;

async function sh(script: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return home.smol(['exec', vm, '--', 'sh', '-c', script], { timeoutMs: 120_000 });
}

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'smol-diff-lab-'));
  mkdirSync(path.join(scratch, 'src', 'keep'), { recursive: true });
  writeFileSync(path.join(scratch, 'src', 'notes.txt'), 'one\ntwo\nthree\n');
  writeFileSync(path.join(scratch, 'src', 'gone.txt'), 'bye\n');
  writeFileSync(path.join(scratch, 'src', 'keep', 'same.txt'), 'unchanged\n');
  writeFileSync(path.join(scratch, 'src', 'run.sh'), 'echo\n');
  const smolfile = path.join(scratch, 'Smolfile');
  writeFileSync(smolfile, ['image = "builtin"', 'volumes = ["./src:/app"]', ''].join('\n'));
  const warm = await Smol.connect({ home: home.dir, timeoutMs: 400_000 });
  warm.api.close?.();
  const up = await home.smol(['up', '-f', smolfile, '--json'], { timeoutMs: 600_000 });
  expect(up.status, `${up.stderr}\n${home.logTail()}`).toBe(0);
  vm = (JSON.parse(up.stdout) as { vm: { id: string } }).vm.id;
}, 600_000);
afterAll(async () => {
  await home.destroy();
  rmSync(scratch, { recursive: true, force: true });
}, 180_000);

describe('smol diff', () => {
  it('names the files added, removed and changed on the volume between two checkpoints, with a text diff', async () => {
    const before = await home.json<{ id: string; name: string }>(['checkpoint', vm]);
    const changed = await sh(
      'cd /app && printf "one\\nTWO\\nthree\\n" > notes.txt && rm gone.txt && mkdir new && echo hi > new/hello.txt ' +
        '&& chmod 755 run.sh && ln -s notes.txt link && echo diff-marker-between && sync',
    );
    expect(changed.status, changed.stderr).toBe(0);
    const after = await home.json<{ id: string }>(['checkpoint', vm]);

    const smol = await home.client();
    const diff = await smol.diff(before.id, after.id);
    const volume = diff.disks.find((disk) => disk.device === 'virtio-blk-1');
    expect(volume, JSON.stringify(diff.disks)).toBeDefined();
    expect(volume!.error).toBeNull();
    const by = Object.fromEntries(volume!.files.map((file) => [file.path, file]));
    expect(Object.keys(by).sort()).toEqual(['/gone.txt', '/link', '/new', '/new/hello.txt', '/notes.txt', '/run.sh']);
    expect(by['/gone.txt']!.change).toBe('removed');
    expect(by['/new/hello.txt']).toMatchObject({ change: 'added', after: { type: 'file', size: 3 } });
    expect(by['/link']).toMatchObject({ change: 'added', after: { type: 'symlink', target: 'notes.txt' } });
    expect(by['/run.sh']).toMatchObject({ change: 'changed', before: { mode: '0644' }, after: { mode: '0755' } });
    expect(by['/notes.txt']).toMatchObject({ change: 'changed', fields: ['content'] });
    expect(by['/notes.txt']!.diff).toContain('-two\n+TWO\n');

    const cli = await home.smol(['diff', before.id, after.id]);
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout).toContain('virtio-blk-1: 3 added, 1 removed, 2 changed');
    expect(cli.stdout).toContain('+ /new/hello.txt');
  }, 600_000);
});
