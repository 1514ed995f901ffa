// Boots the Linux guest `smol guest build` made (its vmlinux, and its base initramfs or root disk) on our VMM, for the
// Linux tests.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';
import type { AgentClient } from '../../src/agent-client/agent-client.js';
import { findGuestAssets, GUEST_CMDLINE, GUEST_ROOT_CMDLINE } from '../../src/guest-build/guest-assets.js';
import { Vm, type VmExit, type VmOptions } from '../../src/vmm/vm.js';
import { watchConsole, type RunningGuest } from '../vmm/guests.js';

/** The built guest; fails with what to run when it is missing (npm test builds it before this part). */
export function builtGuest(): { kernel: string; bzImage: string; initramfs: string; rootfs?: string; release: string } {
  const assets = findGuestAssets();
  if (!assets.kernel || !assets.initramfs) {
    throw new Error('the Linux guest is not built: run `npx --no-install smol guest build` (npm test does it)');
  }
  const dir = path.dirname(assets.kernel);
  const build = JSON.parse(readFileSync(path.join(dir, 'build.json'), 'utf8')) as { release: string };
  const { kernel, initramfs, rootfs } = assets;
  return { kernel, bzImage: path.join(dir, 'bzImage'), initramfs, ...(rootfs && { rootfs }), ...build };
}

export interface LinuxGuest extends RunningGuest {
  /** Types a line into the console, as a person would (the shell echoes it back). */
  type: (line: string) => void;
  /** Types `command` wrapped so that its output is marked, and resolves with what it printed. */
  run: (command: string, timeoutMs?: number) => Promise<string>;
  exited: Promise<VmExit>;
}

let marks = 0;

/** Boots the guest; resolves once its init printed the ready marker and a shell prompt appeared. */
export async function bootLinux(options: Partial<VmOptions> = {}, { waitForShell = true } = {}): Promise<LinuxGuest> {
  const guest = builtGuest();
  const vm = await Vm.create({
    kernel: guest.kernel,
    initrd: guest.initramfs,
    cmdline: GUEST_CMDLINE,
    memoryMiB: 256,
    ...options,
  });
  const linux = attachLinux(vm);
  vm.start();
  if (waitForShell) {
    try {
      await linux.waitFor(/smol-guest: ready/, 120_000);
      await linux.run('true', 60_000);
    } catch (error) {
      await vm.kill();
      throw error;
    }
  }
  return linux;
}

/**
 * Boots the guest from its root disk instead of the initramfs: no initrd, the rootfs image as the disk's base with
 * `top` as this VM's layer over it (created, or reused when it is there from an earlier boot), GUEST_ROOT_CMDLINE.
 */
export async function bootRootDisk(
  top: string,
  options: Partial<VmOptions> = {},
  wait: { waitForShell?: boolean } = {},
): Promise<LinuxGuest> {
  const { rootfs } = builtGuest();
  if (!rootfs)
    throw new Error('the root disk is not built: run `npx --no-install smol guest build` (npm test does it)');
  const cmdline = `${GUEST_CMDLINE} ${GUEST_ROOT_CMDLINE}`;
  return bootLinux({ initrd: undefined, cmdline, disk: { base: rootfs, top }, ...options }, wait);
}

/**
 * Drives the shell on the console of a VM that is already there (restored from a snapshot, or a fork). Call it
 * before `vm.start()`, or right after `fork` resolves, so that no console output is missed.
 */
export function attachLinux(vm: Vm): LinuxGuest {
  const watched = watchConsole(vm);
  const type = (line: string) => vm.write(`${line}\n`);
  const run = async (command: string, timeoutMs = 60_000) => {
    // The marks are built by the shell ($((…))), so the echo of the typed line never matches them.
    const n = ++marks;
    const begin = `<<${n}:begin>>`;
    const end = `<<${n}:end>>`;
    const start = watched.output().length;
    type(`echo "<<$((${n})):begin>>"; ${command}; echo "<<$((${n})):end>>"`);
    const pattern = new RegExp(`${escape(begin)}\\r?\\n([\\s\\S]*?)${escape(end)}`);
    await watched.waitFor(pattern, timeoutMs);
    const match = pattern.exec(watched.output().slice(start));
    return (match?.[1] ?? '').replace(/\r\n/g, '\n');
  };
  return { vm, ...watched, type, run, exited: vm.exited };
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\<>]/g, '\\$&');

/**
 * A test file's scratch directory, and the VMs and agent clients it starts: all ended and removed when the file's
 * tests are done, whatever happened.
 */
export function linuxWorkspace(prefix: string): { work: string; vms: Vm[]; clients: AgentClient[] } {
  const work = mkdtempSync(path.join(tmpdir(), prefix));
  const vms: Vm[] = [];
  const clients: AgentClient[] = [];
  afterAll(async () => {
    clients.forEach((client) => client.close());
    await Promise.all(vms.filter((vm) => vm.state !== 'exited').map((vm) => vm.kill()));
    rmSync(work, { recursive: true, force: true });
  });
  return { work, vms, clients };
}
