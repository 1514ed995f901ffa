// `smol doctor`'s part on the vmhost's jail (docs/security.md): what of it is in force on this host for an engine run
// by this user — seccomp and no_new_privs, the capabilities, the namespaces (or why not) — found the way the engine
// finds it (vmhost-jail.ts probes the same launcher, smol-jail, it starts vmhosts with).
import { readFileSync } from 'node:fs';
import { jailSupport, type JailSupport } from '../engine/vmhost-jail.js';
import type { Check } from './report.js';

export interface JailFacts {
  /** SMOL_JAIL=0: nothing of the jail is put in place. */
  off: boolean;
  /** The kernel filters system calls (a Seccomp line in /proc/self/status). */
  seccomp: boolean;
  root: boolean;
  namespaces: Pick<JailSupport, 'namespaces' | 'userNamespace' | 'reason'>;
}

export function gatherJailFacts(env: NodeJS.ProcessEnv = process.env): JailFacts {
  let seccomp = false;
  try {
    seccomp = /^Seccomp:/m.test(readFileSync('/proc/self/status', 'utf8'));
  } catch {
    // no /proc: not Linux
  }
  const { namespaces, userNamespace, reason } = jailSupport(env);
  return {
    off: env.SMOL_JAIL === '0',
    seccomp,
    root: process.geteuid?.() === 0,
    namespaces: { namespaces, userNamespace, reason },
  };
}

export function jailChecks(facts: JailFacts): Check[] {
  if (facts.off)
    return [
      { name: 'jail', status: 'warn', message: 'SMOL_JAIL=0: vmhosts run with no jail at all', fix: 'unset SMOL_JAIL' },
    ];
  const checks: Check[] = [];
  checks.push(
    facts.seccomp
      ? { name: 'seccomp', status: 'ok', message: 'each vmhost runs under a seccomp allow-list, with no_new_privs' }
      : {
          name: 'seccomp',
          status: 'fail',
          message: 'this kernel has no seccomp: a vmhost refuses to start without its filter',
          fix: 'a kernel built with CONFIG_SECCOMP_FILTER',
        },
  );
  checks.push({
    name: 'capabilities',
    status: 'ok',
    message: facts.root
      ? 'each vmhost drops every capability (CapEff and CapBnd 0), core dumps off, 4096 open files'
      : 'the engine is not root: its vmhosts have no capabilities to drop; core dumps off, 4096 open files',
  });
  const ns = facts.namespaces;
  checks.push(
    ns.namespaces
      ? {
          name: 'namespaces',
          status: 'ok',
          message:
            `each vmhost runs in mount and PID namespaces of its own${ns.userNamespace ? ' (and a user namespace)' : ''}: ` +
            'its root shows only its data dir’s snapshots, disks, run and images, its boot files and /dev/kvm; ' +
            'one whose VMs have no network gets an empty network namespace too',
        }
      : {
          name: 'namespaces',
          status: 'warn',
          message: `vmhosts run without namespaces: ${ns.reason ?? 'unknown'}; they see the host’s files as the engine does`,
          ...(ns.userNamespace && { fix: 'sysctl -w kernel.unprivileged_userns_clone=1 (or run the engine as root)' }),
        },
  );
  // cgroups (issue 21, item 3): the limits' check goes here, from what src/engine/cgroups.ts finds on this host.
  return checks;
}
