// `smol boot`: boots a kernel with the serial console on this terminal.
import { constants as os } from 'node:os';
import { findGuestAssets, GUEST_CMDLINE, type GuestAssets } from '../guest-build/guest-assets.js';
import { Vm, type VmExit, type VmOptions } from '../vmm/vm.js';
import { VM_LIMITS } from '../vmm/vm-options.js';
import { parseFlags, parseIntegerFlag } from './args.js';
import { ConsoleInput } from './console-input.js';
import { CommandError, UsageError } from './errors.js';

export const BOOT_HELP = `Usage: smol boot [--kernel FILE] [--initrd FILE] [--cmdline STR] [--memory MiB] [--cpus N]
       smol boot --restore DIR

Boots a kernel (ELF64 vmlinux, bzImage, or a tiny test guest) in a microVM. Without --kernel it
boots the Linux guest that \`smol guest build\` built: its kernel, its base initramfs (a shell on
the console) and the command line "${GUEST_CMDLINE}". The guest's serial console (COM1) is this
terminal: guest output on stdout, stdin goes to the guest. A pipe on stdin works too; its end does
not stop the VM, the guest decides when to end.

Options:
  --kernel FILE    kernel to boot (default: the built guest kernel)
  --initrd FILE    initial ramdisk (default with the built kernel: the base initramfs)
  --cmdline STR    kernel command line, at most ${VM_LIMITS.cmdlineMaxBytes} bytes (default with the built kernel:
                   the one above)
  --memory MiB     guest RAM, ${VM_LIMITS.memoryMiB.min} to ${VM_LIMITS.memoryMiB.max} (default ${VM_LIMITS.memoryMiB.default})
  --cpus N         vCPUs, ${VM_LIMITS.cpus.min} to ${VM_LIMITS.cpus.max} (default ${VM_LIMITS.cpus.default})
  --restore DIR    continue a VM from the snapshot in DIR (docs/snapshots.md) instead of booting;
                   its memory, vCPUs and devices come from the snapshot
  -h, --help       show this help

Console keys (as in QEMU):
  Ctrl-A x         quit (kills the VM)
  Ctrl-A Ctrl-A    send Ctrl-A to the guest
  Ctrl-A h         list these keys

Exit status:
  0      the guest reset, powered off (ACPI, or code 0 on the debug-exit port), or you quit with Ctrl-A x
  N      the guest powered off with code N (debug-exit port)
  1      the VM could not be created, the guest triple-faulted, or the VMM failed
  2      usage error
  3      the guest kernel panicked (reported on the pvpanic device)
  128+S  smol received signal S (the VM is killed)
`;

export interface BootArgs {
  /** Absent: boot the built guest kernel (see resolveBootTarget). */
  kernel?: string;
  initrd?: string;
  cmdline?: string;
  memoryMiB: number;
  cpus: number;
  /** A snapshot directory to continue from instead of booting. */
  restore?: string;
}

