/*
 * The vmhost's jail (docs/security.md, "The vmhost's jail"). Order matters: limits, then capabilities (the bounding
 * set needs CAP_SETPCAP to shrink, so it goes before the effective set), then no_new_privs and the seccomp filter,
 * which libseccomp loads on every thread of the process at once (TSYNC): the vmhost is a Node process, and its
 * libuv pool, V8 workers and the JS thread run device set-up, snapshot I/O and the agent's sockets, so a filter on
 * the VMM's threads alone would leave the threads that hold the most open. vCPU threads stack a shorter list on top.
 *
 * A call outside the list traps (SECCOMP_RET_TRAP): the SIGSYS handler writes "seccomp: <name>\n" to the report fd
 * and the process dies by SIGSYS, which the engine sees with the name. The call itself is never executed. Should
 * anything block or ignore SIGSYS, the kernel forces the default action, which also kills the process.
 */
#define _GNU_SOURCE
#include "jail.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/kvm.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <termios.h>
#include <ucontext.h>
#include <unistd.h>

#define MAX_NR 512
#define MAX_BINDS 64
/* Where the new root is put together: any directory does (its host contents are hidden only in this namespace). */
#define NEW_ROOT "/tmp"

/*
 * The whole process's allow-list, grouped by who needs it. Measured with `strace -f -c` over the VMM tests and the
 * engine tests (docs/security.md lists the groups and why); nothing here creates processes, mounts, loads modules,
 * traces, changes credentials or reboots.
 */
static const char *const process_list[] = {
	/* memory: glibc's malloc, V8's heap and code space, guest RAM (memfd + mmap), snapshot pages */
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "memfd_create", "msync",
	"membarrier", "pkey_alloc", "pkey_free", "pkey_mprotect",
	/* threads and their waits: libuv's pool, V8's workers, the VMM's vCPU, event and backend threads */
	"clone", "clone3", "futex", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "exit",
	"exit_group", "sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler", "nanosleep",
	"clock_nanosleep", "gettid", "getpid", "getppid", "tgkill", "tkill", "kill",
	/* signals: Node's handlers, the vCPU kick (SIGUSR2), the debug dump, this file's SIGSYS handler */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "rt_sigtimedwait", "rt_sigqueueinfo",
	/* a sleep or wait a stop (SIGSTOP/SIGCONT, a debugger attaching) interrupted goes on through it */
	"restart_syscall",
	/* time */
	"clock_gettime", "clock_getres", "gettimeofday", "time", "timerfd_create", "timerfd_settime",
	"timerfd_gettime",
	/* files: kernels, initrds, disk layers and snapshot directories (read, written, created, renamed, removed) */
	"open", "openat", "close", "close_range", "read", "write", "pread64", "pwrite64", "readv", "writev",
	"preadv", "pwritev", "preadv2", "pwritev2", "lseek", "fstat", "stat", "lstat", "newfstatat", "statx",
	"statfs", "fstatfs", "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents64", "getcwd",
	"chdir", "fcntl", "flock", "fsync", "fdatasync", "sync_file_range", "ftruncate", "fallocate", "truncate",
	"rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir", "chmod", "fchmod",
	"fchmodat", "utimensat", "copy_file_range", "sendfile", "umask", "dup", "dup2", "dup3", "pipe",
	"pipe2", "fadvise64", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
	/* event loops: libuv's epoll, the VMM's event thread, eventfds between threads */
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll",
	"select", "pselect6", "eventfd", "eventfd2",
	/* sockets: the engine's IPC channel, vsock's Unix sockets, the network's host side (libslirp) */
	"socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "getsockname", "getpeername",
	"getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown",
	/* process facts Node and glibc read */
	"getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid", "getresgid", "getpgrp", "getpgid",
	"getsid", "uname", "sysinfo", "getrlimit", "prlimit64", "getrusage", "getrandom", "getpriority", "arch_prctl",
	"prctl", "capget",
	/* each vCPU thread stacks its own filter (a filter can only take more away) */
	"seccomp",
	NULL,
};

/*
 * What a vCPU thread gives up on top of the process's list: it runs KVM_RUN and the devices' MMIO and port I/O.
 * Not open/openat: glibc's malloc opens /sys/devices/system/cpu/online when it makes a new arena, which any thread
 * may do once many contend (a burst of 256 forks killed its vmhost with "seccomp: openat" on a vCPU thread).
 */
