// Volumes in the KVM lab (docs/disks.md, "Volumes"): a Smolfile's folders as disks of their own in a builtin-image
// guest. The read-write one is mounted with the host's files, its writes survive a checkpoint and a restore, fork
// children write apart; the read-only one refuses writes; the host folder never sees the guest's writes.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome } from '../engine/engine-home.js';

const home = new EngineHome();
let scratch: string;
let vm: string;

async function sh(target: string, script: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return home.smol(['exec', target, '--', 'sh', '-c', script], { timeoutMs: 120_000 });
}

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'smol-volumes-lab-'));
  mkdirSync(path.join(scratch, 'src', 'nested'), { recursive: true });
  writeFileSync(path.join(scratch, 'src', 'nested', 'hello.txt'), 'hello from the host\n');
  mkdirSync(path.join(scratch, 'data'));
  writeFileSync(path.join(scratch, 'data', 'ro.txt'), 'read only\n');
  const smolfile = path.join(scratch, 'Smolfile');
  writeFileSync(
    smolfile,
    [
      'image = "builtin"',
      'volumes = ["./src:/app", "./data:/data:ro"]',
      'init = ["cat /app/nested/hello.txt"]',
      '',
    ].join('\n'),
  );
  // The engine's first start under TCG can take longer than the CLI's 60 s: started here, with room.
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

describe('volumes', () => {
  it('mounts the folders: the read-write one with the host files, the read-only one refusing writes', async () => {
    const seen = await sh(vm, 'cat /app/nested/hello.txt /data/ro.txt; grep -E " /(app|data) " /proc/mounts');
    expect(seen.status, seen.stderr).toBe(0);
    expect(seen.stdout).toMatch(/^hello from the host\nread only\n/);
    expect(seen.stdout).toMatch(/ \/app ext4 rw/);
    expect(seen.stdout).toMatch(/ \/data ext4 ro/);
    const refused = await sh(vm, 'echo no > /data/new.txt');
    expect(refused.status).not.toBe(0);
    // Even a remount cannot write: the disk itself is read-only (VIRTIO_BLK_F_RO).
    const remount = await sh(vm, 'mount -o remount,rw /data');
    expect(remount.status).not.toBe(0);
  }, 300_000);

  it('a write survives a checkpoint and a restore, and the host folder never sees it', async () => {
    expect((await sh(vm, 'echo one > /app/state && sync')).status).toBe(0);
    const snap = await home.json<{ id: string }>(['checkpoint', vm, '-m', 'one']);
    expect((await sh(vm, 'echo two > /app/state && sync && cat /app/state')).stdout).toBe('two\n');
    await home.json(['restore', vm, snap.id]);
    expect((await sh(vm, 'cat /app/state')).stdout).toBe('one\n');
    expect(() => readFileSync(path.join(scratch, 'src', 'state'))).toThrow();
  }, 600_000);

  it('fork children write apart', async () => {
    const forked = await home.json<{ children: Array<{ id: string }> }>(['fork', vm, '-n', '2']);
    const [a, b] = forked.children.map((child) => child.id) as [string, string];
    expect((await sh(a, 'echo child-a > /app/state && sync')).status).toBe(0);
    expect((await sh(b, 'echo child-b > /app/state && sync')).status).toBe(0);
    expect((await sh(a, 'cat /app/state')).stdout).toBe('child-a\n');
    expect((await sh(b, 'cat /app/state')).stdout).toBe('child-b\n');
    expect((await sh(vm, 'cat /app/state')).stdout).toBe('one\n');
  }, 600_000);
});
