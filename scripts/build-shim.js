#!/usr/bin/env node
// `npm run build:shim`: builds the containerd shim (shim/, Go) into shim/bin/containerd-shim-smol-v2 against
// Debian's Go packages in GOPATH mode (golang-go 1.19 and golang-github-containerd-containerd-dev put containerd
// 1.6's sources and their dependencies under /usr/share/gocode; no module proxy is reached). With --if-go (npm's
// `build`), a machine without Go skips it and says so. docs/kubernetes.md.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const gocode = '/usr/share/gocode';
const optional = process.argv.includes('--if-go');

const go = spawnSync('go', ['version'], { encoding: 'utf8' });
if (go.error || go.status !== 0) {
  const why = 'go is not installed (apt-get install golang-go golang-github-containerd-containerd-dev)';
  console.error(`build:shim: ${optional ? 'skipped: ' : ''}${why}`);
  process.exit(optional ? 0 : 1);
}
if (!existsSync(path.join(gocode, 'src/github.com/containerd/containerd/runtime/v2/shim'))) {
  console.error(
    `build:shim: containerd's Go sources are not in ${gocode}: apt-get install golang-github-containerd-containerd-dev`,
  );
  process.exit(optional ? 0 : 1);
}
const output = path.join(root, 'shim', 'bin', 'containerd-shim-smol-v2');
const result = spawnSync('go', ['build', '-trimpath', '-o', output, '.'], {
  cwd: path.join(root, 'shim'),
  stdio: 'inherit',
  env: { ...process.env, GO111MODULE: 'off', GOPATH: gocode, GOFLAGS: '' },
});
if (result.status === 0) console.error(`build:shim: ${path.relative(process.cwd(), output)}`);
process.exit(result.status ?? 1);
