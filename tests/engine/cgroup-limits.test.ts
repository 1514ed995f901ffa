// Tier 2, end to end: every vmhost runs in a cgroup of its own (docs/security.md, "Limits"), on cgroup v1 (this
// build machine) and v2 (the lab). Its memory cap is its VMs' RAM plus the VMM's overhead, its CPU quota their
// vCPUs, its process budget their threads; it grows with a fork and shrinks when a VM goes; the VM's record and the
// metrics show it; no cgroup directory outlives its vmhost. A guest that touches more memory than its cap allows is
// stopped by its own cgroup's OOM killer and marked `crashed: out of memory (limit N MiB)`, while another episode
// goes on.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EngineEvent } from '../../src/api/schema.js';
import { PER_VM_MIB, PER_VM_PIDS, VMHOST_BASE_MIB, VMHOST_BASE_PIDS } from '../../src/engine/vmhost-limits.js';
import { EngineHome, eventually } from './engine-home.js';

// A tiny guest's engine test; in the KVM lab (v2) the engine's modules load over 9p, so each case may take minutes.
const homes: EngineHome[] = [];
afterEach(() => Promise.all(homes.splice(0).map((home) => home.destroy())), 120_000);
function newHome(): EngineHome {
  const home = new EngineHome();
  homes.push(home);
  return home;
}

