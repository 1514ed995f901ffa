// The lab's kernel: Debian's standard amd64 kernel (the -cloud one has no 9p), unpacked from its .deb, with only
// the modules the lab loads kept in the cache.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { EXIT, LabError, progress } from './errors.js';
import { markUsed, pruneUnused } from './cache.js';
import { ensurePvhImage } from './pvh.js';

// What the lab needs; their dependencies are found in the modules' own .modinfo and loaded first.
export const WANTED_MODULES = ['virtio_pci', '9pnet_virtio', '9p', 'virtio_console', 'virtio_net', 'kvm_amd'];
const META_PACKAGE = 'linux-image-amd64';

const moduleName = (file) => path.basename(file).replace(/\.ko$/, '').replaceAll('-', '_');
const shortHash = (text) => createHash('sha256').update(text).digest('hex').slice(0, 12);

/** Asks apt which kernel `linux-image-amd64` points at, e.g. { name: 'linux-image-6.1.0-57-amd64', version }. */
function resolveKernelPackage(apt) {
  const show = () => apt.run('apt-cache', ['show', '--no-all-versions', META_PACKAGE]);
  let result = show();
  if (result.status !== 0 && apt.canInstall && !apt.updated) {
    apt.update();
    result = show();
  }
  const match = /^Depends:.*?\b(linux-image-[^\s,]+)\s*\(=\s*([^)\s]+)\)/m.exec(result.stdout || '');
  return match ? { name: match[1], version: match[2] } : null;
}

function downloadPackage(apt, pkg, dir) {
  progress(`downloading ${pkg.name} ${pkg.version}…`);
  const result = apt.run('apt-get', ['download', '-q', `${pkg.name}=${pkg.version}`], { cwd: dir });
  const deb = fs.readdirSync(dir).find((file) => file.endsWith('.deb'));
  if (result.status !== 0 || !deb) return null;
  return path.join(dir, deb);
}

function extractPackage(apt, deb, dir) {
  progress(`unpacking ${path.basename(deb)}…`);
  const result = apt.run('dpkg-deb', ['-x', deb, dir]);
  if (result.status !== 0) throw new LabError(EXIT.setupFailed, `dpkg-deb -x ${deb} failed: ${result.stderr.trim()}`);
}

/** Maps module name (underscores) to its .ko file under lib/modules/<release>/kernel. */
function indexModules(kernelTree) {
  const index = new Map();
  for (const entry of fs.readdirSync(kernelTree, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    if (/\.ko\.(xz|zst|gz)$/.test(entry.name)) {
      throw new LabError(EXIT.setupFailed, `module ${entry.name} is compressed; the lab expects plain .ko files`);
    }
    if (entry.name.endsWith('.ko'))
      index.set(moduleName(entry.name), path.join(entry.parentPath ?? entry.path, entry.name));
  }
  return index;
}

/** Reads `depends=` from a module's .modinfo section. */
function moduleDepends(file) {
  const bytes = fs.readFileSync(file);
  const start = bytes.indexOf('\0depends=');
  if (start < 0) return [];
  const value = bytes.subarray(start + 9, bytes.indexOf(0, start + 1)).toString();
  return value.split(',').filter(Boolean).map(moduleName);
}

/** Dependencies first, each module once: the order insmod needs. */
export function moduleLoadOrder(index, wanted) {
  const order = [];
  const visit = (name, chain) => {
    if (order.includes(name)) return;
    if (chain.includes(name))
      throw new LabError(EXIT.setupFailed, `module dependency cycle: ${[...chain, name].join(' → ')}`);
    const file = index.get(name);
    if (!file) throw new LabError(EXIT.setupFailed, `kernel module ${name} not found in the kernel package`);
    for (const dep of moduleDepends(file)) visit(dep, [...chain, name]);
    order.push(name);
  };
  for (const name of wanted) visit(name, []);
  return order;
}

function stageKernel(root, stage) {
  const release = fs.readdirSync(path.join(root, 'lib/modules'))[0];
  const index = indexModules(path.join(root, 'lib/modules', release, 'kernel'));
  const order = moduleLoadOrder(index, WANTED_MODULES);
  fs.mkdirSync(path.join(stage, 'modules'), { recursive: true });
  fs.copyFileSync(path.join(root, 'boot', `vmlinuz-${release}`), path.join(stage, 'vmlinuz'));
  for (const name of order) fs.copyFileSync(index.get(name), path.join(stage, 'modules', `${name}.ko`));
  fs.writeFileSync(path.join(stage, 'modules', 'order'), order.join('\n') + '\n');
  fs.writeFileSync(path.join(stage, 'release'), release + '\n');
}

function readKernel(dir) {
  if (!fs.existsSync(path.join(dir, 'release'))) return null;
  const read = (file) => fs.readFileSync(path.join(dir, file), 'utf8').trim();
  return {
    dir,
    id: path.basename(dir),
    release: read('release'),
    bootImage: ensurePvhImage(dir),
    modulesDir: path.join(dir, 'modules'),
    modules: read('modules/order').split('\n'),
  };
}

function cachedKernels(labDir, suffix) {
  return fs
    .readdirSync(labDir)
    .filter((name) => name.startsWith('kernel-') && name.endsWith(suffix))
    .map((name) => path.join(labDir, name))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
}

function downloadAndStage(apt, pkg, labDir, finalDir) {
  const tmp = fs.mkdtempSync(path.join(labDir, 'tmp-kernel-'));
  try {
    const deb = downloadPackage(apt, pkg, tmp);
    if (!deb) return false;
    extractPackage(apt, deb, path.join(tmp, 'root'));
    stageKernel(path.join(tmp, 'root'), path.join(tmp, 'stage'));
    try {
      fs.renameSync(path.join(tmp, 'stage'), finalDir);
    } catch (error) {
      if (!readKernel(finalDir)) throw error; // another lab run staged the same kernel first
    }
    return true;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** Returns the cached kernel, downloading and unpacking it first when apt points at a version not yet cached. */
export function ensureKernel(apt, labDir) {
  const suffix = `-${shortHash(WANTED_MODULES.join(','))}`;
  let pkg = resolveKernelPackage(apt);
  if (!pkg) {
    const cached = cachedKernels(labDir, suffix).map(readKernel).find(Boolean);
    if (cached) {
      progress(`apt cannot resolve ${META_PACKAGE}; using the cached ${cached.id}`);
      return cached;
    }
    throw new LabError(EXIT.setupFailed, `apt does not know ${META_PACKAGE}; run: sudo apt-get update`);
  }
  const dirFor = (p) => path.join(labDir, `kernel-${p.name}_${p.version}${suffix}`);
  const cached = readKernel(dirFor(pkg));
  if (cached) {
    markUsed(cached.dir);
    return cached;
  }
  let ok = downloadAndStage(apt, pkg, labDir, dirFor(pkg));
  if (!ok && apt.canInstall && !apt.updated) {
    apt.update(); // stale package lists point at a kernel the mirror no longer has
    pkg = resolveKernelPackage(apt) ?? pkg;
    ok = readKernel(dirFor(pkg)) !== null || downloadAndStage(apt, pkg, labDir, dirFor(pkg));
  }
  if (!ok)
    throw new LabError(
      EXIT.setupFailed,
      `apt-get download ${pkg.name}=${pkg.version} failed; run: sudo apt-get update`,
    );
  pruneUnused(labDir, 'kernel-', dirFor(pkg));
  pruneUnused(labDir, 'tmp-', null); // left by a build that was killed
  return readKernel(dirFor(pkg));
}
