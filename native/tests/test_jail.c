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
#include <sys/eventfd.h>
#include <sys/mman.h>
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

TEST(jail_forbidden_call_is_named_and_kills)
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
		jail_test_forbidden();
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
	CHECK(!strcmp(report, "seccomp: personality\n"));
}
