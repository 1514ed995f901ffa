// Puts the process that imports it into the vmhost's jail (docs/security.md), for the jail's benchmark: the boot,
// restore and fork benchmarks run their VMs in the CLI's own process, so
//   node --import ./dist/src/bench/jail-self.js bin/smol.js bench restore --runs 5
// measures them under the same seccomp filter, no_new_privs, dropped capabilities and limits as a vmhost, and the
// same command without --import measures them without. The jail's status goes to stderr.
import { loadNative } from '../vmm/native.js';

const status = loadNative().jailLockdown();
process.stderr.write(`jailed: ${JSON.stringify(status)}\n`);
