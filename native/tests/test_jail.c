/*
 * The vmhost's jail (docs/security.md), in a child process of its own: it keeps what the VMM needs (files, memory,
 * threads, eventfds, /proc), shows Seccomp 2, NoNewPrivs 1 and no capabilities, and a call no list has is reported
 * by name on the report fd before the process dies by SIGSYS.
 */
#define _GNU_SOURCE
#include "jail.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <linux/kvm.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int status_field(const char *field, char *out, size_t len)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	size_t n = strlen(field);
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			char *v = line + n + 1;

			while (*v == ' ' || *v == '\t')
				v++;
			v[strcspn(v, "\n")] = 0;
			snprintf(out, len, "%s", v);
			found = 1;
		}
	fclose(f);
	return found;
}

static void *thread_fn(void *arg)
{
	return arg;
}

/* The child's work after the lockdown; its exit status is the first check that failed (0: all held). */
static int jailed_work(void)
{
	char v[64], path[TEST_PATH_MAX];
	struct jail_status st;
	struct vm_error err = { 0 };
	pthread_t t;
	void *p;
	int fd;

	if (test_tmpfile(path, "kernel", 6) < 0)
		return 1;
	if (jail_lockdown(NULL, &st, &err) < 0)
		return 2;
	if (!st.seccomp || !st.no_new_privs || st.cap_eff != 0)
		return 3;
	if (!status_field("Seccomp", v, sizeof(v)) || strcmp(v, "2"))
		return 4;
	if (!status_field("NoNewPrivs", v, sizeof(v)) || strcmp(v, "1"))
		return 5;
	if (!status_field("CapEff", v, sizeof(v)) || strcmp(v, "0000000000000000"))
		return 6;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, v, 6) != 6 || close(fd) < 0)
		return 7;
	p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || munmap(p, 1 << 20) < 0)
		return 8;
	fd = eventfd(0, EFD_CLOEXEC);
	if (fd < 0 || close(fd) < 0)
		return 9;
	if (pthread_create(&t, NULL, thread_fn, NULL) || pthread_join(t, NULL))
		return 10;
	if (jail_lockdown(NULL, &st, &err) != -EBUSY)
		return 11;
	return 0;
}

TEST(jail_keeps_what_the_vmm_needs)
{
	pid_t pid = fork();
	int status;

	REQUIRE(pid >= 0);
	if (pid == 0)
		_exit(jailed_work());
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ_INT(WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), 0);
}

/* What a jailed child that makes the test hook's forbidden call (or ioctl) reports, and that it died by SIGSYS. */
static void forbidden_reports(int ioctl_request, const char *expected)
{
	int fds[2], status;
	char report[128] = { 0 };
	ssize_t n;
	pid_t pid;

	REQUIRE(pipe(fds) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct jail_options o = { .report_fd = fds[1], .nofile = 256 };
		struct vm_error err = { 0 };

		close(fds[0]);
		if (jail_lockdown(&o, NULL, &err) < 0)
			_exit(2);
		jail_test_forbidden(ioctl_request);
		_exit(0);	/* the call ran: the filter failed */
	}
	close(fds[1]);
	n = 0;
	for (ssize_t r; (r = read(fds[0], report + n, sizeof(report) - 1 - (size_t)n)) > 0;)
		n += r;
	close(fds[0]);
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status));
	CHECK_EQ_INT(WIFSIGNALED(status) ? WTERMSIG(status) : -1, SIGSYS);
	CHECK(n > 0);
	CHECK(!strcmp(report, expected));
}

TEST(jail_forbidden_call_is_named_and_kills)
{
	forbidden_reports(0, "seccomp: personality\n");
}

/* TIOCSTI is 0x5412: the report names the request, which is what the list is keyed on. */
TEST(jail_forbidden_ioctl_is_named_with_its_request)
{
	forbidden_reports(1, "seccomp: ioctl 0x5412\n");
}

