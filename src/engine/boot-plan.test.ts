// What the engine boots for a Smolfile (docs/engine.md, "Base snapshots", "Disks"): the builtin image from its root
// disk, a bare kernel as it is, and the base key that decides when a base snapshot can be reused.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiFailure } from '../api/engine-api.js';
import { imagesDir, locateDebianImage } from '../guest-build/debian-image.js';
import { GUEST_IP_CMDLINE, updateCurrentGuest } from '../guest-build/guest-assets.js';
import { parseSmolfile, type Smolfile } from '../smolfile/smolfile.js';
import { planBoot, prepareImage, RESOLV_CONF_COMMAND } from './boot-plan.js';

let cache: string;
let env: NodeJS.ProcessEnv;

beforeEach(() => {
  cache = mkdtempSync(path.join(os.tmpdir(), 'smol-plan-'));
  env = { SMOL_CACHE: cache };
});
afterEach(() => rmSync(cache, { recursive: true, force: true }));

/** A guest cache as `smol guest build` leaves it: a kernel, an initramfs and (unless told not to) a root disk. */
function builtGuest({ rootfs = true } = {}): { kernel: string; rootfs: string } {
  const dir = path.join(cache, 'guest');
  mkdirSync(path.join(dir, 'kernel-aaaa'), { recursive: true });
  writeFileSync(path.join(dir, 'kernel-aaaa', 'vmlinux'), 'kernel');
  writeFileSync(path.join(dir, 'initramfs-bbbb.cpio'), 'initramfs');
  if (rootfs) writeFileSync(path.join(dir, 'rootfs-cccc.ext4'), 'ext4');
  updateCurrentGuest(dir, {
    kernel: { hash: 'aaaa', vmlinux: 'kernel-aaaa/vmlinux', bzImage: 'kernel-aaaa/bzImage' },
    initramfs: { hash: 'bbbb', file: 'initramfs-bbbb.cpio' },
    ...(rootfs && { rootfs: { hash: 'cccc', file: 'rootfs-cccc.ext4' } }),
  });
  return { kernel: path.join(dir, 'kernel-aaaa', 'vmlinux'), rootfs: path.join(dir, 'rootfs-cccc.ext4') };
}

function smolfile(text: string): Smolfile {
  const { smolfile: parsed, problems } = parseSmolfile(text, { path: path.join(cache, 'test.smolfile') });
  expect(problems.filter((p) => p.severity === 'error')).toEqual([]);
  return parsed!;
}