static const char *const vcpu_denied[] = {
	"clone", "clone3", "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir", "chmod",
	"fchmod", "fchmodat", "truncate", "memfd_create", "inotify_init1", "inotify_add_watch", "chdir", "kill",
	NULL,
};

/*
 * ioctl(2) only with these requests (docs/security.md, "ioctl requests"); everything else traps like a call outside
 * the list. Compared on the request's low 32 bits, as the kernel reads it (its type is unsigned int in each driver).
 */
static const unsigned long ioctl_list[] = {
	/* /dev/kvm: the API's version, capabilities, CPUID, MSRs, and making a VM (vm.c, cpu.c, kvm_probe.c) */
	KVM_GET_API_VERSION, KVM_CHECK_EXTENSION, KVM_CREATE_VM, KVM_GET_VCPU_MMAP_SIZE, KVM_GET_SUPPORTED_CPUID,
	KVM_GET_MSR_INDEX_LIST,
	/* the VM: its memory, interrupt controller, PIT, TSS, clock, eventfds, dirty log (vm.c, snapshots, devices) */
	KVM_CREATE_VCPU, KVM_SET_USER_MEMORY_REGION, KVM_CREATE_IRQCHIP, KVM_CREATE_PIT2, KVM_SET_TSS_ADDR,
	KVM_SET_IDENTITY_MAP_ADDR, KVM_IRQ_LINE, KVM_IRQFD, KVM_IOEVENTFD, KVM_GET_IRQCHIP, KVM_SET_IRQCHIP,
	KVM_GET_PIT2, KVM_SET_PIT2, KVM_GET_CLOCK, KVM_SET_CLOCK, KVM_GET_DIRTY_LOG,
	/* a vCPU: running it, and its state as boot sets it and a checkpoint saves and a restore loads it */
	KVM_RUN, KVM_GET_REGS, KVM_SET_REGS, KVM_GET_SREGS, KVM_SET_SREGS, KVM_SET_FPU, KVM_GET_MSRS,
	KVM_SET_MSRS, KVM_GET_CPUID2, KVM_SET_CPUID2, KVM_GET_LAPIC, KVM_SET_LAPIC, KVM_GET_MP_STATE, KVM_SET_MP_STATE,
	KVM_GET_VCPU_EVENTS, KVM_SET_VCPU_EVENTS, KVM_GET_XSAVE, KVM_GET_XSAVE2, KVM_SET_XSAVE, KVM_GET_XCRS,
	KVM_SET_XCRS, KVM_GET_DEBUGREGS, KVM_SET_DEBUGREGS, KVM_GET_TSC_KHZ, KVM_SET_TSC_KHZ, KVM_KVMCLOCK_CTRL,
	/* libuv: non-blocking and close-on-exec fds (uv__nonblock, uv__cloexec); libslirp: a UDP datagram's size */
	FIONBIO, FIOCLEX, FIONCLEX, FIONREAD,
	/* stdio that is a terminal (an engine run in the foreground): glibc's isatty, libuv's uv_tty_init */
	TCGETS, TIOCGWINSZ, TIOCGPTN,
};

