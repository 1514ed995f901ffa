// Exit statuses of `npm run lab` when the lab itself fails (the command's own status passes through otherwise).
// They sit just below the shell's 126/127 so that they rarely collide with a command's status; docs/lab.md lists them.
export const EXIT = Object.freeze({
  usage: 64,
  setupFailed: 119, // downloading the kernel or building the initramfs failed
  missingPackage: 120,
  vmStopped: 121, // the lab VM stopped before the command finished (init failed, QEMU died)
  noKvm: 122, // /dev/kvm missing inside the lab (kvm-amd did not load)
  kernelPanic: 123,
  timeout: 124,
  qemuFailed: 125, // QEMU could not start
  // interrupted by a signal: 128 + its number (SIGINT 130, SIGTERM 143, SIGHUP 129), as a shell reports it
});

/** An error that ends the lab with a one-line message and a distinct exit status. */
export class LabError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function progress(message) {
  process.stderr.write(`lab: ${message}\n`);
}