describe('planBoot', () => {
  it('boots the builtin image from its root disk: no initrd, / on /dev/vda, an rng, hvc0, the agent', () => {
    const guest = builtGuest();
    const plan = planBoot(smolfile('image = "builtin"\ncpus = 2\nmemory = 512\n'), env);
    expect(plan.options).toMatchObject({ kernel: guest.kernel, disk: { base: guest.rootfs }, rng: true, cpus: 2 });
    expect(plan.options.initrd).toBeUndefined();
    expect(plan.options.cmdline).toMatch(/\broot=\/dev\/vda rw rootwait init=\/init\b/);
    expect(plan.options.cmdline).toMatch(/(^| )console=hvc0 /);
    expect(plan.options.virtioConsole).toBe(true);
    expect(plan.agent).toBe(true);
    expect(plan.baseKey).toMatch(/^[0-9a-f]{32}$/);
  });

  it('gives each volume a disk of its image, mounts it first when baking, and keys the base on its content', async () => {
    builtGuest();
    const folder = path.join(cache, 'src');
    mkdirSync(folder);
    writeFileSync(path.join(folder, 'a.txt'), 'one');
    mkdirSync(path.join(cache, 'data'));
    const text = 'volumes = ["./src:/app", "./data:/data:ro"]\ninit = ["cat /app/a.txt"]\n';
    await prepareImage(smolfile(text), () => undefined, env);
    const plan = planBoot(smolfile(text), env);
    expect(plan.volumes.map((v) => [v.device, v.guest, v.readOnly])).toEqual([
      ['virtio-blk-1', '/app', false],
      ['virtio-blk-2', '/data', true],
    ]);
    expect(plan.options.volumes).toEqual(plan.volumes.map((v) => ({ base: v.image })));
    expect(plan.volumes[0]!.image).toMatch(new RegExp(`^${imagesDir(env)}/volume-[0-9a-f]{16}\\.ext4$`));
    expect(plan.init.slice(0, 3)).toEqual([
      expect.stringMatching(/grep -lx smol-vol1 .* mount -t ext4 \/dev\/\$\{d##\*\/\} '\/app'\)$/),
      expect.stringMatching(/grep -lx smol-vol2 .* mount -t ext4 -o ro \/dev\/\$\{d##\*\/\} '\/data'\)$/),
      '(cat /app/a.txt)',
    ]);
    // The same folders: the same base. A changed folder: another base (one episode's files never in another's).
    expect(planBoot(smolfile(text), env).baseKey).toBe(plan.baseKey);
    writeFileSync(path.join(folder, 'a.txt'), 'two!');
    await prepareImage(smolfile(text), () => undefined, env);
    expect(planBoot(smolfile(text), env).baseKey).not.toBe(plan.baseKey);
    expect(planBoot(smolfile('init = ["cat /app/a.txt"]\n'), env).volumes).toEqual([]);
  });

  it("gives a networked image eth0 from ip= and the stack's resolver first, in a base of its own", () => {
    const guest = builtGuest();
    writeFileSync(path.join(path.dirname(guest.kernel), 'config'), 'CONFIG_VIRTIO_NET=y\n');
    const networked = planBoot(smolfile('net = true\nports = ["3000"]\ninit = ["echo hi"]\n'), env);
    expect(networked.options.cmdline).toContain(` ${GUEST_IP_CMDLINE}`);
    expect(networked.init[0]).toBe(RESOLV_CONF_COMMAND);
    expect(networked.init[1]).toMatch(/echo hi/);
    const plain = planBoot(smolfile('net = false\ninit = ["echo hi"]\n'), env);
    expect(plain.options.cmdline).not.toMatch(/\bip=/);
    expect(plain.init).not.toContain(RESOLV_CONF_COMMAND);
    expect(networked.baseKey).not.toBe(plain.baseKey);
    // The allow lists and ports are the host's (the stack's resource), not the guest's: one base serves them all.
    const other = planBoot(smolfile('net = true\nports = ["8080:80"]\ninit = ["echo hi"]\n'), env);
    expect(other.baseKey).toBe(networked.baseKey);
  });

  it('refuses net = true on a guest kernel built without virtio-net, naming the command that builds one', () => {
    const guest = builtGuest();
    writeFileSync(path.join(path.dirname(guest.kernel), 'config'), 'CONFIG_VIRTIO_BLK=y\n');
    expect(() => planBoot(smolfile('net = true\n'), env)).toThrow(
      /built without a virtio-net driver .*smol guest build/,
    );
    expect(() => planBoot(smolfile('net = false\n'), env)).not.toThrow();
  });

  it('says what to run when the root disk was never built', () => {
    builtGuest({ rootfs: false });
    let failure: unknown;
    try {
      planBoot(smolfile('image = "builtin"\n'), env);
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeInstanceOf(ApiFailure);
    expect((failure as ApiFailure).message).toMatch(/root disk.*smol guest build/);
  });

  it('gives a new base key when init, memory or the root disk image change, and the same one otherwise', () => {
    builtGuest();
    const key = (text: string) => planBoot(smolfile(text), env).baseKey;
    const base = key('init = ["echo a"]\n');
    expect(key('init = ["echo a"]\n')).toBe(base);
    expect(key('init = ["echo b"]\n')).not.toBe(base);
    expect(key('init = ["echo a"]\nmemory = 1024\n')).not.toBe(base);
    const dir = path.join(cache, 'guest');
    writeFileSync(path.join(dir, 'rootfs-dddd.ext4'), 'ext4');
    updateCurrentGuest(dir, { rootfs: { hash: 'dddd', file: 'rootfs-dddd.ext4' } });
    expect(key('init = ["echo a"]\n')).not.toBe(base);
  });

  it('boots a bare kernel as it is: no disk, no agent, no base', () => {
    const kernel = path.join(cache, 'vmlinux');
    writeFileSync(kernel, 'kernel');
    const plan = planBoot(smolfile(`kernel = "${kernel}"\ncmdline = "console=ttyS0"\n`), env);
    expect(plan.options.disk).toBeUndefined();
    expect(plan.options.virtioConsole).toBeUndefined();
    expect(plan).toMatchObject({ baseKey: null, agent: false, init: [] });
  });

  it('gives a bare kernel a virtio-console when its command line names hvc0 as the console', () => {
    const kernel = path.join(cache, 'vmlinux');
    writeFileSync(kernel, 'kernel');
    const wants = (cmdline: string) =>
      planBoot(smolfile(`kernel = "${kernel}"\ncmdline = "${cmdline}"\n`), env).options.virtioConsole === true;
    expect(wants('console=hvc0')).toBe(true);
    expect(wants('lines=10 console=hvc0 quiet')).toBe(true);
    expect(wants('console=ttyS0 console=hvc0')).toBe(true);
    expect(wants('console=hvc01')).toBe(false);
    expect(wants('xconsole=hvc0')).toBe(false);
    expect(wants('console=ttyS0')).toBe(false);
  });

  it('boots a Debian image from its built disk; its init ran at build time, so the base runs only env and workdir', () => {
    const guest = builtGuest();
    const text = 'image = "debian:bookworm"\ninit = ["echo at-build"]\nenv = ["A=1"]\nworkdir = "/w"\n';
    let failure: unknown;
    try {
      planBoot(smolfile(text), env);
    } catch (error) {
      failure = error;
    }
    expect((failure as ApiFailure).status).toBe(409);
    expect((failure as ApiFailure).message).toMatch(/is not built: run `npx --no-install smol image build -f /);

    const image = locateDebianImage({ suite: 'bookworm', init: ['echo at-build'], env: { A: '1' } }, imagesDir(env));
    mkdirSync(path.dirname(image.file), { recursive: true });
    writeFileSync(image.file, 'ext4');
    const plan = planBoot(smolfile(text), env);
    expect(plan.options).toMatchObject({ kernel: guest.kernel, disk: { base: image.file }, rng: true });
    expect(plan.init.join('\n')).not.toMatch(/at-build/);
    expect(plan.init.join('\n')).toMatch(/export A='1'/);
    expect(plan.agent).toBe(true);
  });
});
