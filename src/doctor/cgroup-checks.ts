// `smol doctor`'s part on the vmhost limits (docs/security.md, "Limits"): which cgroup version the host has, which of
// the controllers the limits use, and whether an engine run by this user can create its cgroups, or why not, found
// the way the engine finds it (src/engine/cgroups.ts), with a probe cgroup made and removed.
import { probeCgroups, LIMIT_CONTROLLERS, type CgroupSupport } from '../engine/cgroups.js';
import type { Check } from './report.js';

export interface CgroupFacts {
  /** SMOL_CGROUPS=0: no limits are put in place. */
  off: boolean;
  version: 1 | 2 | null;
  controllers: string[];
  /** Where the vmhosts' cgroups go (the memory hierarchy's directory). */
  root: string | null;
  /** An engine started now can create them. */
  usable: boolean;
  reason: string | null;
}

export function gatherCgroupFacts(env: NodeJS.ProcessEnv = process.env): CgroupFacts {
  const support: CgroupSupport = probeCgroups(env);
  return {
    off: env.SMOL_CGROUPS === '0',
    version: support.version,
    controllers: support.controllers,
    root: support.root,
    usable: support.layout !== null,
    reason: support.reason,
  };
}

const FIX =
  'run the engine as root, or set SMOL_CGROUP_ROOT to a cgroup delegated to you (systemd-run -p Delegate=yes)';

export function cgroupCheck(facts: CgroupFacts): Check {
  const name = 'limits';
  if (facts.off)
    return { name, status: 'warn', message: 'SMOL_CGROUPS=0: vmhosts run without limits', fix: 'unset SMOL_CGROUPS' };
  const version = facts.version ? `cgroup v${facts.version}` : 'no cgroups';
  if (!facts.usable)
    return {
      name,
      status: 'warn',
      message: `vmhosts run without limits (${version}): ${facts.reason ?? 'unknown'}; a runaway guest can starve the others`,
      fix: FIX,
    };
  const missing = LIMIT_CONTROLLERS.filter((c) => !facts.controllers.includes(c));
  const message =
    `each vmhost runs in a cgroup of its own (${version}, ${facts.controllers.join(', ')}; under ${facts.root}): ` +
    'memory capped at its VMs’ RAM plus the VMM’s overhead, CPU at their vCPUs, a process limit; ' +
    'an OOM kill is reported as the VM’s crash reason';
  return missing.length
    ? { name, status: 'warn', message: `${message}; not limited: ${missing.join(', ')} (no controller)`, fix: FIX }
    : { name, status: 'ok', message };
}
