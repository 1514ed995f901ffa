import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_NAME = 'smol-studio';

function findPackageRoot(start: string): string {
  for (let dir = start; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      const { name } = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown };
      if (name === PACKAGE_NAME) return dir;
    }
    if (path.dirname(dir) === dir) {
      throw new Error(`cannot find the ${PACKAGE_NAME} package root above ${start}`);
    }
  }
}

/** The checkout (or installed package) this code belongs to; the same from the sources and from `dist/`. */
export const packageRoot = findPackageRoot(path.dirname(fileURLToPath(import.meta.url)));
