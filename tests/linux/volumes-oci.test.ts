// Volumes in an OCI image's episode, in the KVM lab (docs/disks.md, "Volumes"): the image (busybox-static, with sh and
// cat as its only commands) has no grep, mkdir or mount, so the volumes are mounted with our busybox in /.smol.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome } from '../engine/engine-home.js';
import { busyboxLayers, FIXTURE_CONFIG, writeLayout } from '../images/oci-fixtures.js';

const home = new EngineHome();
let scratch: string;
let vm: string;

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'smol-volumes-oci-lab-'));
  const layout = writeLayout(path.join(scratch, 'layout'), await busyboxLayers(), 'v1', {
    ...FIXTURE_CONFIG,
    author: 'tests/linux/volumes-oci.test.ts',
  });
  mkdirSync(path.join(scratch, 'src'));
  writeFileSync(path.join(scratch, 'src', 'hello.txt'), 'hello into the OCI image\n');
  mkdirSync(path.join(scratch, 'data'));
  writeFileSync(path.join(scratch, 'data', 'ro.txt'), 'read only\n');
  const smolfile = path.join(scratch, 'Smolfile');
  const volumes = 'volumes = ["./src:/mnt/src", "./data:/mnt/data:ro"]';
  writeFileSync(smolfile, `image = "oci:${layout.dir}:v1"\n${volumes}\n`);
  const warm = await Smol.connect({ home: home.dir, timeoutMs: 400_000 });
  warm.api.close?.();
  const up = await home.smol(['up', '-f', smolfile, '--json'], { timeoutMs: 600_000 });
  expect(up.status, `${up.stderr}\n${home.logTail()}`).toBe(0);
  vm = (JSON.parse(up.stdout) as { vm: { id: string } }).vm.id;
}, 900_000);
afterAll(async () => {
  await home.destroy();
  rmSync(scratch, { recursive: true, force: true });
}, 180_000);

describe('volumes in an OCI image', () => {
  it('are mounted with our busybox: the files are there, the read-only one refuses writes', async () => {
    const script = 'cat /mnt/src/hello.txt /mnt/data/ro.txt; /bin/busybox grep " /mnt/" /proc/mounts';
    const seen = await home.smol(['exec', vm, '--', '/bin/sh', '-c', script], { timeoutMs: 120_000 });
    expect(seen.status, seen.stderr).toBe(0);
    expect(seen.stdout).toMatch(/^hello into the OCI image\nread only\n/);
    expect(seen.stdout).toMatch(/ \/mnt\/src ext4 rw/);
    expect(seen.stdout).toMatch(/ \/mnt\/data ext4 ro/);
    const refused = await home.smol(['exec', vm, '--', '/bin/sh', '-c', 'echo x > /mnt/data/new'], {
      timeoutMs: 120_000,
    });
    expect(refused.status).not.toBe(0);
  }, 300_000);
});
