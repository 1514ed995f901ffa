// What `smol doctor` says of the host's cgroups, from real mount tables (this build machine's v1 beside an empty
// unified mount; a configured root; none), and the check's wording (the lab's v2 runs in tests/engine/cgroup-limits).
import { describe, expect, it } from 'vitest';
import { describeCgroups } from '../engine/cgroups.js';
import { cgroupCheck } from './cgroup-checks.js';

const V1_MOUNTS = [
  '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
  '33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct',
  '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
].join('\n');
const V1_SELF = '8:pids:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n';

describe('the host’s cgroups', () => {
  it('v1 (this build machine): smol under the engine’s own cgroup in each hierarchy', () => {
    const support = describeCgroups({ mountinfo: V1_MOUNTS, self: V1_SELF });
    expect(support.version).toBe(1);
    expect(support.controllers).toEqual(['memory', 'cpu', 'pids', 'cpuacct']);
    expect(support.layout?.parents).toEqual({
      memory: '/sys/fs/cgroup/memory/process_api/abc/smol',
      cpu: '/sys/fs/cgroup/cpu/smol',
      pids: '/sys/fs/cgroup/pids/smol',
      cpuacct: '/sys/fs/cgroup/cpuacct/smol',
    });
    expect(support.layout?.ownsParents).toBe(true);
  });

  it('SMOL_CGROUP_ROOT puts them under a configured cgroup, which the engine does not remove', () => {
    const support = describeCgroups({ mountinfo: V1_MOUNTS, self: V1_SELF, configuredRoot: '/smol.slice' });
    expect(support.layout?.parents.memory).toBe('/sys/fs/cgroup/memory/smol.slice');
    expect(support.layout?.ownsParents).toBe(false);
    const bad = describeCgroups({ mountinfo: V1_MOUNTS, self: V1_SELF, configuredRoot: 'smol.slice' });
    expect(bad.layout).toBeNull();
    expect(bad.reason).toBe('SMOL_CGROUP_ROOT must be a cgroup path starting with /, not "smol.slice"');
  });

  it('no cgroup hierarchy at all says so', () => {
    const support = describeCgroups({ mountinfo: '22 1 0:21 / /proc rw - proc proc rw', self: '' });
    expect(support).toMatchObject({ version: null, layout: null, reason: 'no cgroup hierarchy is mounted' });
  });

  it('the check: ok with what is limited, a warning naming the reason and the fix otherwise', () => {
    const ok = cgroupCheck({
      off: false,
      version: 2,
      controllers: ['memory', 'cpu', 'pids'],
      root: '/sys/fs/cgroup/smol',
      usable: true,
      reason: null,
    });
    expect(ok.status).toBe('ok');
    expect(ok.message).toMatch(
      /^each vmhost runs in a cgroup of its own \(cgroup v2, memory, cpu, pids; under \/sys\/fs\/cgroup\/smol\)/,
    );
    const refused = cgroupCheck({
      off: false,
      version: 2,
      controllers: ['memory', 'cpu', 'pids'],
      root: '/sys/fs/cgroup/user.slice/smol',
      usable: false,
      reason: 'cannot create the memory cgroup /sys/fs/cgroup/user.slice/smol (EACCES)',
    });
    expect(refused).toMatchObject({ status: 'warn' });
    expect(refused.message).toBe(
      'vmhosts run without limits (cgroup v2): cannot create the memory cgroup /sys/fs/cgroup/user.slice/smol ' +
        '(EACCES); a runaway guest can starve the others',
    );
    expect(refused.fix).toMatch(/SMOL_CGROUP_ROOT/);
    const partial = cgroupCheck({
      off: false,
      version: 1,
      controllers: ['memory'],
      root: '/m',
      usable: true,
      reason: null,
    });
    expect(partial.status).toBe('warn');
    expect(partial.message).toMatch(/not limited: cpu, pids \(no controller\)$/);
  });
});
