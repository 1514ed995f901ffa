// Tier 3: the guest booted from its root disk, the ext4 image `smol guest build` makes for the builtin image
// (docs/guest.md, "The root disk"): no initramfs, the image as the disk's read-only base, a layer of this test's own
// over it. The same /init and inittab as the initramfs bring up the shell and the guest agent; the file system the
// guest writes is on the disk, and an orderly poweroff leaves it clean for the next boot.
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { AgentClient } from '../../src/agent-client/agent-client.js';
import { GUEST_ROOT_CMDLINE } from '../../src/guest-build/guest-assets.js';
import { ROOTFS_SIZE_BYTES } from '../../src/guest-build/rootfs-build.js';
import { bootRootDisk, linuxWorkspace } from './linux-guest.js';

const { work, vms, clients } = linuxWorkspace('smol-linux-rootfs-');

const AGENT_PORT = 52;
const READY_MS = 90_000;

describe('the Linux guest on its root disk', () => {
  it('boots with no initramfs to the shell and the agent, on ext4 on /dev/vda, read-write; writes persist', async () => {
    // A directory of its own: inside the lab a failed test is tried again, and layers are never reused by another try.
    const dir = mkdtempSync(path.join(work, 'attempt-'));
    const top = path.join(dir, 'top');
    const socket = path.join(dir, 'vm.vsock');
    const guest = await bootRootDisk(top, { vsock: { path: socket, cid: 44 } });
    vms.push(guest.vm);
    expect(guest.output()).toMatch(/smol-guest: ready/);
    expect(await guest.run('cat /proc/cmdline')).toContain(GUEST_ROOT_CMDLINE);

    // / is the ext4 on the disk, mounted read-write by the kernel (as /dev/root); its device is vda's.
    expect(await guest.run("grep ' / ' /proc/mounts")).toMatch(/^\S+ \/ ext4 rw[, ]/);
    const rootDevice = await guest.run(`awk '$5 == "/" { print $3 }' /proc/self/mountinfo`);
    expect(rootDevice).toBe(await guest.run('cat /sys/block/vda/dev'));
    expect(await guest.run('findfs LABEL=smol-root')).toBe('/dev/vda\n');
    expect(await guest.run('cat /sys/block/vda/size')).toBe(`${ROOTFS_SIZE_BYTES / 512}\n`);
    // The kernel mounted devtmpfs on /dev, and /init did not mount a second one over it; /tmp is still a tmpfs.
    expect(await guest.run("grep ' /dev ' /proc/mounts")).toMatch(/^devtmpfs \/dev devtmpfs /);
    expect(await guest.run("grep -c ' /dev ' /proc/mounts")).toBe('1\n');
    expect(await guest.run("grep ' /tmp ' /proc/mounts")).toMatch(/^tmpfs \/tmp tmpfs /);

    // A file written on /, synced to the disk.
    expect(await guest.run('echo on-the-disk-$((6 * 7)) > /root/note && sync && cat /root/note')).toBe(
      'on-the-disk-42\n',
    );

    // The agent, started by busybox init from the disk's /etc/inittab, answers over vsock and sees the file.
    expect(await guest.run('pidof smol-agent')).toMatch(/^\d+\n$/);
    const agent = new AgentClient({ socketPath: socket, vsockPort: AGENT_PORT });
    clients.push(agent);
    await agent.ready({ timeoutMs: READY_MS });
    expect((await agent.exec(['cat', '/root/note'])).stdout.toString()).toBe('on-the-disk-42\n');
    agent.close();

    // An orderly poweroff: busybox init makes / read-only first, so the file system is left clean.
    guest.type('poweroff');
    expect(await guest.exited).toMatchObject({ reason: 'poweroff', code: 0 });

    // Booted again on the same layer: the file is there, and the journal had nothing to recover.
    const again = await bootRootDisk(top);
    vms.push(again.vm);
    expect(await again.run('cat /root/note')).toBe('on-the-disk-42\n');
    expect(await again.run('dmesg | grep -c "EXT4-fs (vda): recovery complete"')).toBe('0\n');
    expect(await again.run("dmesg | grep -c 'EXT4-fs (vda): mounted filesystem'")).toBe('1\n');
    again.type('poweroff -f');
    expect(await again.exited).toMatchObject({ reason: 'poweroff', code: 0 });
  }, 600_000);
});