/* What a vCPU thread may not ask on top of that: making VMs, vCPUs, their chips and memory map (set-up, not MMIO). */
static const unsigned long vcpu_ioctl_denied[] = {
	KVM_CREATE_VM, KVM_CREATE_VCPU, KVM_CREATE_IRQCHIP, KVM_CREATE_PIT2, KVM_SET_TSS_ADDR, KVM_SET_IDENTITY_MAP_ADDR,
	TIOCGPTN,
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const char *syscall_names[MAX_NR];
static int report_fd = 2;
static int active;

/* Appends s to buf (of size len, holding *at bytes), cut to fit. */
static void append(char *buf, size_t len, size_t *at, const char *s)
{
	while (*s && *at + 1 < len)
		buf[(*at)++] = *s++;
}

/* s gets v in hex ("0x..."); s must hold 19 bytes. */
static void hex(char *s, unsigned long v)
{
	char tmp[16];
	int n = 0;

	do
		tmp[n++] = "0123456789abcdef"[v & 15];
	while ((v >>= 4) && n < 16);
	*s++ = '0';
	*s++ = 'x';
	while (n)
		*s++ = tmp[--n];
	*s = 0;
}

/* Async-signal-safe: write(2), seccomp(2), sigaction(2), sigprocmask(2) and tgkill(2), all in both lists. */
static void on_sigsys(int sig, siginfo_t *info, void *uctx)
{
	char num[24], request[24] = "";
	int nr = info->si_syscall;
	const char *name = nr >= 0 && nr < MAX_NR ? syscall_names[nr] : NULL;
	struct sigaction dfl;
	sigset_t set;

#if defined(__x86_64__)
	/* An ioctl is named with its request, the second argument (rsi), which is what the list is keyed on. */
	if (nr == __NR_ioctl && uctx)
		hex(request, (unsigned long)((ucontext_t *)uctx)->uc_mcontext.gregs[REG_RSI] & 0xffffffffUL);
#else
	(void)uctx;
#endif
	if (!name) {
		int i = (int)sizeof(num) - 1;
		unsigned v = (unsigned)nr;

		num[i] = 0;
		do
			num[--i] = (char)('0' + v % 10);
		while ((v /= 10) && i > 0);
		name = num + i;
	}
	{
		/* One write: a pipe takes up to PIPE_BUF bytes at once, so the reader never sees half a line. */
		char line[96];
		size_t at = 0;

		append(line, sizeof(line), &at, "seccomp: ");
		append(line, sizeof(line), &at, name);
		if (request[0]) {
			append(line, sizeof(line), &at, " ");
			append(line, sizeof(line), &at, request);
		}
		line[at++] = '\n';
		ssize_t w = write(report_fd, line, at);

		(void)w;	/* nowhere left to say it otherwise: the process dies all the same */
	}
	{
		/*
		 * Die of SIGSYS: a filter whose every answer is KILL_PROCESS, then any call. A signal would not do in a
		 * PID namespace of its own: its first process ignores a signal it sends itself with no handler.
		 */
		struct sock_filter kill_all = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
		struct sock_fprog prog = { .len = 1, .filter = &kill_all };

		syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
		syscall(SYS_getpid);
	}
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(SIGSYS, &dfl, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGSYS);
	_exit(128 + SIGSYS);	/* not reached */
}

static int add_rules(scmp_filter_ctx ctx, const char *const *names, uint32_t action, struct vm_error *err)
{
	for (int i = 0; names[i]; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);
		int r;

		if (nr == __NR_SCMP_ERROR)
			continue;	/* not a call on this architecture (open on arm64) */
		r = seccomp_rule_add(ctx, action, nr, 0);
		if (r < 0 && r != -EEXIST)
			return vm_error_set(err, -r, "seccomp: cannot add %s to the filter: %s", names[i], strerror(-r));
	}
	return 0;
}

/* ioctl(2) with each of the requests, on the low 32 bits of its second argument. */
static int add_ioctls(scmp_filter_ctx ctx, const unsigned long *reqs, size_t n, uint32_t action,
		      struct vm_error *err)
{
	for (size_t i = 0; i < n; i++) {
		int r = seccomp_rule_add(ctx, action, SCMP_SYS(ioctl), 1,
					 SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, reqs[i] & 0xffffffffUL));

		if (r < 0 && r != -EEXIST)
			return vm_error_set(err, -r, "seccomp: cannot add ioctl 0x%lx to the filter: %s", reqs[i],
					    strerror(-r));
	}
	return 0;
}

static int drop_capabilities(struct vm_error *err)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL && errno != EPERM)
			return vm_error_set(err, errno, "jail: cannot drop capability %d from the bounding set: %s", cap,
					    strerror(errno));
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return vm_error_set(err, errno, "jail: cannot drop capabilities: %s", strerror(errno));
	return 0;
}

static unsigned long long effective_caps(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data) < 0)
		return ~0ULL;
	return (unsigned long long)data[1].effective << 32 | data[0].effective;
}

/* mkdir -p of path's parents (each 0755); the last component is left to the caller. */
static int make_parents(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	return 0;
}

