// An OCI image as an episode's root disk (docs/images.md), in the KVM lab: the test writes an OCI layout from the
// host's busybox-static (a second layer whites out /etc/doomed), and `smol run --image oci:DIR:v1` with no Smolfile
// pulls it, converts it, boots it on our VMM with our init from /.smol, and runs the image's Cmd in its WorkingDir
// with its Env through the agent; a command after -- replaces the Cmd.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineHome } from '../engine/engine-home.js';
import { busyboxLayers, FIXTURE_CONFIG, writeLayout } from '../images/oci-fixtures.js';

const home = new EngineHome();
let scratch: string;
let reference: string;

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'smol-oci-lab-'));
  const layout = writeLayout(path.join(scratch, 'layout'), await busyboxLayers(), 'v1', {
    ...FIXTURE_CONFIG,
    author: 'tests/linux/oci-image.test.ts',
  });
  reference = `oci:${layout.dir}:v1`;
});
afterAll(async () => {
  await home.destroy();
  rmSync(scratch, { recursive: true, force: true });
}, 180_000);

describe('smol run --image with an OCI image', () => {
  it("runs the image's Cmd in its WorkingDir with its Env, from a disk made of its layers", async () => {
    const result = await home.smol(['run', '--image', reference], { timeoutMs: 600_000 });
    expect(result.status, `${result.stderr}\n${home.logTail()}`).toBe(0);
    expect(result.stdout).toBe('cmd ran in /app with from-the-image-env\nhello from the image\n');
  }, 600_000);

  it('a command after -- replaces the Cmd; the whited-out file is gone; our init is PID 1', async () => {
    // The image has busybox's sh and cat as commands; the rest through /bin/busybox.
    const script = [
      'test -e /etc/doomed && echo doomed-is-there || echo doomed-gone',
      'cat /app/data.txt',
      '/bin/busybox tr "\\0" " " < /proc/1/cmdline; echo',
      "/bin/busybox stat -c '%A %u %g' /etc/greeting",
    ].join('; ');
    const result = await home.smol(['run', '--image', reference, '--', '/bin/sh', '-c', script], {
      timeoutMs: 300_000,
    });
    expect(result.status, `${result.stderr}\n${home.logTail()}`).toBe(0);
    const lines = result.stdout.split('\n');
    expect(lines[0]).toBe('doomed-gone');
    expect(lines[1]).toBe('data in the workdir');
    expect(lines[2]).toBe('/.smol/busybox init ');
    expect(lines[3]).toBe('-rw-r----- 1000 1001');
  }, 300_000);
});
