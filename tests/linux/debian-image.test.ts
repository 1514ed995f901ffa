// Tier 3: a `debian:bookworm` image (docs/images.md) booted on our VMM from its ext4 root disk, with no initramfs: the
// image smolfiles/debian.smolfile asks for, built on the host by `smol image build` before the lab runs (the build
// needs the network, the lab has none and a read-only root), found here by the same cache key. Debian's own files,
// the Smolfile's init commands' results, bash on the console and the agent on vsock must all be there.
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AgentClient } from '../../src/agent-client/agent-client.js';
import { locateDebianImage } from '../../src/guest-build/debian-image.js';
import { GUEST_CMDLINE, GUEST_ROOT_CMDLINE } from '../../src/guest-build/guest-assets.js';
import { packageRoot } from '../../src/package-root.js';
import { formatProblem, loadSmolfile } from '../../src/smolfile/smolfile.js';
import { EngineHome } from '../engine/engine-home.js';
import { bootLinux, linuxWorkspace } from './linux-guest.js';

const SMOLFILE = path.join(packageRoot, 'smolfiles', 'debian.smolfile');
const AGENT_PORT = 52;
const READY_MS = 120_000;

const { work, vms, clients } = linuxWorkspace('smol-linux-debian-');

/** The image of smolfiles/debian.smolfile; fails with what to run when it is not built. Never builds. */
async function builtImage(): Promise<string> {
  const { smolfile, problems } = await loadSmolfile(SMOLFILE);
  if (smolfile?.image?.kind !== 'debian') {
    throw new Error(`${SMOLFILE}: not a debian image: ${problems.map((p) => formatProblem(SMOLFILE, p)).join('; ')}`);
  }
  const image = locateDebianImage({ suite: smolfile.image.suite, init: smolfile.init, env: smolfile.env });
  if (!image.built) {
    throw new Error(
      `${image.file} is not built: run \`node bin/smol.js image build -f smolfiles/debian.smolfile\` as root ` +
        'before the lab (it needs the network)',
    );
  }
  return image.file;
}

describe('a debian:bookworm image', () => {
  it('boots from its root disk to bash and the agent, with Debian 12 and what init made', async () => {
    const base = await builtImage();
    // A directory of its own: inside the lab a failed test is tried again, and layers are never reused by another try.
    const dir = mkdtempSync(path.join(work, 'attempt-'));
    const socket = path.join(dir, 'vm.vsock');
    const guest = await bootLinux(
      {
        initrd: undefined,
        cmdline: `${GUEST_CMDLINE} ${GUEST_ROOT_CMDLINE}`,
        disk: { base, top: path.join(dir, 'top') },
        memoryMiB: 512,
        cpus: 1,
        vsock: { path: socket, cid: 45 },
      },
      { waitForShell: false },
    );
    vms.push(guest.vm);
    await guest.waitFor(/smol-guest: ready/, READY_MS);
    await guest.run('true', READY_MS); // the login shell answers

    expect(await guest.run('cat /etc/debian_version')).toMatch(/^12\.\d+\n$/);
    expect(await guest.run('cat /etc/smol-built')).toBe('built\n'); // init's second command, run at build time
    expect(await guest.run("python3 -c 'print(6 * 7)'")).toBe('42\n'); // init's first: apt-get install python3-minimal
    expect(await guest.run('readlink /proc/$$/exe')).toBe('/usr/bin/bash\n');
    expect(await guest.run('hostname')).toBe('smol\n');
    expect(await guest.run("grep ' / ' /proc/mounts")).toMatch(/^\S+ \/ ext4 rw[, ]/);
    expect(await guest.run('findfs LABEL=smol-root 2>/dev/null || busybox findfs LABEL=smol-root')).toBe('/dev/vda\n');
    for (const point of ['/tmp', '/run', '/dev/shm']) {
      expect(await guest.run(`grep ' ${point} ' /proc/mounts`)).toMatch(new RegExp(`^tmpfs ${point} tmpfs `));
    }
    // What only the build needed is gone: the host's resolver, apt's package lists and downloaded packages.
    expect(
      await guest.run(
        'ls /etc/resolv.conf /var/lib/apt/lists/*_Packages /var/cache/apt/archives/*.deb 2>&1 | grep -vc "No such file"',
      ),
    ).toBe('0\n');

    // The agent, started by busybox init from the image's /etc/inittab, answers over vsock.
    const agent = new AgentClient({ socketPath: socket, vsockPort: AGENT_PORT });
    clients.push(agent);
    await agent.ready({ timeoutMs: READY_MS });
    const result = await agent.exec(['cat', '/etc/debian_version']);
    expect(result.stdout.toString()).toMatch(/^12\./);
    agent.close();

    // `poweroff` is busybox's (minbase has no init system): busybox init remounts / read-only, then ACPI S5.
    guest.type('poweroff');
    expect(await guest.exited).toMatchObject({ reason: 'poweroff', code: 0 });
  }, 600_000);
});

describe('an episode of smolfiles/debian.smolfile, through the engine', () => {
  const home = new EngineHome();
  afterAll(() => home.destroy(), 180_000);

  it('runs a command with smol run; an episode keeps what it wrote on its disk across a checkpoint and restore', async () => {
    await builtImage();
    const run = await home.smol(['run', '-f', SMOLFILE, '--', 'python3', '-c', 'print(6 * 7)'], {
      timeoutMs: 600_000,
    });
    expect(run.stderr).toBe('');
    expect(run).toMatchObject({ status: 0, stdout: '42\n' });

    const smol = await home.client();
    const { vm } = await smol.up(SMOLFILE, { name: 'debian' });
    await smol.writeFile(vm.id, '/opt/tool.py', 'print("tool ok")\n');
    const snapshot = await smol.checkpoint(vm.id, { name: 'with-tool' });
    await smol.exec(vm.id, ['rm', '/opt/tool.py']);
    await smol.restore(vm.id, snapshot.id);
    const result = await smol.exec(vm.id, [
      'sh',
      '-c',
      'sync; echo 3 > /proc/sys/vm/drop_caches; python3 /opt/tool.py',
    ]);
    expect(result.stdout.toString()).toBe('tool ok\n');
  }, 900_000);
});