/* The flags a mount already has that a bind remount in a user namespace must keep (the kernel locks them). */
static unsigned long locked_flags(const char *path)
{
	struct statvfs v;
	unsigned long f = 0;

	if (statvfs(path, &v) < 0)
		return 0;
	if (v.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (v.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (v.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (v.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (v.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (v.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	if (v.f_flag & ST_RDONLY)
		f |= MS_RDONLY;
	return f;
}

/*
 * The mount table of a jail (docs/security.md): a tmpfs root with each bind at its host path, a /proc of the PID
 * namespace, then pivot_root into it and the old root detached, and the root itself remounted read-only. Each source
 * is opened (O_PATH) before anything is mounted over, and bound from /proc/self/fd, so the place the root is put
 * together (NEW_ROOT) may hide any of them.
 */
static int enter_root(const struct jail_options *o, struct jail_status *st, struct vm_error *err)
{
	int fds[MAX_BINDS], isdir[MAX_BINDS], present = 0, r = 0;
	char ns[64], target[PATH_MAX], source[64];
	ssize_t n;

	if (o->nbinds > MAX_BINDS)
		return vm_error_set(err, E2BIG, "jail: %d paths to show, at most %d", o->nbinds, MAX_BINDS);
	for (int i = 0; i < o->nbinds; i++)
		fds[i] = -1;
	if (getpid() != 1)
		return vm_error_set(err, EPERM, "jail: not the first process of a PID namespace of its own (pid %d)",
				    (int)getpid());
	n = readlink("/proc/self/ns/mnt", ns, sizeof(ns) - 1);
	if (n <= 0)
		return vm_error_set(err, errno, "jail: cannot read /proc/self/ns/mnt: %s", strerror(errno));
	ns[n] = 0;
	if (!o->host_mnt_ns || !strcmp(ns, o->host_mnt_ns))
		return vm_error_set(err, EPERM, "jail: not in a mount namespace of its own (%s is the engine's)", ns);
	/* Nothing done here may reach the host's mounts. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return vm_error_set(err, errno, "jail: cannot make the mounts private: %s", strerror(errno));
	for (int i = 0; i < o->nbinds; i++) {
		struct stat sb;
		const char *p = o->binds[i].path;

		if (!p || p[0] != '/' || strlen(p) + sizeof(NEW_ROOT) >= sizeof(target)) {
			r = vm_error_set(err, EINVAL, "jail: %s is not an absolute path that fits", p ? p : "(null)");
			goto out;
		}
		fds[i] = open(p, O_PATH | O_CLOEXEC);
		if (fds[i] < 0) {
			if (errno == ENOENT)
				continue;	/* not there (yet): an open of it fails in the jail as it would outside */
			r = vm_error_set(err, errno, "jail: cannot open %s: %s", p, strerror(errno));
			goto out;
		}
		if (fstat(fds[i], &sb) < 0) {
			r = vm_error_set(err, errno, "jail: cannot stat %s: %s", p, strerror(errno));
			goto out;
		}
		isdir[i] = S_ISDIR(sb.st_mode);
	}
	if (mount("smol-jail", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m") < 0) {
		r = vm_error_set(err, errno, "jail: cannot mount the root's tmpfs on %s: %s", NEW_ROOT, strerror(errno));
		goto out;
	}
	for (int i = 0; i < o->nbinds; i++) {
		const struct jail_bind *b = &o->binds[i];
		unsigned long flags;

		if (fds[i] < 0)
			continue;
		snprintf(target, sizeof(target), NEW_ROOT "%s", b->path);
		snprintf(source, sizeof(source), "/proc/self/fd/%d", fds[i]);
		r = make_parents(target);
		if (r == 0 && isdir[i] && mkdir(target, 0755) < 0 && errno != EEXIST)
			r = -errno;
		if (r == 0 && !isdir[i]) {
			int f = open(target, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);

			if (f < 0)
				r = -errno;
			else
				close(f);
		}
		if (r < 0) {
			r = vm_error_set(err, -r, "jail: cannot make %s in the root: %s", b->path, strerror(-r));
			goto out;
		}
		if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) < 0) {
			r = vm_error_set(err, errno, "jail: cannot show %s: %s", b->path, strerror(errno));
			goto out;
		}
		flags = locked_flags(target) | MS_NOSUID | (b->device ? 0 : MS_NODEV | MS_NOEXEC);
		if (!b->write)
			flags |= MS_RDONLY;	/* (a read-only source stays so: the kernel keeps that flag locked) */
		if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL) < 0) {
			r = vm_error_set(err, errno, "jail: cannot remount %s %s: %s", b->path,
					 b->write ? "nosuid" : "read-only", strerror(errno));
			goto out;
		}
		present++;
	}
	snprintf(target, sizeof(target), NEW_ROOT "/proc");
	if (mkdir(target, 0555) < 0 && errno != EEXIST) {
		r = vm_error_set(err, errno, "jail: cannot make /proc in the root: %s", strerror(errno));
		goto out;
	}
	/* Its own PID namespace's: the vmhost alone (NSpid), its fds and memory maps, none of the host's processes. */
	if (mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		r = vm_error_set(err, errno, "jail: cannot mount /proc: %s", strerror(errno));
		goto out;
	}
	if (chdir(NEW_ROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0) {
		r = vm_error_set(err, errno, "jail: cannot pivot_root into %s: %s", NEW_ROOT, strerror(errno));
		goto out;
	}
	/* The old root is stacked under the new one at "/": detaching it leaves nothing of the host's tree. */
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0) {
		r = vm_error_set(err, errno, "jail: cannot detach the host's root: %s", strerror(errno));
		goto out;
	}
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		r = vm_error_set(err, errno, "jail: cannot make the root read-only: %s", strerror(errno));
		goto out;
	}
	if (st) {
		st->mounts = 1;
		st->binds = present;
	}
out:
	for (int i = 0; i < o->nbinds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return r;
}

int jail_active(void)
{
	return __atomic_load_n(&active, __ATOMIC_ACQUIRE);
}

int jail_lockdown(const struct jail_options *o, struct jail_status *st, struct vm_error *err)
{
	struct rlimit core = { 0, 0 };
	unsigned nofile = o && o->nofile ? o->nofile : 4096;
	struct rlimit files = { nofile, nofile };
	struct sigaction sa;
	scmp_filter_ctx ctx;
	int r;

	if (jail_active())
		return vm_error_set(err, EBUSY, "jail: this process is jailed already");
	if (o && o->report_fd >= 0)
		report_fd = o->report_fd;
	/* The mounts first: they need CAP_SYS_ADMIN, which the drop below takes away. */
	if (o && o->nbinds > 0 && (r = enter_root(o, st, err)) < 0)
		return r;
	if (setrlimit(RLIMIT_CORE, &core) < 0)
		return vm_error_set(err, errno, "jail: cannot turn core dumps off: %s", strerror(errno));
	if (setrlimit(RLIMIT_NOFILE, &files) < 0)
		return vm_error_set(err, errno, "jail: cannot limit open files to %u: %s", nofile, strerror(errno));
	r = drop_capabilities(err);
	if (r < 0)
		return r;
	for (int nr = 0; nr < MAX_NR; nr++)
		syscall_names[nr] = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) < 0)
		return vm_error_set(err, errno, "jail: cannot install the SIGSYS handler: %s", strerror(errno));

	ctx = seccomp_init(SCMP_ACT_TRAP);
	if (!ctx)
		return vm_error_set(err, ENOMEM, "seccomp: cannot make a filter");
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (r < 0) {
		seccomp_release(ctx);
		return vm_error_set(err, -r, "seccomp: cannot set the filter's attributes: %s", strerror(-r));
	}
	r = add_rules(ctx, process_list, SCMP_ACT_ALLOW, err);
	if (r == 0)
		r = add_ioctls(ctx, ioctl_list, NELEM(ioctl_list), SCMP_ACT_ALLOW, err);
	/* KVM_RUN goes through the filter on every exit: ioctl's branch first. */
	if (r == 0)
		seccomp_syscall_priority(ctx, SCMP_SYS(ioctl), 255);
	if (r == 0 && (r = seccomp_load(ctx)) < 0)
		vm_error_set(err, -r, "seccomp: cannot load the filter: %s", strerror(-r));
	seccomp_release(ctx);
	if (r < 0)
		return r;
	__atomic_store_n(&active, 1, __ATOMIC_RELEASE);
	if (st) {
		st->seccomp = 1;
		st->no_new_privs = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
		st->cap_eff = effective_caps();
		st->nofile = nofile;
	}
	return 0;
}

int jail_vcpu_thread(void)
{
	scmp_filter_ctx ctx;
	int r;

	if (!jail_active())
		return 0;
	/* The process's filter stays in force; this one only takes more away, so what it allows by default is fine. */
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
	if (r == 0)
		r = add_rules(ctx, vcpu_denied, SCMP_ACT_TRAP, NULL);
	if (r == 0)
		r = add_ioctls(ctx, vcpu_ioctl_denied, NELEM(vcpu_ioctl_denied), SCMP_ACT_TRAP, NULL);
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r;
}

void jail_test_forbidden(int ioctl_request)
{
	char c = 0;

	/* TIOCSTI (a terminal's input faked, the classic escape) on no fd: EBADF if it ever ran. */
	if (ioctl_request)
		ioctl(-1, TIOCSTI, &c);
	else
		syscall(SYS_personality, 0xffffffffUL);	/* only queries the persona: harmless if it ever ran */
}
