// The per-run directory shared read-only into the lab as `smolrun`: the command, its environment, the writable
// shares to mount, and the sockets QEMU connects the command's stdout and stderr to.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const PASSED_NAMES = new Set([
  'PATH',
  'HOME',
  'CI',
  'TERM',
  'LANG',
  'LC_ALL',
  'TZ',
  'USER',
  'LOGNAME',
  'FORCE_COLOR',
  'NO_COLOR',
]);
const PASSED_PREFIXES = ['SMOL_', 'VITEST', 'NODE_', 'npm_config_', 'LC_', 'XDG_'];

export function shellQuote(text) {
  return `'${String(text).replaceAll("'", `'\\''`)}'`;
}

export function passesIntoLab(name) {
  return (
    /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && (PASSED_NAMES.has(name) || PASSED_PREFIXES.some((p) => name.startsWith(p)))
  );
}

export function envScript(env) {
  const lines = Object.entries(env)
    .filter(([name]) => passesIntoLab(name) && name !== 'SMOL_IN_LAB')
    .map(([name, value]) => `export ${name}=${shellQuote(value)}`);
  // HOME is read-only inside the lab: npm and npx need a writable cache (for their locks, not for downloads).
  return [...lines, 'export SMOL_IN_LAB=1', 'export npm_config_cache=/tmp/npm-cache', ''].join('\n');
}

export function commandScript(cwd, argv) {
  return [
    '. /tmp/.smol-lab/env.sh',
    `cd ${shellQuote(cwd)} || exit 126`,
    `exec ${argv.map(shellQuote).join(' ')}`,
    '',
  ].join('\n');
}

const isInside = (child, parent) => child === parent || child.startsWith(parent.endsWith('/') ? parent : parent + '/');

/** Writable 9p shares: each path once, none nested inside another (the outer share already covers it). */
export function writableShares(paths) {
  const unique = [...new Set(paths.map((p) => path.resolve(p)))].filter((p) => fs.existsSync(p));
  const outermost = unique.filter((p) => !unique.some((other) => other !== p && isInside(p, other)));
  return outermost.sort().map((dir, i) => ({ tag: `smolshare${i}`, dir }));
}

const RUN_DIR_PREFIX = 'smol-lab-';

function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/** Removes run directories left behind by lab runs that were killed (SIGKILL leaves no chance to clean up). */
export function removeStaleRunDirs() {
  for (const name of fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith(RUN_DIR_PREFIX))) {
    const dir = path.join(os.tmpdir(), name);
    try {
      const owner = Number(fs.readFileSync(path.join(dir, 'owner'), 'utf8'));
      if (!isAlive(owner)) fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // no owner file yet (being created) or not ours to read: leave it
    }
  }
}

export function createRunDir({ cwd, argv, env, shares }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), RUN_DIR_PREFIX));
  fs.writeFileSync(path.join(dir, 'owner'), String(process.pid));
  fs.writeFileSync(path.join(dir, 'env.sh'), envScript(env));
  fs.writeFileSync(path.join(dir, 'command.sh'), commandScript(cwd, argv));
  fs.writeFileSync(path.join(dir, 'shares'), shares.map((s) => `${s.tag} ${s.dir}\n`).join(''));
  return {
    dir,
    stdoutSocket: path.join(dir, 'stdout.sock'),
    stderrSocket: path.join(dir, 'stderr.sock'),
    monitorSocket: path.join(dir, 'monitor.sock'),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}
