// Tier 2, end to end: every vmhost runs in its jail (docs/security.md). Its /proc status shows the seccomp filter,
// no_new_privs and no capabilities, its vCPU threads carry a second, shorter filter, and a forbidden system call
// kills only that vmhost: its VMs are crashed with `seccomp: <name>` while another episode keeps running. It runs in
// PID and mount namespaces of its own (and a network one when its VMs have no network), and cannot open what its
// root does not show.
import { existsSync, readFileSync, readdirSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EngineHome, eventually, root } from './engine-home.js';

// The engine this file starts passes it to its vmhosts: SIGURG then makes a vmhost call personality(2), which no
// allow-list has, and SIGWINCH makes it try to open each file of SMOL_TEST_OPEN. Production never sets it.
let hooksBefore: string | undefined;
beforeAll(() => {
  hooksBefore = process.env.SMOL_TEST_HOOKS;
  process.env.SMOL_TEST_HOOKS = '1';
});
afterAll(() => {
  if (hooksBefore === undefined) delete process.env.SMOL_TEST_HOOKS;
  else process.env.SMOL_TEST_HOOKS = hooksBefore;
  delete process.env.SMOL_TEST_OPEN;
});

const homes: EngineHome[] = [];
afterEach(() => Promise.all(homes.splice(0).map((home) => home.destroy())), 120_000);
function newHome(): EngineHome {
  const home = new EngineHome();
  homes.push(home);
  return home;
}

const COUNT = `kernel = "@guests@/count.elf"\ncmdline = "hz=50"\nmemory = 16\ncpus = 2\n`;
const counts = (text: string) => [...text.matchAll(/count=(\d+)/g)].map((m) => Number(m[1]));

function status(pid: number | string, task?: string): Record<string, string> {
  const file = task ? `/proc/${pid}/task/${task}/status` : `/proc/${pid}/status`;
  const fields: Record<string, string> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const at = line.indexOf(':');
    if (at > 0) fields[line.slice(0, at)] = line.slice(at + 1).trim();
  }
  return fields;
}