const FLAGS = {
  restore: { type: 'string' },
  kernel: { type: 'string' },
  initrd: { type: 'string' },
  cmdline: { type: 'string' },
  memory: { type: 'string' },
  cpus: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Parses `smol boot`'s arguments; 'help' when help was asked for. */
export function parseBootArgs(argv: string[]): BootArgs | 'help' {
  const flags = parseFlags('boot', argv, FLAGS);
  if (flags.help) return 'help';
  for (const name of ['kernel', 'initrd'] as const) {
    if (flags[name] === '') throw new UsageError('boot', `--${name} needs a file`);
  }
  if (flags.restore !== undefined) {
    if (flags.restore === '') throw new UsageError('boot', '--restore needs a snapshot directory');
    const clash = (['kernel', 'initrd', 'cmdline', 'memory', 'cpus'] as const).find((n) => flags[n] !== undefined);
    if (clash) {
      throw new UsageError('boot', `--restore takes the VM from the snapshot; --${clash} cannot be given with it`);
    }
  }
  const args: BootArgs = {
    memoryMiB: parseIntegerFlag('boot', '--memory', flags.memory, VM_LIMITS.memoryMiB),
    cpus: parseIntegerFlag('boot', '--cpus', flags.cpus, VM_LIMITS.cpus),
  };
  if (flags.kernel !== undefined) args.kernel = flags.kernel;
  if (flags.initrd !== undefined) args.initrd = flags.initrd;
  if (flags.cmdline !== undefined) args.cmdline = flags.cmdline;
  if (flags.restore !== undefined) args.restore = flags.restore;
  return args;
}

/** How a guest's end becomes smol's exit status; `message` is set when the end is a failure. */
export function bootExitStatus(exit: VmExit): { status: number; message?: string } {
  switch (exit.reason) {
    case 'reset':
      return { status: 0 };
    case 'poweroff':
      return { status: exit.code & 0xff };
    case 'killed':
      return { status: 1, message: `the VM was killed${exit.message ? `: ${exit.message}` : ''}` };
    case 'shutdown':
      return { status: 1, message: `${exit.message || 'the guest triple-faulted'} (shutdown)` };
    case 'panic':
      return { status: 3, message: 'the guest kernel panicked' };
    case 'error':
      return { status: 1, message: `the VMM stopped the guest: ${exit.message || 'unknown error'}` };
    default:
      return { status: 1, message: `the VM ended for an unknown reason ${JSON.stringify(exit)}` };
  }
}

/**
 * What to boot: the kernel given, or else the built guest (its vmlinux, its initramfs unless --initrd was given, and
 * the command line it was built for unless --cmdline was given). Says how to build the guest when there is none.
 */
export function resolveBootTarget(args: BootArgs, guest: GuestAssets): VmOptions {
  const { kernel, ...rest } = args;
  if (kernel !== undefined) return { kernel, ...rest };
  if (!guest.kernel) {
    throw new CommandError(
      'no guest kernel has been built yet: run `smol guest build` (10 to 20 minutes, once), or pass --kernel FILE',
    );
  }
  const initrd = args.initrd ?? guest.initramfs;
  if (initrd === undefined) {
    throw new CommandError(
      'the guest kernel is built but its base initramfs is missing: run `smol guest build`, or pass --initrd FILE',
    );
  }
  return { ...rest, kernel: guest.kernel, initrd, cmdline: args.cmdline ?? GUEST_CMDLINE };
}

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export async function runBoot(argv: string[]): Promise<number> {
  const args = parseBootArgs(argv);
  if (args === 'help') {
    process.stdout.write(BOOT_HELP);
    return 0;
  }
  const vm =
    args.restore !== undefined
      ? await Vm.restore(args.restore)
      : await Vm.create(resolveBootTarget(args, findGuestAssets()));
  const input = new ConsoleInput(vm, { input: process.stdin, notices: process.stderr });
  let endsLine = true;
  vm.on('console', (chunk) => {
    if (chunk.length > 0) endsLine = chunk[chunk.length - 1] === 0x0a;
    process.stdout.write(chunk);
  });

  // Set when smol itself ends the VM (Ctrl-A x or a signal): the exit status smol then returns.
  let hostStatus: number | undefined;
  let killFailed: (err: Error) => void = () => {};
  const killFailure = new Promise<never>((_, reject) => (killFailed = reject));
  const stop = (status: number) => {
    if (hostStatus !== undefined) return;
    hostStatus = status;
    vm.kill().catch((err: Error) => killFailed(new CommandError(`cannot kill the VM: ${err.message}`)));
  };
  const onSignal = (signal: NodeJS.Signals) => stop(128 + os.signals[signal]);
  void input.quit.then(() => stop(0));
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);

  let exit: VmExit;
  try {
    input.attach();
    vm.start();
    exit = await Promise.race([vm.exited, killFailure]);
  } finally {
    input.detach();
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
  }
  if (exit.reason === 'killed' && hostStatus !== undefined) return hostStatus;
  const { status, message } = bootExitStatus(exit);
  if (message) {
    if (!endsLine && process.stdout.isTTY) process.stdout.write('\n'); // keep smol's error line on a line of its own
    throw new CommandError(message, status);
  }
  return status;
}
