// Host packages the lab needs, installed through apt when we are root.
import { spawnSync } from 'node:child_process';
import { EXIT, LabError, progress } from './errors.js';

export const REQUIRED_PACKAGES = ['qemu-system-x86', 'busybox-static', 'cpio', 'xz-utils'];

const isRoot = () => process.getuid?.() === 0;

function run(command, args, options = {}) {
  return spawnSync(command, args, {
    encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    ...options,
  });
}

function lastLine(text) {
  return (text || '').trim().split('\n').filter(Boolean).pop() || '';
}

/** apt-get with `update` run at most once per lab invocation. */
export function createApt() {
  let updated = false;
  return {
    canInstall: isRoot(),
    get updated() {
      return updated;
    },
    update() {
      if (updated) return;
      updated = true;
      progress('apt-get update…');
      const result = run('apt-get', ['update', '-q']);
      if (result.status !== 0) {
        throw new LabError(EXIT.setupFailed, `apt-get update failed: ${lastLine(result.stderr || result.stdout)}`);
      }
    },
    install(packages) {
      progress(`installing ${packages.join(' ')}…`);
      const result = run('apt-get', ['install', '-y', '-q', ...packages]);
      if (result.status !== 0) {
        throw new LabError(
          EXIT.missingPackage,
          `apt-get install ${packages.join(' ')} failed: ${lastLine(result.stderr || result.stdout)}`,
        );
      }
    },
    run,
  };
}

export function missingPackages(packages) {
  const result = run('dpkg-query', ['-W', '-f=${db:Status-Abbrev} ${Package}\\n', ...packages]);
  if (result.error) {
    throw new LabError(EXIT.missingPackage, 'the lab needs a Debian-based host (dpkg-query, apt-get not found)');
  }
  const installed = new Set(
    result.stdout
      .split('\n')
      .filter((line) => line.startsWith('ii '))
      .map((line) => line.split(' ').pop()),
  );
  return packages.filter((name) => !installed.has(name));
}

/** Installs missing packages as root, or fails naming them and the command that installs them. */
export function ensurePackages(apt, packages = REQUIRED_PACKAGES) {
  const missing = missingPackages(packages);
  if (missing.length === 0) return;
  const list = missing.join(' ');
  if (!apt.canInstall) {
    throw new LabError(
      EXIT.missingPackage,
      `missing packages: ${list}; install them with: sudo apt-get update && sudo apt-get install -y ${list}`,
    );
  }
  apt.update();
  apt.install(missing);
  const still = missingPackages(missing);
  if (still.length > 0)
    throw new LabError(EXIT.missingPackage, `packages still missing after install: ${still.join(' ')}`);
}
