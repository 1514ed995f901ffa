#!/usr/bin/env bash
# The Debian packages Smol Studio needs on a fresh machine (run as root, or through sudo).
#   build: a C compiler and make for the VMM, its tests and the tiny guests; libslirp-dev (with libglib2.0-dev and
#          pkg-config, which its .pc file needs) for the network's user-mode stack (docs/network.md)
#          libseccomp-dev for each vmhost's seccomp allow-list (docs/security.md); libzstd-dev for the addon's
#          zstd of .smolmachine chunks (docs/smolmachine.md, "Compression")
#   fuzz:  clang and its compiler-rt (libclang-rt-14-dev holds libFuzzer and the sanitizer runtimes clang links;
#          `clang` alone does not pull it in without recommends): the snapshot loader's fuzzer (npm run fuzz)
#   lab:   QEMU (TCG with emulated SVM), busybox, cpio, xz: the KVM lab (docs/lab.md)
#   tests: util-linux (unshare) for the no-/dev/kvm test; chromium for the UI tests (Playwright drives it: e2e/)
#   python: pytest, wsproto (the Python SDK's one dependency; it brings h11) and venv (its offline pip install test):
#          sdk/python/tests, run with /usr/bin/python3
#   machines: zstd, the program packing and opening fall back on without the addon (Node 20's zlib has no zstd)
#   images: e2fsprogs (mke2fs -d, debugfs) and attr (getfattr, in the tests) to make OCI images into root disks;
#          docker-registry and skopeo for the OCI tests' and `smol bench image`'s registry on loopback (docs/images.md)
#   kubernetes: golang-go and golang-github-containerd-containerd-dev (containerd 1.6's Go sources) build the
#          containerd shim in GOPATH mode (npm run build:shim, docs/kubernetes.md); containerd (with ctr) for its
#          test; python3-yaml for the offline check of deploy/kubernetes/
#   remote: openssl, which makes the self-signed certificate of smol serve --tls (docs/remote.md); iproute2 (ip netns)
#          for the two-engine test's network namespaces
# The guest kernel build (smol guest build) installs its own packages when it runs.
set -euo pipefail

packages=(build-essential python3 libslirp-dev libseccomp-dev libzstd-dev libglib2.0-dev pkg-config clang libclang-rt-14-dev qemu-system-x86 busybox-static cpio xz-utils util-linux chromium
  python3-pytest python3-wsproto python3-h11 python3-venv
  e2fsprogs attr docker-registry skopeo zstd
  golang-go golang-github-containerd-containerd-dev containerd python3-yaml
  openssl iproute2)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all system packages are installed"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
