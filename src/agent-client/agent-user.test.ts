// EXEC's USER through the real agent binary on this host (--listen unix:, --etc-dir at a passwd and group of the
// test's own): the uid, gid, groups and HOME the process gets, what the request's env overrides, the errors. The
// agent has to be root to change user, as it is in a guest.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../package-root.js';
import { AgentClient } from './agent-client.js';
import { startHostAgent, type HostAgent } from './host-agent.js';

const root = process.getuid?.() === 0;
/** The last commit whose agent has no USER field (0.1.0). */
const OLD_AGENT_COMMIT = 'c9d19e7';
const haveOldAgent =
  spawnSync('git', ['-C', packageRoot, 'cat-file', '-e', `${OLD_AGENT_COMMIT}^{commit}`]).status === 0;
const dir = mkdtempSync(path.join(os.tmpdir(), 'smol-agent-user-'));
const etc = path.join(dir, 'etc');
let agent: HostAgent;
let client: AgentClient;

beforeAll(async () => {
  const make = spawnSync('make', ['-C', path.join(packageRoot, 'native'), 'agent'], { encoding: 'utf8' });
  if (make.status !== 0) throw new Error(`make -C native agent failed:\n${make.stdout}${make.stderr}`);
  mkdirSync(etc);
  writeFileSync(
    path.join(etc, 'passwd'),
    'root:x:0:0:root:/root:/bin/sh\ntester:x:4242:4243:A tester:/home/tester:/bin/sh\n',
  );
  writeFileSync(path.join(etc, 'group'), 'root:x:0:\ntesters:x:4243:\nextra:x:4250:tester\nstaff:x:4260:\n');
  const home = path.join(dir, 'private');
  mkdirSync(home);
  chmodSync(home, 0o700);
  agent = startHostAgent(dir, { args: ['--etc-dir', etc] });
  client = new AgentClient({ socketPath: agent.socketPath });
  await client.ready();
}, 60_000);

afterAll(async () => {
  client?.close();
  await agent?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const id = (user: string, env?: Record<string, string>) =>
  client
    .exec(['sh', '-c', 'echo "$(id -u) $(id -g) $(id -G) $HOME ${USER-unset} ${LOGNAME-unset}"'], {
      user,
      ...(env && { env }),
    })
    .then((result) => {
      expect(result.stderr.toString()).toBe('');
      return result.stdout.toString().trim();
    });

// A shallow clone lacks the commit: then this says so by being skipped.
describe.skipIf(!haveOldAgent)('an agent from before USER (0.1.0, built from commit c9d19e7)', () => {
  it('is refused a user by the client before anything is sent, since it would run the command as root', async () => {
    const old = path.join(dir, 'old');
    mkdirSync(old);
    const build = spawnSync(
      'sh',
      [
        '-c',
        `git -C "$1" archive ${OLD_AGENT_COMMIT} native/agent native/common | tar -x -C "$2" && ` +
          'cd "$2/native" && cc -std=gnu11 -O1 -Icommon -o smol-agent agent/*.c common/le_codec.c common/file_io.c',
        'sh',
        packageRoot,
        old,
      ],
      { encoding: 'utf8' },
    );
    if (build.status !== 0) throw new Error(`building the old agent failed:\n${build.stderr}`);
    const oldAgent = startHostAgent(old, { binary: path.join(old, 'native', 'smol-agent') });
    const oldClient = new AgentClient({ socketPath: oldAgent.socketPath });
    try {
      const hello = await oldClient.ready();
      expect(hello).toMatchObject({ version: '0.1.0', features: [] });
      await expect(oldClient.exec(['id', '-u'], { user: 'nobody' })).rejects.toMatchObject({
        code: 'ENOTSUP',
        message: expect.stringContaining('cannot run commands as a user'),
      });
      expect((await oldClient.exec(['id', '-u'])).stdout.toString()).toBe(`${process.getuid?.()}\n`);
      // root is what such an agent runs everything as, so asking for it is not refused (smol cp asks for it)
      if (root) expect((await oldClient.exec(['id', '-u'], { user: '0' })).stdout.toString()).toBe('0\n');
    } finally {
      oldClient.close();
      await oldAgent.stop();
    }
  }, 60_000);
});

describe.skipIf(!root)('agent exec as a user (needs root, as the agent has in a guest)', () => {
  it('a name runs with its uid, gid, groups from group, and HOME, USER and LOGNAME from passwd', async () => {
    expect(await id('tester')).toBe('4242 4243 4243 4250 /home/tester tester tester');
  });

  it('a uid in passwd is that user; one not in passwd runs with gid 0 and HOME /, as docker does', async () => {
    expect(await id('4242')).toBe('4242 4243 4243 4250 /home/tester tester tester');
    expect(await id('5555')).toBe('5555 0 0 / unset unset');
  });

  it('a group replaces the primary group and drops the supplementary ones', async () => {
    expect(await id('tester:staff')).toBe('4242 4260 4260 /home/tester tester tester');
    expect(await id('5555:6666')).toBe('5555 6666 6666 / unset unset');
    expect(await id('0')).toBe('0 0 0 /root root root');
  });

  it("the request's env wins over HOME and USER", async () => {
    expect(await id('tester', { HOME: '/elsewhere', USER: 'someone' })).toBe(
      '4242 4243 4243 4250 /elsewhere someone tester',
    );
  });

  it('the cwd is entered as the user: a directory only root may enter is EACCES', async () => {
    const asRoot = await client.exec(['pwd'], { cwd: path.join(dir, 'private') });
    expect(asRoot.stdout.toString().trim()).toBe(path.join(dir, 'private'));
    await expect(client.exec(['pwd'], { cwd: path.join(dir, 'private'), user: 'tester' })).rejects.toMatchObject({
      code: 'EACCES',
    });
  });

  it('a user or group the files lack is an error naming it and the file', async () => {
    await expect(client.exec(['true'], { user: 'bob' })).rejects.toThrow(
      `EXEC: user "bob" is not in ${etc}/passwd (ENOENT)`,
    );
    await expect(client.exec(['true'], { user: 'tester:nogroup' })).rejects.toThrow(
      `EXEC: group "nogroup" is not in ${etc}/group (ENOENT)`,
    );
    await expect(client.exec(['true'], { user: 'tester:' })).rejects.toThrow(/expected name, uid, name:group/);
  });
});
