// An OCI image's User, Env and WorkingDir reach every command (docs/images.md, "What applies where"), in the KVM
// lab: the test's busybox image gets a third layer with an /etc/passwd and /etc/group of its own and `User: app`;
// `smol run` and `smol exec` run as app (uid 1000, gid 1001, supplementary group 1002), in the WorkingDir, with
// the Env; `-u 0` is root; an unknown user is an error naming it; `smol cp` still writes as root.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineHome } from '../engine/engine-home.js';
import { busyboxLayers, FIXTURE_CONFIG, tarOf, writeLayout } from '../images/oci-fixtures.js';

const home = new EngineHome();
let scratch: string;
let reference: string;
let vm: string;

const ID = '/bin/busybox id -u; /bin/busybox id -g; /bin/busybox id -G; pwd; echo "$HOME $USER $GREETING"';

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'smol-oci-user-'));
  const mtime = new Date('2026-01-02T03:04:05Z');
  const users = await tarOf([
    {
      header: { name: 'etc/passwd', mode: 0o644, mtime },
      data: 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:The app:/home/app:/bin/sh\n',
    },
    { header: { name: 'etc/group', mode: 0o644, mtime }, data: 'root:x:0:\napp:x:1001:\nextra:x:1002:app\n' },
    { header: { name: 'home/', type: 'directory', mode: 0o755, mtime } },
    { header: { name: 'home/app/', type: 'directory', mode: 0o700, uid: 1000, gid: 1001, mtime } },
  ]);
  const layout = writeLayout(path.join(scratch, 'layout'), [...(await busyboxLayers()), users], 'v1', {
    ...FIXTURE_CONFIG,
    author: 'tests/linux/oci-user.test.ts',
    config: { ...FIXTURE_CONFIG.config, User: 'app', WorkingDir: '/home/app', Cmd: ['/bin/sh', '-c', ID] },
  });
  reference = `oci:${layout.dir}:v1`;
}, 120_000);
afterAll(async () => {
  await home.destroy();
  rmSync(scratch, { recursive: true, force: true });
}, 180_000);

describe("an OCI image's User", () => {
  it('smol run runs the Cmd as the User, with its groups, HOME, the WorkingDir and the Env', async () => {
    const result = await home.smol(['run', '--image', reference], { timeoutMs: 900_000 });
    expect(result.status, `${result.stderr}\n${home.logTail()}`).toBe(0);
    expect(result.stdout).toBe('1000\n1001\n1001 1002\n/home/app\n/home/app app from-the-image-env\n');
  }, 900_000);

  it("smol run -u 0 runs it as root, with root's HOME from passwd", async () => {
    const root = await home.smol(['run', '--image', reference, '-u', '0', '-w', '/'], { timeoutMs: 300_000 });
    expect(root.status, `${root.stderr}\n${home.logTail()}`).toBe(0);
    expect(root.stdout).toBe('0\n0\n0\n/\n/root root from-the-image-env\n');
  }, 300_000);

  it('smol exec into a running VM gets the User, WorkingDir and Env; -u, -w and -e override them', async () => {
    const up = await home.smol(['up', '--image', reference, '--json'], { timeoutMs: 300_000 });
    expect(up.status, `${up.stderr}\n${home.logTail()}`).toBe(0);
    vm = (JSON.parse(up.stdout) as { vm: { id: string } }).vm.id;

    const exec = await home.smol(['exec', vm, '--', '/bin/sh', '-c', ID]);
    expect(exec.status, exec.stderr).toBe(0);
    expect(exec.stdout).toBe('1000\n1001\n1001 1002\n/home/app\n/home/app app from-the-image-env\n');

    const overridden = await home.smol([
      'exec',
      '-u',
      '0',
      '-w',
      '/tmp',
      '-e',
      'GREETING=asked',
      vm,
      '--',
      '/bin/sh',
      '-c',
      ID,
    ]);
    expect(overridden.status, overridden.stderr).toBe(0);
    expect(overridden.stdout).toBe('0\n0\n0\n/tmp\n/root root asked\n');

    const uid = await home.smol(['exec', '-u', '4242', '-w', '/', vm, '--', '/bin/sh', '-c', ID]);
    expect(uid.status, uid.stderr).toBe(0);
    expect(uid.stdout).toBe('4242\n0\n0\n/\n/  from-the-image-env\n'); // no USER
  }, 300_000);

  it('a user the image does not have is an error naming it', async () => {
    const bob = await home.smol(['exec', '-u', 'bob', vm, '--', '/bin/busybox', 'true']);
    expect(bob.status).not.toBe(0);
    expect(bob.stderr).toContain('EXEC: user "bob" is not in /etc/passwd');
  });

  it('smol cp writes as root where the User may not (docker cp does)', async () => {
    const file = path.join(scratch, 'note.txt');
    writeFileSync(file, 'copied in as root\n');
    const copyIn = await home.smol(['cp', file, `${vm}:/etc/note.txt`], { timeoutMs: 300_000 });
    expect(copyIn.status, copyIn.stderr).toBe(0);
    const owner = await home.smol(['exec', vm, '--', '/bin/busybox', 'stat', '-c', '%u %g', '/etc/note.txt']);
    expect(owner.stdout).toBe(`${process.getuid?.() ?? 0} ${process.getgid?.() ?? 0}\n`);
    const out = path.join(scratch, 'back.txt');
    const copyOut = await home.smol(['cp', `${vm}:/etc/note.txt`, out], { timeoutMs: 300_000 });
    expect(copyOut.status, copyOut.stderr).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe('copied in as root\n');
  }, 600_000);
});
