import { describe, expect, it } from 'vitest';
import { ensurePackages, type PackageTools } from './host-packages.js';

function fakeTools(installed: string[], canInstall: boolean) {
  const have = new Set(installed);
  const installs: string[][] = [];
  const tools: PackageTools = {
    installedVersions: (names) => new Map(names.filter((n) => have.has(n)).map((n) => [n, '1.0'])),
    depends: () => '',
    canInstall,
    install: (names) => {
      installs.push(names);
      names.forEach((n) => have.add(n));
    },
  };
  return { tools, installs };
}

describe('packages the guest build needs', () => {
  it('nothing happens when all are installed', () => {
    const { tools, installs } = fakeTools(['bc', 'flex'], false);
    ensurePackages(tools, ['bc', 'flex']);
    expect(installs).toEqual([]);
  });

  it('as root, the missing ones are installed', () => {
    const { tools, installs } = fakeTools(['bc'], true);
    ensurePackages(tools, ['bc', 'flex', 'bison']);
    expect(installs).toEqual([['flex', 'bison']]);
  });

  it('not as root, the error names the packages and the command that installs them', () => {
    const { tools } = fakeTools(['bc'], false);
    expect(() => ensurePackages(tools, ['bc', 'flex', 'bison'])).toThrow(
      'missing packages: flex bison; install them with: sudo apt-get update && sudo apt-get install -y flex bison',
    );
  });
});
