// The lab's initramfs: busybox-static, the kernel modules and init.sh, as an uncompressed newc cpio archive.
// Cached by a hash of its inputs, so editing init.sh or the module list rebuilds it.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { markUsed, pruneUnused } from './cache.js';
import { EXIT, LabError, progress } from './errors.js';

const INIT_SCRIPT = fileURLToPath(new URL('./init.sh', import.meta.url));
const BUSYBOX = '/bin/busybox'; // from busybox-static: the dynamic busybox would not run in the initramfs

function inputsHash(kernel) {
  const hash = createHash('sha256');
  hash.update(kernel.id).update('\0').update(kernel.modules.join(',')).update('\0');
  hash.update(fs.readFileSync(INIT_SCRIPT)).update('\0');
  const busybox = fs.statSync(BUSYBOX);
  hash.update(`${busybox.size}:${busybox.mtimeMs}`);
  return hash.digest('hex').slice(0, 16);
}

function stageTree(kernel, root) {
  for (const dir of ['bin', 'dev', 'proc', 'sys', 'mnt', 'lab', 'lib/modules'])
    fs.mkdirSync(path.join(root, dir), { recursive: true });
  fs.copyFileSync(INIT_SCRIPT, path.join(root, 'init'));
  fs.chmodSync(path.join(root, 'init'), 0o755);
  fs.copyFileSync(BUSYBOX, path.join(root, 'bin/busybox'));
  fs.chmodSync(path.join(root, 'bin/busybox'), 0o755);
  for (const file of fs.readdirSync(kernel.modulesDir)) {
    fs.copyFileSync(path.join(kernel.modulesDir, file), path.join(root, 'lib/modules', file));
  }
}

function writeCpio(root, archive) {
  const files = ['.', ...fs.readdirSync(root, { recursive: true })].join('\n') + '\n';
  const out = fs.openSync(archive, 'w');
  try {
    const result = spawnSync('cpio', ['-o', '-H', 'newc', '-R', '0:0', '--quiet'], {
      cwd: root,
      input: files,
      stdio: ['pipe', out, 'pipe'],
    });
    if (result.status !== 0) throw new LabError(EXIT.setupFailed, `cpio failed: ${String(result.stderr).trim()}`);
  } finally {
    fs.closeSync(out);
  }
}

/** Returns the path of the initramfs for this kernel, building it when its inputs changed. */
export function ensureInitramfs(kernel, labDir) {
  const archive = path.join(labDir, `initramfs-${inputsHash(kernel)}.cpio`);
  if (fs.existsSync(archive)) {
    markUsed(archive);
    return archive;
  }
  progress('building the lab initramfs…');
  const tmp = fs.mkdtempSync(path.join(labDir, 'tmp-initramfs-'));
  try {
    stageTree(kernel, path.join(tmp, 'root'));
    writeCpio(path.join(tmp, 'root'), path.join(tmp, 'initramfs.cpio'));
    fs.renameSync(path.join(tmp, 'initramfs.cpio'), archive);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  pruneUnused(labDir, 'initramfs-', archive);
  return archive;
}
