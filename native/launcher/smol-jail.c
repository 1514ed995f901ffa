/*
 * smol-jail: the launcher a jailed vmhost starts through (docs/security.md, "The launcher"). It takes the place of
 * util-linux's unshare(1), which ends with exit code 1 when its child dies by a signal, so that a SIGKILLed vmhost
 * read as "exit code 1". Usage:
 *
 *   smol-jail [--user] [--net] -- PROGRAM [ARG...]
 *
 * It makes new mount and PID namespaces (and a user namespace mapping this uid and gid to root inside, with --user;
 * an empty network namespace, only `lo` and that down, with --net), forks PROGRAM as the first process of the PID
 * namespace, waits for it and ends as it ended: with its exit code, or by the same signal. Nothing outlives the
 * engine: the launcher dies with the thread that started it (PR_SET_PDEATHSIG), the program with the launcher, and
 * the rest of the PID namespace with the program. Every fd it was given (the engine's IPC channel, the jail's
 * report pipe) goes to PROGRAM as it is; the environment too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Exit codes of the launcher's own failures: 125 as env(1) and unshare(1) use, 126/127 when PROGRAM cannot run. */
#define EXIT_LAUNCHER 125

static void fail(const char *what)
{
	fprintf(stderr, "smol-jail: %s: %s\n", what, strerror(errno));
	exit(EXIT_LAUNCHER);
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t len = strlen(text);

	if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
		fprintf(stderr, "smol-jail: cannot write %s: %s\n", path, strerror(errno));
		exit(EXIT_LAUNCHER);
	}
	close(fd);
}

/* This uid and gid become root inside the new user namespace, as unshare --map-root-user does. */
static void map_root(uid_t uid, gid_t gid)
{
	char line[64];

	write_file("/proc/self/setgroups", "deny");	/* an unprivileged gid_map needs setgroups off */
	snprintf(line, sizeof(line), "0 %u 1", (unsigned)uid);
	write_file("/proc/self/uid_map", line);
	snprintf(line, sizeof(line), "0 %u 1", (unsigned)gid);
	write_file("/proc/self/gid_map", line);
}

int main(int argc, char **argv)
{
	int flags = CLONE_NEWNS | CLONE_NEWPID, user = 0, i, status, alive[2];
	uid_t uid = getuid();
	gid_t gid = getgid();
	pid_t parent = getppid(), child;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--user"))
			user = 1;
		else if (!strcmp(argv[i], "--net"))
			flags |= CLONE_NEWNET;
		else {
			fprintf(stderr, "smol-jail: unknown option %s (usage: smol-jail [--user] [--net] -- PROGRAM ...)\n",
				argv[i]);
			return EXIT_LAUNCHER;
		}
	}
	if (i + 1 >= argc) {
		fprintf(stderr, "smol-jail: no program (usage: smol-jail [--user] [--net] -- PROGRAM ...)\n");
		return EXIT_LAUNCHER;
	}
	/* Dies with its starter; the check after closes the race with a starter that died before the prctl. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		fail("PR_SET_PDEATHSIG");
	if (getppid() != parent)
		return EXIT_LAUNCHER;
	if (unshare(flags | (user ? CLONE_NEWUSER : 0)) < 0)
		fail("unshare");
	if (user)
		map_root(uid, gid);
	/* The program's side of this pipe sees POLLHUP once the launcher is gone (the pipe's only writer). */
	if (pipe2(alive, O_CLOEXEC) < 0)
		fail("pipe");
	child = fork();
	if (child < 0)
		fail("fork");
	if (child == 0) {
		struct pollfd p = { .fd = alive[0], .events = POLLIN };

		close(alive[1]);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
			fail("PR_SET_PDEATHSIG");
		if (poll(&p, 1, 0) > 0 && (p.revents & POLLHUP))
			_exit(EXIT_LAUNCHER);	/* the launcher died before the prctl: nobody would reap or kill this */
		/* Nothing this namespace mounts reaches the host's (jail.c does the same again before its root). */
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			fail("making the mounts private");
		execv(argv[i + 1], argv + i + 1);
		fprintf(stderr, "smol-jail: cannot run %s: %s\n", argv[i + 1], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(alive[0]);
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			fail("waitpid");
	if (WIFSIGNALED(status)) {
		/* The same signal, default action, no core of the launcher's own. */
		int sig = WTERMSIG(status);
		struct rlimit none = { 0, 0 };
		sigset_t set;

		setrlimit(RLIMIT_CORE, &none);
		signal(sig, SIG_DFL);
		sigemptyset(&set);
		sigaddset(&set, sig);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		raise(sig);
		return 128 + sig;	/* a signal whose default is not to end a process: never a child's end */
	}
	return WEXITSTATUS(status);
}
