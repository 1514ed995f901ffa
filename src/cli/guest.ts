// `smol guest build` and `smol guest info`: the Linux guest's kernel, base initramfs and root disk (docs/guest.md).
import { formatElapsed } from '../guest-build/build-progress.js';
import { GUEST_CMDLINE, GUEST_ROOT_CMDLINE } from '../guest-build/guest-assets.js';
import { buildGuest, type GuestBuildResult } from '../guest-build/guest-build.js';
import { guestInfo, type GuestInfo } from '../guest-build/guest-info.js';
import { parseFlags } from './args.js';
import { UsageError } from './errors.js';
import { runInterruptibleBuild } from './interruptible-build.js';

export const GUEST_HELP = `Usage: smol guest build [--force] [--json]
       smol guest info [--json]

build   Builds the Linux guest kernel (Debian's linux-source, tinyconfig plus
        resources/guest-kernel/smol.config), the base initramfs (busybox-static and
        resources/guest-initramfs) and a root disk with the same files (a sparse 2 GiB ext4
        image) into the cache, unless they are there already. Installs the Debian packages it
        needs when run as root. The kernel takes 10 to 20 minutes on 2 cores.
info    Says which kernel, initramfs and root disk are current, where they are, and whether
        they still match the recipe in this checkout.

Options:
  --force      build again even when the cache has a build of the same inputs
  --json       print the result as JSON
  -h, --help   show this help

Cache: \${SMOL_CACHE:-\${XDG_CACHE_HOME:-~/.cache}/smol-studio}/guest
Exit status: 0 done, 1 the build failed, 2 usage error, 130 interrupted.
`;

export type GuestArgs = { action: 'build'; force: boolean; json: boolean } | { action: 'info'; json: boolean };

export function parseGuestArgs(argv: string[]): GuestArgs | 'help' {
  const [action, ...rest] = argv;
  if (action === undefined) throw new UsageError('guest', 'name an action: build or info');
  if (action === '--help' || action === '-h') return 'help';
  if (action === 'build') {
    const flags = parseFlags('guest', rest, {
      force: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    });
    return flags.help ? 'help' : { action, force: flags.force, json: flags.json };
  }
  if (action === 'info') {
    const flags = parseFlags('guest', rest, {
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    });
    return flags.help ? 'help' : { action, json: flags.json };
  }
  throw new UsageError('guest', `unknown action ${action} (actions: build, info)`);
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
/** A sparse disk image: its size, and what it takes on the host's disk. */
const diskSize = (size: number, allocated: number) => `${gib(size)} ext4, ${mib(allocated)} on disk`;

export function formatBuildResult(result: GuestBuildResult): string {
  const { kernel, initramfs, rootfs } = result;
  const build = kernel.info;
  const how = kernel.cached ? 'cached' : `built in ${formatElapsed((build?.buildSeconds ?? 0) * 1000)}`;
  const kernelLine = build
    ? `Linux ${build.release}, vmlinux ${mib(build.sizes.vmlinux)}, bzImage ${mib(build.sizes.bzImage)}, ${how}`
    : how;
  return [
    `kernel     ${kernel.dir}/vmlinux (${kernelLine})`,
    `initramfs  ${initramfs.file} (${mib(initramfs.size)}${initramfs.cached ? ', cached' : ''})`,
    `rootfs     ${rootfs.file} (${diskSize(rootfs.size, rootfs.allocated)}${rootfs.cached ? ', cached' : ''})`,
    `boot it:   smol boot   (the same as: smol boot --kernel ${kernel.dir}/vmlinux --initrd ${initramfs.file} --cmdline '${GUEST_CMDLINE}')`,
    `           from the root disk instead: no initrd, the rootfs as the disk's base, and '${GUEST_ROOT_CMDLINE}'`,
    `           added to the command line (docs/guest.md, "The root disk")`,
    '',
  ].join('\n');
}

function freshness(upToDate: boolean | null): string {
  if (upToDate === null) return 'cannot tell whether it matches this checkout';
  return upToDate ? 'matches this checkout' : 'outdated: the recipe changed; run smol guest build';
}

export function formatGuestInfo(info: GuestInfo): string {
  const lines = [`cache      ${info.dir}`];
  const { kernel, initramfs, rootfs } = info;
  if (!kernel) lines.push('kernel     none built; run smol guest build');
  else if (!kernel.present) lines.push(`kernel     ${kernel.vmlinux} is missing; run smol guest build`);
  else {
    const release = kernel.build ? `Linux ${kernel.build.release}, ` : '';
    lines.push(`kernel     ${kernel.vmlinux} (${release}${freshness(kernel.upToDate)})`);
  }
  if (!initramfs) lines.push('initramfs  none built; run smol guest build');
  else if (!initramfs.present) lines.push(`initramfs  ${initramfs.file} is missing; run smol guest build`);
  else lines.push(`initramfs  ${initramfs.file} (${mib(initramfs.size ?? 0)}, ${freshness(initramfs.upToDate)})`);
  if (!rootfs) lines.push('rootfs     none built; run smol guest build');
  else if (!rootfs.present) lines.push(`rootfs     ${rootfs.file} is missing; run smol guest build`);
  else {
    const size = diskSize(rootfs.size ?? 0, rootfs.allocated ?? 0);
    lines.push(`rootfs     ${rootfs.file} (${size}, ${freshness(rootfs.upToDate)})`);
  }
  return lines.join('\n') + '\n';
}

async function runBuild(args: { force: boolean; json: boolean }): Promise<number> {
  const result = await runInterruptibleBuild('guest build', (onProgress, signal) =>
    buildGuest({ force: args.force, onProgress, signal }),
  );
  process.stdout.write(args.json ? JSON.stringify(result, null, 2) + '\n' : formatBuildResult(result));
  return 0;
}

export async function runGuest(argv: string[]): Promise<number> {
  const args = parseGuestArgs(argv);
  if (args === 'help') {
    process.stdout.write(GUEST_HELP);
    return 0;
  }
  if (args.action === 'build') return runBuild(args);
  const info = guestInfo();
  process.stdout.write(args.json ? JSON.stringify(info, null, 2) + '\n' : formatGuestInfo(info));
  return 0;
}
