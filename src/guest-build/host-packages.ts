// Debian packages the guest builds need: found with dpkg-query, installed with apt-get when we are root.
import { spawnSync } from 'node:child_process';

export interface PackageTools {
  /** Installed version of each package that is installed ("ii"); others are absent from the map. */
  installedVersions(packages: string[]): Map<string, string>;
  /** A package's Depends field ('' when it is not installed). */
  depends(pkg: string): string;
  canInstall: boolean;
  install(packages: string[]): void;
}

function run(command: string, args: string[]) {
  return spawnSync(command, args, {
    encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    maxBuffer: 64 * 1024 * 1024,
  });
}

function lastLine(text: string | null | undefined): string {
  return (text ?? '').trim().split('\n').filter(Boolean).pop() ?? '';
}

const NOT_DEBIAN = 'the guest build needs a Debian-based host with dpkg-query and apt-get';

/** The real dpkg/apt. `apt-get update` runs once, before the first install. */
export function debianPackageTools(): PackageTools {
  let updated = false;
  return {
    installedVersions(packages) {
      const result = run('dpkg-query', ['-W', '-f=${db:Status-Abbrev}\\t${Package}\\t${Version}\\n', ...packages]);
      if (result.error) throw new Error(`${NOT_DEBIAN} (${result.error.message})`);
      const versions = new Map<string, string>();
      for (const line of result.stdout.split('\n')) {
        const [status, name, version] = line.split('\t');
        if (status?.startsWith('ii') && name && version) versions.set(name, version);
      }
      return versions;
    },
    depends(pkg) {
      const result = run('dpkg-query', ['-W', '-f=${Depends}', pkg]);
      return result.status === 0 ? result.stdout.trim() : '';
    },
    canInstall: process.getuid?.() === 0,
    install(packages) {
      if (!updated) {
        const update = run('apt-get', ['update', '-q']);
        if (update.status !== 0) {
          throw new Error(
            `apt-get update failed: ${lastLine(update.stderr || update.stdout) || update.error?.message}`,
          );
        }
        updated = true;
      }
      const result = run('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...packages]);
      if (result.status !== 0) {
        const why = lastLine(result.stderr || result.stdout) || result.error?.message;
        throw new Error(`apt-get install ${packages.join(' ')} failed: ${why}`);
      }
    },
  };
}

/** Installs what is missing (as root) or fails naming the packages and the command that installs them. */
export function ensurePackages(tools: PackageTools, packages: string[], onInstall?: (missing: string[]) => void) {
  const installed = tools.installedVersions(packages);
  const missing = packages.filter((name) => !installed.has(name));
  if (missing.length === 0) return;
  const list = missing.join(' ');
  if (!tools.canInstall) {
    throw new Error(
      `missing packages: ${list}; install them with: sudo apt-get update && sudo apt-get install -y ${list}`,
    );
  }
  onInstall?.(missing);
  tools.install(missing);
  const still = missing.filter((name) => !tools.installedVersions([name]).has(name));
  if (still.length > 0) throw new Error(`packages still missing after apt-get install: ${still.join(' ')}`);
}