/* The requests the VMM and libuv make still work: FIONBIO and FIONREAD on a pipe, the KVM API's version. */
TEST(jail_keeps_the_ioctls_in_its_list)
{
	pid_t pid = fork();
	int status;

	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct vm_error err = { 0 };
		int fds[2], on = 1, n = -1, kvm;

		if (pipe(fds) < 0 || jail_lockdown(NULL, NULL, &err) < 0)
			_exit(2);
		if (ioctl(fds[0], FIONBIO, &on) < 0 || ioctl(fds[0], FIONREAD, &n) < 0 || n != 0)
			_exit(3);
		kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
		if (kvm >= 0 && ioctl(kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
			_exit(4);
		_exit(0);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK_EQ_INT(WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), 0);
}

/*
 * The jail's root: the first process of a new PID namespace, in a mount namespace of its own, sees the paths it was
 * given and nothing else (not the test's own file beside them, not /etc/passwd), and a /proc where it is pid 1.
 * Its exit status is the first check that failed. Needs root (or user namespaces); without either, it is skipped.
 */
static int rooted_work(const char *shown, const char *hidden, const char *host_ns)
{
	struct jail_bind binds[] = { { shown, 0, 0 }, { "/dev/null", 1, 1 }, { "/nonexistent/smol", 0, 0 } };
	struct jail_options o = { .report_fd = -1, .binds = binds, .nbinds = 3, .host_mnt_ns = host_ns };
	struct jail_status st = { 0 };
	struct vm_error err = { 0 };
	char v[64];
	int fd;

	if (jail_lockdown(&o, &st, &err) < 0) {
		fprintf(stderr, "rooted_work: %s\n", err.msg);
		return 2;
	}
	if (!st.mounts || st.binds != 2)
		return 3;
	fd = open(shown, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, v, 6) != 6 || close(fd) < 0)
		return 4;
	if (open(shown, O_WRONLY | O_CLOEXEC) >= 0 || errno != EROFS)
		return 5;	/* read-only */
	if (open(hidden, O_RDONLY | O_CLOEXEC) >= 0 || errno != ENOENT)
		return 6;
	if (open("/etc/passwd", O_RDONLY | O_CLOEXEC) >= 0 || errno != ENOENT)
		return 7;
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "x", 1) != 1 || close(fd) < 0)
		return 8;
	if (!status_field("NSpid", v, sizeof(v)) || strcmp(strrchr(v, '\t') ? strrchr(v, '\t') + 1 : v, "1"))
		return 9;
	if (mkdir("/made-here", 0755) == 0 || errno != EROFS)
		return 10;	/* the root itself is read-only */
	return 0;
}

TEST(jail_root_shows_only_its_binds)
{
	char shown[TEST_PATH_MAX], hidden[TEST_PATH_MAX], ns[64];
	ssize_t n = readlink("/proc/self/ns/mnt", ns, sizeof(ns) - 1);
	int status;
	pid_t pid;

	REQUIRE(n > 0);
	ns[n] = 0;
	REQUIRE(test_tmpfile(shown, "kernel", 6) == 0);
	REQUIRE(test_tmpfile(hidden, "secret", 6) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		pid_t inner;

		if (unshare(CLONE_NEWNS | CLONE_NEWPID) < 0 &&
		    unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) < 0)
			_exit(77);	/* neither root nor user namespaces: nothing to test here */
		inner = fork();
		if (inner == 0)
			_exit(rooted_work(shown, hidden, ns));
		if (inner < 0 || waitpid(inner, &status, 0) != inner)
			_exit(1);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	REQUIRE(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		return;
	CHECK_EQ_INT(WEXITSTATUS(status), 0);
	unlink(shown);
	unlink(hidden);
}

TEST(jail_root_refuses_the_engines_namespaces)
{
	char ns[64];
	ssize_t n = readlink("/proc/self/ns/mnt", ns, sizeof(ns) - 1);
	struct jail_bind binds[] = { { "/dev/null", 1, 1 } };
	int status;
	pid_t pid;

	REQUIRE(n > 0);
	ns[n] = 0;
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		/* Not pid 1, and the host's mount namespace: nothing is mounted, the lockdown fails. */
		struct jail_options o = { .report_fd = -1, .binds = binds, .nbinds = 1, .host_mnt_ns = ns };
		struct vm_error err = { 0 };

		_exit(jail_lockdown(&o, NULL, &err) == -EPERM && strstr(err.msg, "PID namespace") ? 0 : 1);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ_INT(WEXITSTATUS(status), 0);
}