describe('the vmhost jail', () => {
  it('shows seccomp, no_new_privs and no capabilities; vCPU threads stack a second filter', async () => {
    const home = newHome();
    const smol = await home.client();
    const up = await smol.up(home.smolfile('count', COUNT), { name: 'jailed' });
    await smol.waitForOutput(up.vm.id, /count=2/, 60_000);
    const pid = home.vmhosts().get(up.episode.id)!;
    expect(pid, 'the episode has a vmhost').toBeDefined();
    const own = status(pid);
    expect(own.Seccomp).toBe('2');
    expect(own.NoNewPrivs).toBe('1');
    expect(own.CapEff).toBe('0000000000000000');
    expect(own.CapBnd).toBe('0000000000000000');
    expect(BigInt(`0x${status(home.enginePid()!).CapEff}`), 'the engine keeps what it was given').not.toBe(0n);
    const limits = readFileSync(`/proc/${pid}/limits`, 'utf8');
    expect(limits).toMatch(/Max core file size\s+0\s+0/);
    expect(limits).toMatch(/Max open files\s+4096\s+4096/);
    // Every thread has the process's filter (TSYNC); the two vCPU threads have their own on top.
    const threads = readdirSync(`/proc/${pid}/task`).map((task) => status(pid, task));
    expect(threads.every((t) => Number(t.Seccomp_filters) >= 1)).toBe(true);
    const vcpus = threads.filter((t) => t.Name!.startsWith('smol-vcpu'));
    expect(vcpus.map((t) => [t.Name, t.Seccomp_filters])).toEqual([
      ['smol-vcpu0', '2'],
      ['smol-vcpu1', '2'],
    ]);
    // KVM's own kernel worker (kvm-nx-lpage-recovery) is listed among the tasks too; it copies a vCPU's filters.
    const others = threads.filter((t) => !t.Name!.startsWith('smol-vcpu') && !t.Name!.startsWith('kvm-'));
    expect(others.length).toBeGreaterThan(3);
    expect(others.every((t) => t.Seccomp_filters === '1')).toBe(true);
  });

  it('a forbidden system call crashes its VMs with seccomp and the call, while another episode keeps running', async () => {
    const home = newHome();
    const smol = await home.client();
    const file = home.smolfile('count', COUNT);
    const victim = await smol.up(file, { name: 'victim' });
    const bystander = await smol.up(file, { name: 'bystander' });
    await smol.fork(victim.vm.id, 1);
    const pid = home.vmhosts().get(victim.episode.id)!;
    process.kill(pid, 'SIGURG');
    const crashed = await eventually('the victim VMs to be marked crashed', async () => {
      const episode = await smol.episode(victim.episode.id);
      return episode.vms.every((vm) => vm.state === 'crashed') ? episode : undefined;
    });
    expect(crashed.vms).toHaveLength(2);
    for (const vm of crashed.vms) expect(vm.exit?.message).toMatch(/seccomp: personality, signal SIGSYS/);
    const before = counts((await smol.logs(bystander.vm.id)).text).at(-1) ?? 0;
    await eventually('the bystander to keep counting', async () =>
      (counts((await smol.logs(bystander.vm.id)).text).at(-1) ?? 0) > before ? true : undefined,
    );
    expect((await smol.vm(bystander.vm.id)).state).toBe('running');
  });

  it('an ioctl request outside the list crashes its VMs with seccomp, ioctl and the request; checkpoint, restore and fork still work', async () => {
    const home = newHome();
    const smol = await home.client();
    const file = home.smolfile('count', COUNT);
    const victim = await smol.up(file, { name: 'victim' });
    const bystander = await smol.up(file, { name: 'bystander' });
    await smol.waitForOutput(bystander.vm.id, /count=2/, 60_000);
    // The bystander's VM lives through every KVM request a checkpoint, a restore and a fork make, under the list.
    const snapshot = await smol.checkpoint(bystander.vm.id, { name: 'kept' });
    await smol.fork(bystander.vm.id, 1);
    const restored = await smol.restore(bystander.vm.id, snapshot.id);
    expect(restored.vm.state).toBe('running');
    process.kill(home.vmhosts().get(victim.episode.id)!, 'SIGPWR');
    const crashed = await eventually('the victim VM to be marked crashed', async () => {
      const vm = await smol.vm(victim.vm.id);
      return vm.state === 'crashed' ? vm : undefined;
    });
    // TIOCSTI (0x5412), a terminal's input faked: never in the list.
    expect(crashed.exit?.message).toMatch(/seccomp: ioctl 0x5412, signal SIGSYS/);
    const before = counts((await smol.logs(bystander.vm.id)).text).at(-1) ?? 0;
    await eventually('the bystander to keep counting', async () =>
      (counts((await smol.logs(bystander.vm.id)).text).at(-1) ?? 0) > before ? true : undefined,
    );
    expect((await smol.vm(bystander.vm.id)).state).toBe('running');
  });

  it('runs in PID and mount namespaces of its own: nothing outside its root opens', async () => {
    // Another data dir with a snapshot of its own: the files of one store are not another's vmhost's to read.
    const other = newHome();
    const otherSmol = await other.client();
    const elsewhere = await otherSmol.up(other.smolfile('count', COUNT), { name: 'elsewhere' });
    const theirs = await otherSmol.checkpoint(elsewhere.vm.id, { name: 'theirs' });
    const home = newHome();
    const outside: Record<string, string> = {
      engineInfo: path.join(home.dir, 'engine.json'),
      engineLog: path.join(home.dir, 'engine.log'),
      engineSocket: path.join(home.dir, 'engine.sock'),
      episodes: path.join(home.dir, 'episodes'),
      otherStore: path.join(other.dir, 'snapshots', theirs.id, 'state'),
      shadow: '/etc/shadow',
      checkout: path.join(root, 'package.json'),
    };
    // The list the vmhost reads at SIGWINCH: a relative name is in its episode's run/ directory (which its root shows).
    process.env.SMOL_TEST_OPEN = 'test-open.json';
    const smol = await home.client();
    // Another episode of the same data dir: its run/ directory holds its VM's network config (and, for a guest with
    // the agent, the vsock muxer's socket: the way to that guest's agent).
    const neighbour = await smol.up(
      home.smolfile('net', ['kernel = "@guests@/net.elf"', 'memory = 16', 'net = true', ''].join('\n')),
      { name: 'neighbour' },
    );
    const up = await smol.up(home.smolfile('count', COUNT), { name: 'jailed' });
    await smol.waitForOutput(up.vm.id, /count=2/, 60_000);
    const neighbourRun = path.join(home.dir, 'run', neighbour.episode.id);
    const neighbourFiles = readdirSync(neighbourRun).map((name) => path.join(neighbourRun, name));
    const list = path.join(home.dir, 'run', up.episode.id, 'test-open.json');
    const snapshot = await smol.checkpoint(up.vm.id, { name: 'mine' });
    const pid = home.vmhosts().get(up.episode.id)!;
    // Its own PID namespace, where it is the first process; the engine's is the host's.
    expect(status(pid).NSpid!.split(/\s+/)).toEqual([String(pid), '1']);
    expect(status(home.enginePid()!).NSpid!.split(/\s+/)).toHaveLength(1);
    // Its mount table: a read-only tmpfs root and what the jail shows, nothing of the host's root.
    const mounts = readFileSync(`/proc/${pid}/mountinfo`, 'utf8').trim().split('\n');
    const points = mounts.map((line) => line.split(' ')[4]!);
    expect(mounts.find((line) => line.split(' ')[4] === '/')).toMatch(/ ro,.* - tmpfs smol-jail /);
    const ownRun = path.join(home.dir, 'run', up.episode.id);
    expect(points).toEqual(expect.arrayContaining(['/dev/kvm', '/proc', path.join(home.dir, 'snapshots'), ownRun]));
    expect(points).not.toContain(home.dir);
    expect(points).not.toContain(path.join(home.dir, 'run'));
    // Its neighbour's directory and what is in it: not in its root.
    expect(
      neighbourFiles.some((file) => file.endsWith('.net')),
      'the neighbour has a network config',
    ).toBe(true);
    outside.neighbourRun = neighbourRun;
    neighbourFiles.forEach((file, i) => (outside[`neighbourFile${i}`] = file));
    // Each file outside: refused; its own snapshot (the test's path, MINE, is the real one) and /dev/kvm: open.
    const ownState = path.join(home.dir, 'snapshots', snapshot.id, 'state');
    expect(statSync(ownState).size, 'its snapshot is there on the host').toBeGreaterThan(0);
    for (const file of Object.values(outside)) expect(existsSync(file), `${file} is there on the host`).toBe(true);
    writeFileSync(list, JSON.stringify([...Object.values(outside), ownState, '/dev/kvm']));
    process.kill(pid, 'SIGWINCH');
    const lines = await eventually('the vmhost to say what it opened', async () => {
      const found = readFileSync(path.join(home.dir, 'engine.log'), 'utf8')
        .split('\n')
        .filter((line) => line.includes(' test-open '));
      return found.length >= Object.keys(outside).length + 2 ? found : undefined;
    });
    const result = (file: string) =>
      lines
        .find((line) => line.includes(` test-open ${file}: `))
        ?.split(': ')
        .at(-1);
    for (const [what, file] of Object.entries(outside)) expect([what, result(file)]).toEqual([what, 'ENOENT']);
    expect(result(ownState)).toBe('ok');
    expect(result('/dev/kvm')).toBe('ok');
  });

  it('a vmhost whose VMs have no network gets an empty network namespace; one with net = true keeps the host’s', async () => {
    const home = newHome();
    const smol = await home.client();
    const plain = await smol.up(home.smolfile('count', COUNT), { name: 'offline' });
    const networked = await smol.up(
      home.smolfile('net', ['kernel = "@guests@/net.elf"', 'memory = 16', 'net = true', ''].join('\n')),
      { name: 'online' },
    );
    await smol.waitForOutput(plain.vm.id, /count=1/, 60_000);
    const ns = (pid: number) => readlinkSync(`/proc/${pid}/ns/net`);
    const engine = ns(home.enginePid()!);
    const offline = home.vmhosts().get(plain.episode.id)!;
    const online = home.vmhosts().get(networked.episode.id)!;
    expect(ns(offline)).not.toBe(engine);
    expect(ns(online)).toBe(engine);
    // Nothing but a loopback that is down: no route out of it, whatever a subverted device model tried.
    const links = readFileSync(`/proc/${offline}/net/dev`, 'utf8').trim().split('\n').slice(2);
    expect(links.map((line) => line.split(':')[0]!.trim())).toEqual(['lo']);
    expect(readFileSync(`/proc/${offline}/net/route`, 'utf8').trim().split('\n')).toHaveLength(1);
    expect((await smol.vm(plain.vm.id)).state).toBe('running');
  });
});
