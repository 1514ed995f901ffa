// Tier 2, end to end: the engine survives what goes wrong around it. kill -9 of a vmhost takes down only its own
// episode's VMs; kill -9 of the engine in the middle of a checkpoint leaves a store that opens cleanly; stopping the
// engine suspends running VMs and the next engine resumes them where they were.
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Episode, Vm } from '../../src/api/schema.js';
import { EngineHome, eventually, sleep } from './engine-home.js';

// Each test's engine and VMs go with it: a busy guest left running would slow the next test's engine start
// (inside the lab, where everything shares one vCPU, past a minute).
const homes: EngineHome[] = [];
afterEach(() => Promise.all(homes.splice(0).map((home) => home.destroy())), 120_000);
function newHome(): EngineHome {
  const home = new EngineHome();
  homes.push(home);
  return home;
}

const counts = (text: string) => [...text.matchAll(/count=(\d+)/g)].map((m) => Number(m[1]));
const COUNT = `kernel = "@guests@/count.elf"\ncmdline = "hz=50"\nmemory = 16\n`;

describe('a vmhost killed with SIGKILL', () => {
  it('marks its VMs crashed with the reason, while another episode keeps running', async () => {
    const home = newHome();
    const smol = await home.client();
    const file = home.smolfile('count', COUNT);
    const victim = await smol.up(file, { name: 'victim' });
    const bystander = await smol.up(file, { name: 'bystander' });
    await smol.fork(victim.vm.id, 1);
    const pid = home.vmhosts().get(victim.episode.id);
    expect(pid, 'the victim episode has a vmhost process').toBeDefined();
    process.kill(pid!, 'SIGKILL');
    const crashed = await eventually('the victim VMs to be marked crashed', async () => {
      const episode = await smol.episode(victim.episode.id);
      return episode.vms.every((vm) => vm.state === 'crashed') ? episode : undefined;
    });
    expect(crashed.vms).toHaveLength(2);
    // The signal's name where the engine sees it: a jailed vmhost's launcher (smol-jail) ends by the same signal.
    expect(crashed.vms[0]!.exit?.message).toMatch(/vmhost process ended \(signal SIGKILL\)/);
    const before = counts((await smol.logs(bystander.vm.id)).text).at(-1) ?? 0;
    await eventually('the bystander to keep counting', async () =>
      (counts((await smol.logs(bystander.vm.id)).text).at(-1) ?? 0) > before ? true : undefined,
    );
    expect((await smol.vm(bystander.vm.id)).state).toBe('running');
    // The crashed VM's snapshots stay: it can start again from its base (a bare kernel boots afresh).
    const restarted = await smol.start(victim.vm.id);
    expect(restarted.state).toBe('running');
  });
});

describe('the engine killed with SIGKILL during a checkpoint', () => {
  it('leaves a store the next engine opens cleanly: no half-written snapshot, the VMs marked crashed', async () => {
    const home = newHome();
    const smol = await home.client();
    // 384 MiB the guest has written: the checkpoint's write takes long enough to be interrupted. Inside the lab
    // everything is slow enough with 48 MiB (writing 384 MiB there takes minutes of nested page faults).
    const [mib, memory] = process.env.SMOL_IN_LAB === '1' ? [48, 64] : [384, 512];
    const file = home.smolfile('dirty', `kernel = "@guests@/dirty.elf"\ncmdline = "mib=${mib}"\nmemory = ${memory}\n`);
    const { vm } = await smol.up(file, { name: 'big' });
    await smol.write(vm.id, 'd');
    await smol.waitForOutput(vm.id, /dirty=1/, 120_000);
    const engine = home.enginePid()!;
    const checkpoint = smol.checkpoint(vm.id, { name: 'interrupted' }).catch((error: unknown) => error);
    const snapshots = path.join(home.dir, 'snapshots');
    // Kill as soon as the VMM has started writing the snapshot (its temporary directory exists).
    await eventually('the checkpoint to start writing', async () =>
      existsSync(snapshots) && readdirSync(snapshots).some((name) => name.includes('.partial-')) ? true : undefined,
    );
    process.kill(engine, 'SIGKILL');
    expect(await checkpoint).toBeInstanceOf(Error);
    await sleep(200);
    const next = await home.client(); // starts a new engine on the same data dir
    const episodes = await next.episodes();
    const big = episodes.find((ep: Episode) => ep.name === 'big')!;
    expect(big.vms.map((v: Vm) => v.state)).toEqual(['crashed']);
    expect(big.vms[0]!.exit?.message).toMatch(/engine ended/);
    const listed = await next.snapshots(big.id);
    expect(listed.map((s) => s.name)).not.toContain('interrupted');
    // Every directory left in the store is a whole, published snapshot.
    for (const name of readdirSync(snapshots)) {
      expect(name, 'a leftover temporary directory').not.toMatch(/partial|tmp/);
      if (!name.endsWith('.corrupt')) expect(existsSync(path.join(snapshots, name, 'manifest.json')), name).toBe(true);
    }
    const log = await import('node:fs').then((fs) => fs.readFileSync(path.join(home.dir, 'engine.log'), 'utf8'));
    expect(log).toMatch(/marked crashed/);
  }, 300_000); // a 512 MiB guest: writing and checkpointing it takes minutes inside the lab
});

describe('stopping and starting the engine', () => {
  it('suspends running VMs to snapshots and the next engine resumes them where they were', async () => {
    const home = newHome();
    const smol = await home.client();
    const { vm } = await smol.up(home.smolfile('count', COUNT), { name: 'sleeper' });
    await eventually('counting', async () => (counts((await smol.logs(vm.id)).text).length > 5 ? true : undefined));
    const stopped = await home.smol(['engine', 'stop']);
    expect(stopped.status, stopped.stderr).toBe(0);
    expect(home.enginePid()).toBeNull();
    const next = await home.client();
    const resumed = await eventually('the VM to be resumed', async () => {
      const v = await next.vm(vm.id);
      return v.state === 'running' ? v : undefined;
    });
    const snapshot = (await next.snapshots(resumed.episode)).find((s) => s.kind === 'suspend');
    expect(snapshot, 'a suspend snapshot').toBeDefined();
    // It continues counting from where it was suspended, not from 1.
    const after = await eventually('counts after the resume', async () => {
      const recording = await next.api.call('recording', { params: { vm: vm.id } });
      const since = recording.split('resume from').at(-1) ?? '';
      const c = counts(since);
      return c.length >= 2 ? c : undefined;
    });
    expect(after[0]).toBeGreaterThan(5);
  });
});