/** Starts the engine of `home` with `env` added to what it inherits (read by the engine at its start). */
async function clientWith(home: EngineHome, env: Record<string, string>) {
  const before = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]));
  Object.assign(process.env, env);
  try {
    return await home.client();
  } finally {
    for (const [key, value] of Object.entries(before)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
}

const MiB = 2 ** 20;
const COUNT = `kernel = "@guests@/count.elf"\ncmdline = "hz=50"\nmemory = 16\ncpus = 2\n`;
const counts = (text: string) => [...text.matchAll(/count=(\d+)/g)].map((m) => Number(m[1]));

interface Mount {
  root: string;
  dir: string;
  v2: boolean;
  controllers: string[];
}
const mounts: Mount[] = readFileSync('/proc/self/mountinfo', 'utf8')
  .split('\n')
  .flatMap((line) => {
    const [before, after] = line.split(' - ');
    const [type, , options = ''] = (after ?? '').split(' ');
    if (type !== 'cgroup' && type !== 'cgroup2') return [];
    const fields = before!.split(' ');
    return [{ root: fields[3]!, dir: fields[4]!, v2: type === 'cgroup2', controllers: options.split(',') }];
  });
const v1 = mounts.some((m) => !m.v2 && m.controllers.includes('memory'));

/** Where process `pid`'s cgroup for `controller` is (its directory), read from /proc. */
function cgroupDir(pid: number, controller: 'memory' | 'cpu' | 'pids'): string {
  for (const line of readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n')) {
    const [, list, cgroup] = /^\d+:([^:]*):(.*)$/.exec(line)!;
    const mount = v1
      ? list!.split(',').includes(controller) && mounts.find((m) => !m.v2 && m.controllers.includes(controller))
      : list === '' && mounts.find((m) => m.v2);
    if (mount) return path.join(mount.dir, path.posix.relative(mount.root, cgroup!));
  }
  throw new Error(`process ${pid} has no ${controller} cgroup`);
}
const read = (dir: string, file: string) => readFileSync(path.join(dir, file), 'utf8').trim();
const memoryCap = (dir: string) => Number(read(dir, v1 ? 'memory.limit_in_bytes' : 'memory.max'));
const cpuQuota = (dir: string) =>
  v1 ? Number(read(dir, 'cpu.cfs_quota_us')) : Number(read(dir, 'cpu.max').split(' ')[0]);

describe('vmhost cgroups', () => {
  it('a vmhost is capped at its VMs’ RAM, vCPUs and threads, resized by a fork, gone with it', async () => {
    const home = newHome();
    const smol = await home.client();
    const up = await smol.up(home.smolfile('count', COUNT), { name: 'limited' });
    await smol.waitForOutput(up.vm.id, /count=2/, 60_000);
    const pid = home.vmhosts().get(up.episode.id)!;
    const memory = cgroupDir(pid, 'memory');
    const cpu = cgroupDir(pid, 'cpu');
    const pids = cgroupDir(pid, 'pids');
    expect(path.basename(memory)).toBe(`${home.enginePid()}-${up.episode.id}`);
    expect(path.basename(path.dirname(memory))).toBe('smol');
    const one = (VMHOST_BASE_MIB + 16 + PER_VM_MIB) * MiB;
    expect(memoryCap(memory)).toBe(one);
    expect(cpuQuota(cpu)).toBe(200_000);
    expect(Number(read(pids, 'pids.max'))).toBe(VMHOST_BASE_PIDS + 2 + PER_VM_PIDS);
    expect((await smol.vm(up.vm.id)).limits).toEqual({ cgroup: memory, memoryLimitMiB: one / MiB, note: null });

    // The metrics carry the cgroup's counters (what the kernel charged to the vmhost), not only the VMM's figures.
    const sample = await eventually('a metrics sample with the cgroup’s counters', async () => {
      const history = await smol.metrics(up.vm.id);
      return history.samples.find((s) => s.cgroup);
    });
    expect(sample.cgroup!.memoryLimitBytes).toBe(one);
    expect(sample.cgroup!.memoryBytes).toBeGreaterThan(0);
    expect(sample.cgroup!.memoryBytes).toBeLessThanOrEqual(one);
    expect(sample.cgroup!.oomKills).toBe(0);

    const [child] = (await smol.fork(up.vm.id, 1)).children;
    const two = (VMHOST_BASE_MIB + 2 * (16 + PER_VM_MIB)) * MiB;
    expect(memoryCap(memory)).toBe(two);
    expect(cpuQuota(cpu)).toBe(400_000);
    expect(Number(read(pids, 'pids.max'))).toBe(VMHOST_BASE_PIDS + 2 * (2 + PER_VM_PIDS));
    await smol.removeVm(child!.id);
    await eventually('the cap to shrink back', async () => (memoryCap(memory) === one ? true : undefined));
    expect(cpuQuota(cpu)).toBe(200_000);

    // No cgroup outlives its vmhost: deleting the episode removes its directories, stopping the engine the parent.
    await smol.destroy(up.episode.id);
    await eventually('the episode’s cgroups to be removed', async () =>
      [memory, cpu, pids].some(existsSync) ? undefined : true,
    );
    const again = await smol.up(home.smolfile('count', COUNT), { name: 'again' });
    const parent = path.dirname(cgroupDir(home.vmhosts().get(again.episode.id)!, 'memory'));
    const engine = String(home.enginePid());
    await home.smol(['engine', 'stop']);
    const left = existsSync(parent) ? readdirSync(parent).filter((name) => name.startsWith(`${engine}-`)) : [];
    expect(left).toEqual([]);
  }, 300_000);

  it('a guest that touches more than its cap is stopped with out of memory, another episode goes on', async () => {
    const home = newHome();
    // A test-only cap (SMOL_TEST_HOOKS=1): room for a vmhost and a small guest, not for 160 MiB of guest pages.
    const cap = 128;
    const smol = await clientWith(home, { SMOL_TEST_HOOKS: '1', SMOL_TEST_CGROUP_MEMORY_MIB: String(cap) });
    const events: EngineEvent[] = [];
    const stream = smol.events((event) => events.push(event));
    try {
      const bystander = await smol.up(home.smolfile('count', COUNT), { name: 'bystander' });
      const dirty = `kernel = "@guests@/dirty.elf"\ncmdline = "mib=160"\nmemory = 192\n`;
      const victim = await smol.up(home.smolfile('dirty', dirty), { name: 'victim' });
      await smol.waitForOutput(victim.vm.id, /dirty: ready/, 60_000);
      const victimHost = home.vmhosts().get(victim.episode.id)!;
      expect(memoryCap(cgroupDir(victimHost, 'memory'))).toBe(cap * MiB);
      await smol.write(victim.vm.id, 'd');
      const crashed = await eventually('the victim to be marked crashed', async () => {
        const vm = await smol.vm(victim.vm.id);
        return vm.state === 'crashed' ? vm : undefined;
      });
      expect(crashed.exit?.message).toBe(`out of memory (limit ${cap} MiB)`);
      // Its own cgroup's OOM killer did it, nobody else's: the bystander counts on in its own vmhost.
      const before = counts((await smol.logs(bystander.vm.id)).text).at(-1) ?? 0;
      await eventually('the bystander to keep counting', async () =>
        (counts((await smol.logs(bystander.vm.id)).text).at(-1) ?? 0) > before ? true : undefined,
      );
      expect((await smol.vm(bystander.vm.id)).state).toBe('running');
      expect(home.vmhosts().get(bystander.episode.id)).toBeDefined();
      // And the event stream said why.
      await eventually('a vm.updated event with the reason', async () =>
        events.some((e) => e.type === 'vm.updated' && e.vm.exit?.message === crashed.exit?.message) ? true : undefined,
      );
    } finally {
      stream.close();
    }
  }, 300_000);
});
