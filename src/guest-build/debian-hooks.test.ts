import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  finishHook,
  hookEnvironment,
  initEnvironment,
  initHook,
  installHook,
  mmdebstrapArgs,
  shellQuote,
  INIT_PATH,
  PROXY_VARIABLES,
} from './debian-hooks.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'smol-debian-hooks-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Runs a hook the way mmdebstrap does: `sh -c HOOK exec TREE`, with `chroot` replaced by one that stays here. */
function runHook(hook: string, tree: string, env: Record<string, string> = {}) {
  const bin = path.join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  // The stand-in chroot runs the command on the host, with the tree as its working directory.
  writeFileSync(path.join(bin, 'chroot'), '#!/bin/sh\ncd "$1" && shift && exec "$@"\n');
  chmodSync(path.join(bin, 'chroot'), 0o755);
  return spawnSync('sh', ['-c', hook, 'exec', tree], {
    encoding: 'utf8',
    env: { PATH: `${bin}:${process.env.PATH}`, SECRET_OF_THE_HOST: 'leak', ...env },
  });
}

describe('init commands in the tree', () => {
  it('any text survives shell quoting as one word', () => {
    for (const text of ['plain', "it's", "'", "a'b'c", '$HOME `id` "q" \\ \n end', '']) {
      const result = spawnSync('sh', ['-c', `printf %s ${shellQuote(text)}`], { encoding: 'utf8' });
      expect(result.stdout).toBe(text);
    }
  });

  it('get PATH, HOME and DEBIAN_FRONTEND, then the Smolfile env, whose values stay out of the hook text', () => {
    expect(initEnvironment({ A: '1', PATH: '/opt/bin' })).toEqual([
      `'PATH=${INIT_PATH}'`,
      "'HOME=/root'",
      "'DEBIAN_FRONTEND=noninteractive'",
      ...PROXY_VARIABLES.map((name) => `\${${name}:+"${name}=$${name}"}`),
      '"A=$SMOL_INIT_ENV_A"',
      '"PATH=$SMOL_INIT_ENV_PATH"',
    ]);
    expect(hookEnvironment({ A: '1', PATH: '/opt/bin' })).toEqual({
      SMOL_INIT_ENV_A: '1',
      SMOL_INIT_ENV_PATH: '/opt/bin',
    });
  });

  it('refuse an env name that is not a variable name, or a value with a NUL', () => {
    expect(() => initEnvironment({ 'A-B': 'x' })).toThrow('env: "A-B" is not a variable name');
    expect(() => hookEnvironment({ A: 'x\0y' })).toThrow("env: A's value contains a NUL character");
  });

  it('run with only their env, framed by markers that carry the status; a failure fails the hook', () => {
    const tree = path.join(dir, 'tree');
    mkdirSync(tree);
    const command = `echo "it's $GREETING in $PWD, host [$SECRET_OF_THE_HOST]"; echo oops >&2; exit 3`;
    const env = { GREETING: 'a "hi" $x', PATH: '/usr/bin:/bin' };
    const hook = initHook(command, 1, env, 'M:');
    expect(hook).not.toContain('"hi"');
    const result = runHook(hook, tree, hookEnvironment(env));
    expect(result.status).toBe(3);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(`M: begin 1\nit's a "hi" $x in ${tree}, host []\noops\nM: end 1 3\n`);
  });

  it("get the host's proxy settings when it has them, and only then", () => {
    const tree = path.join(dir, 'tree');
    mkdirSync(tree);
    const hook = initHook('echo "[$http_proxy] [${https_proxy-unset}]"', 0, {}, 'M:');
    const behindProxy = runHook(hook, tree, { http_proxy: 'http://proxy:3128', https_proxy: '' });
    expect(behindProxy.stderr).toBe('M: begin 0\n[http://proxy:3128] [unset]\nM: end 0 0\n');
    expect(runHook(hook, tree).stderr).toBe('M: begin 0\n[] [unset]\nM: end 0 0\n');
  });

  it('read nothing from stdin', () => {
    const tree = path.join(dir, 'tree');
    mkdirSync(tree);
    const result = runHook(initHook('cat; echo done', 0, {}, 'M:'), tree);
    expect(result.status).toBe(0);
    expect(result.stderr).toBe('M: begin 0\ndone\nM: end 0 0\n');
  });
});

describe('our files in the tree', () => {
  it('the agent, /init, /etc/inittab, the host name and busybox links go in, through merged-/usr links', () => {
    const tree = path.join(dir, 'tree');
    for (const sub of ['usr/sbin', 'usr/local/sbin', 'etc']) mkdirSync(path.join(tree, sub), { recursive: true });
    symlinkSync('usr/sbin', path.join(tree, 'sbin'));
    writeFileSync(path.join(tree, 'usr/sbin/halt'), 'Debian has its own');
    const files = path.join(dir, "files with 'quotes'");
    mkdirSync(files);
    for (const name of ['smol-agent', 'init', 'inittab']) writeFileSync(path.join(files, name), `${name} bytes`);

    const result = runHook(installHook(files), tree);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(readFileSync(path.join(tree, 'usr/sbin/smol-agent'), 'utf8')).toBe('smol-agent bytes');
    expect(statSync(path.join(tree, 'usr/sbin/smol-agent')).mode & 0o777).toBe(0o755);
    expect(statSync(path.join(tree, 'init')).mode & 0o777).toBe(0o755);
    expect(statSync(path.join(tree, 'etc/inittab')).mode & 0o777).toBe(0o644);
    expect(readFileSync(path.join(tree, 'etc/hostname'), 'utf8')).toBe('smol\n');
    expect(readFileSync(path.join(tree, 'etc/hosts'), 'utf8')).toBe('127.0.0.1\tlocalhost\n127.0.1.1\tsmol\n');
    expect(readlinkSync(path.join(tree, 'usr/local/sbin/poweroff'))).toBe('/bin/busybox');
    expect(readlinkSync(path.join(tree, 'usr/local/sbin/reboot'))).toBe('/bin/busybox');
    expect(() => readlinkSync(path.join(tree, 'usr/local/sbin/halt'))).toThrow(); // Debian's own is kept
  });

  it("the last hook takes the host's resolv.conf out", () => {
    const tree = path.join(dir, 'tree');
    mkdirSync(path.join(tree, 'etc'), { recursive: true });
    writeFileSync(path.join(tree, 'etc/resolv.conf'), 'nameserver 10.0.0.1\n');
    expect(runHook(finishHook(), tree).status).toBe(0);
    expect(() => statSync(path.join(tree, 'etc/resolv.conf'))).toThrow();
  });
});

describe('the mmdebstrap command line', () => {
  it('is minbase as root, verbose, with the packages, the hooks in order, the suite, tree and mirror', () => {
    const args = mmdebstrapArgs({
      suite: 'bookworm',
      mirror: 'http://deb.debian.org/debian',
      tree: '/c/images/build-debian-x/tree',
      include: ['busybox-static', 'less'],
      hooks: ['first "$1"', 'second'],
    });
    expect(args).toEqual([
      '--mode=root',
      '--variant=minbase',
      '--include=busybox-static,less',
      '--verbose',
      '--customize-hook=first "$1"',
      '--customize-hook=second',
      'bookworm',
      '/c/images/build-debian-x/tree',
      'http://deb.debian.org/debian',
    ]);
  });
});
