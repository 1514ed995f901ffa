#!/bin/busybox sh
# /init of the KVM lab's initramfs (built by scripts/lab.js). It loads kvm-amd, mounts the host's root read-only
# and the writable shares over 9p, then runs /lab/command.sh chrooted into the host's root.
# Channels: boot noise and SMOL-LAB-* status lines go to the serial console; the command's stdout and stderr go to
# the virtio-serial ports smol.stdout and smol.stderr, each ended by a marker line carrying the run's nonce.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# cgroup v2, as a systemd host mounts it: the engine puts each vmhost in a cgroup of its own (docs/security.md).
mount -t cgroup2 cgroup2 /sys/fs/cgroup
NONCE=$(sed -n 's/.*smol\.nonce=\([0-9a-f]*\).*/\1/p' /proc/cmdline)

say() { echo "SMOL-LAB-$1-$NONCE $2" >/dev/console; }
fail() {
  say FAIL "$1 $2"
  poweroff -f
  sleep 60
}

load_modules() {
  while read -r name; do
    insmod "/lib/modules/$name.ko" || fail modules "insmod $name failed"
  done </lib/modules/order
  [ -c /dev/kvm ] || fail nokvm "/dev/kvm is missing after loading kvm-amd"
}

mount_9p() { # tag dir [extra options]
  mount -t 9p -o "trans=virtio,version=9p2000.L,msize=512000$3" "$1" "$2" || fail mount "cannot mount 9p share $1 on $2"
}

mount_filesystems() {
  mkdir -p /mnt /lab /dev/pts /dev/shm
  mount -t devpts devpts /dev/pts
  mount -t tmpfs -o mode=1777 tmpfs /dev/shm
  # cache=loose: without a page cache every page of node and node_modules is a 9p round trip under TCG (node -e 0
  # took 26 s instead of 6 s on a loaded host). The lab may miss host-side edits made during a run; its own writes
  # to the writable shares are flushed by the `sync` before the end markers, so the host sees every one.
  mount_9p hostroot /mnt ,ro,cache=loose
  mount_9p smolrun /lab ,ro
  mount -t tmpfs -o mode=1777 tmpfs /mnt/tmp || fail mount "cannot mount tmpfs on /tmp"
  # Writable shares (the checkout, the cache) at their host paths, parents first; mountpoints under /tmp are made.
  while read -r tag dir; do
    mkdir -p "/mnt$dir" 2>/dev/null
    mount_9p "$tag" "/mnt$dir" ,cache=loose
  done </lab/shares
  for dir in dev proc sys; do mount -o rbind "/$dir" "/mnt/$dir"; done
  mkdir -p /mnt/tmp/.smol-lab
  cp /lab/env.sh /lab/command.sh /mnt/tmp/.smol-lab/
}

# The guest images the host packed (scripts/lab/guest-images.js), unpacked with their holes into the lab's /tmp,
# where the tests' SMOL_HOMEs are: an engine adopts an image by a hard link, not by reading 4 GiB over 9p. The rest
# of the cache stays the real one, through symlinks, and the command gets SMOL_CACHE=/tmp/.smol-lab/cache.
stage_guest_images() {
  [ -f /lab/guest-cache ] || return 0
  cache=$(cat /lab/guest-cache)
  mkdir -p /mnt/tmp/.smol-lab/cache/guest
  # dd's large reads: /lab has no page cache, and tar's 10 KiB reads were a 9p round trip each (40 s for 250 MiB).
  dd if=/lab/guest-images.tar bs=1M 2>/dev/null | /bin/chroot /mnt /bin/tar -xf - -C /tmp/.smol-lab/cache/guest ||
    fail images "cannot unpack the guest images into /tmp"
  for entry in "/mnt$cache"/* "/mnt$cache/guest"/*; do
    [ -e "$entry" ] || continue
    relative=${entry#"/mnt$cache/"}
    [ "$relative" = guest ] || [ "$relative" = guest/images ] || [ -e "/mnt/tmp/.smol-lab/cache/$relative" ] ||
      ln -s "$cache/$relative" "/mnt/tmp/.smol-lab/cache/$relative"
  done
  echo "export SMOL_CACHE=/tmp/.smol-lab/cache" >>/mnt/tmp/.smol-lab/env.sh
}

find_port() { # virtio-serial port name -> /dev node (ports appear shortly after virtio_console loads)
  for _ in $(seq 100); do
    for port in /sys/class/virtio-ports/*; do
      [ "$(cat "$port/name" 2>/dev/null)" = "$1" ] && echo "/dev/${port##*/}" && return
    done
    sleep 0.05
  done
  fail ports "virtio-serial port $1 not found"
}

load_modules
# Every SysRq function, so that the host can ask a hung lab for its tasks' kernel stacks (scripts/lab/hang.js).
echo 1 >/proc/sys/kernel/sysrq
# Transparent huge pages for shared memory where a program asks for them (madvise), as on a host set up for VMs:
# our VMM's guest RAM is a memfd and asks; Debian's default, never, gives QEMU's anonymous RAM huge pages and ours
# none (docs/guest.md, "Boot time against QEMU microvm"). A command may write another value there (it runs as root).
echo advise >/sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null || true
mount_filesystems
stage_guest_images
# Loopback only (no network leaves the lab): servers the tests start on 127.0.0.1 must be reachable.
ip link set lo up || fail network "cannot bring up the loopback interface"
# A NIC exists only when the host forwards ports to the lab (--forward); QEMU forwards them to 10.0.2.15.
if [ -e /sys/class/net/eth0 ]; then
  ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 || fail network "cannot configure eth0 for --forward"
fi
OUT=$(find_port smol.stdout)
ERR=$(find_port smol.stderr)
exec 3>"$OUT" 4>"$ERR"
say START "running the command"
env -i /bin/chroot /mnt /bin/sh /tmp/.smol-lab/command.sh </dev/null >&3 2>&4 3>&- 4>&-
status=$?
sync
printf 'SMOL-LAB-END-%s\n' "$NONCE" >&4
printf 'SMOL-LAB-EXIT-%s=%s\n' "$NONCE" "$status" >&3
say DONE "$status"
sleep 60 # the host stops QEMU as soon as both end markers arrived; this is only a fallback
poweroff -f
