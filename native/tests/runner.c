/*
 * Runs every registered test (or those whose name or file name contains argv[1]) and prints `ok - name` /
 * `not ok - name` per test, in order, then one final line `N passed, N failed`. Exit status 1 if any failed.
 * Each test runs in its own child process, TEST_JOBS (default 8) at a time, its output held back until it is
 * reported. TEST_NO_FORK=1 runs them one by one in this process instead (for a debugger); a crash ends the run.
 */
#define _GNU_SOURCE
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct test_case *tests, **tests_tail = &tests;
static int current_failed;
static char tmpdir[TEST_PATH_MAX];

/*
 * Sanitizer findings (ASan, UBSan, leaks) fail the test that caused them with exit status 2; UBSan stops at the
 * first report instead of carrying on.
 */
const char *__asan_default_options(void)
{
	return "exitcode=2";
}

const char *__ubsan_default_options(void)
{
	return "halt_on_error=1:print_stacktrace=1:exitcode=2";
}

void test_register(struct test_case *tc)
{
	tc->next = NULL;
	*tests_tail = tc;
	tests_tail = &tc->next;
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	current_failed = 1;
	printf("# %s:%d: ", file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

int test_str_contains(const char *haystack, const char *needle)
{
	return haystack && needle && strstr(haystack, needle);
}

const char *test_tmpdir(void)
{
	return tmpdir;
}

static int tmpdir_create(void)
{
	const char *dir = getenv("TMPDIR");

	if (snprintf(tmpdir, sizeof(tmpdir), "%s/smol-tests-XXXXXX", dir && *dir ? dir : "/tmp") >= (int)sizeof(tmpdir))
		return -ENAMETOOLONG;
	return mkdtemp(tmpdir) ? 0 : -errno;
}

/* Removes the run's directory and what tests left in it (files, and empty directories of their own). */
static void tmpdir_remove(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char path[TEST_PATH_MAX * 2];

		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
			if (unlink(path) < 0)
				rmdir(path);
		}
	}
	if (d)
		closedir(d);
	rmdir(tmpdir);
}

int test_tmpfile(char path[static TEST_PATH_MAX], const void *data, size_t len)
{
	const char *p = data;
	int fd;

	if (snprintf(path, TEST_PATH_MAX, "%s/file-XXXXXX", tmpdir) >= TEST_PATH_MAX)
		return -ENAMETOOLONG;
	fd = mkstemp(path);
	if (fd < 0)
		return -errno;
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			unlink(path);
			return -e;
		}
		p += n;
		len -= (size_t)n;
	}
	close(fd);
	return 0;
}

static int run_in_process(struct test_case *tc)
{
	current_failed = 0;
	tc->fn();
	return !current_failed;
}

struct job {
	struct test_case *tc;
	pid_t pid;
	FILE *out;		/* the child's stdout and stderr, printed once it has ended */
	int status, done;
};

static int job_start(struct job *j)
{
	fflush(stdout);
	fflush(stderr);
	j->out = tmpfile();
	if (!j->out)
		return -errno;
	j->pid = fork();
	if (j->pid < 0)
		return -errno;
	if (j->pid == 0) {
		dup2(fileno(j->out), STDOUT_FILENO);
		dup2(fileno(j->out), STDERR_FILENO);
		alarm(TEST_TIMEOUT_S);
		/* exit(), not _exit(): LeakSanitizer checks this test's allocations on the way out. */
		exit(run_in_process(j->tc) ? 0 : 1);
	}
	return 0;
}

/* Prints what the test wrote and how it ended; returns 1 when it passed. */
static int job_report(struct job *j)
{
	char buf[4096];
	size_t n;
	int st = j->status;

	if (j->out) {
		rewind(j->out);
		while ((n = fread(buf, 1, sizeof(buf), j->out)) > 0)
			fwrite(buf, 1, n, stdout);
		fclose(j->out);
	}
	if (WIFSIGNALED(st))
		printf("# killed by signal %d (%s)%s\n", WTERMSIG(st), strsignal(WTERMSIG(st)),
		       WTERMSIG(st) == SIGALRM ? ", timed out" : "");
	else if (WEXITSTATUS(st) > 1)
		printf("# exited with status %d (see the sanitizer report above)\n", WEXITSTATUS(st));
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Runs the jobs, up to `parallel` at a time, and reports them in order. Returns how many passed. */
static int run_in_children(struct job *jobs, int n, int parallel)
{
	int started = 0, running = 0, reported = 0, passed = 0;

	while (reported < n) {
		while (started < n && running < parallel) {
			struct job *j = &jobs[started++];
			int e = job_start(j);

			if (e < 0) {
				printf("# cannot start %s: %s\n", j->tc->name, strerror(-e));
				j->status = 1 << 8;	/* as if it had exited with status 1 */
				j->done = 1;
				continue;
			}
			running++;
		}
		while (reported < n && jobs[reported].done) {
			int ok = job_report(&jobs[reported]);

			printf("%s - %s\n", ok ? "ok" : "not ok", jobs[reported].tc->name);
			passed += ok;
			reported++;
		}
		if (running) {
			int st;
			pid_t pid = wait(&st);

			if (pid < 0 && errno == EINTR)
				continue;
			if (pid < 0)
				break;
			for (int i = 0; i < started; i++)
				if (jobs[i].pid == pid && !jobs[i].done) {
					jobs[i].status = st;
					jobs[i].done = 1;
					running--;
				}
		}
	}
	return passed;
}

int main(int argc, char **argv)
{
	const char *filter = argc > 1 ? argv[1] : NULL;
	const char *no_fork = getenv("TEST_NO_FORK"), *par = getenv("TEST_JOBS");
	int n = 0, passed = 0, err, parallel = par && atoi(par) > 0 ? atoi(par) : 8;
	struct job *jobs;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (struct test_case *tc = tests; tc; tc = tc->next)
		n++;
	jobs = calloc((size_t)n + 1, sizeof(*jobs));
	err = jobs ? tmpdir_create() : -ENOMEM;
	if (err < 0) {
		printf("# cannot set up the test run: %s\n0 passed, 1 failed\n", strerror(-err));
		free(jobs);
		return 1;
	}
	n = 0;
	for (struct test_case *tc = tests; tc; tc = tc->next)
		if (!filter || strstr(tc->name, filter) || strstr(tc->file, filter))
			jobs[n++].tc = tc;
	if (no_fork && *no_fork == '1') {
		for (int i = 0; i < n; i++) {
			int ok = run_in_process(jobs[i].tc);

			printf("%s - %s\n", ok ? "ok" : "not ok", jobs[i].tc->name);
			passed += ok;
		}
	} else {
		passed = run_in_children(jobs, n, parallel);
	}
	if (filter && !n)
		printf("# no test or test file name contains \"%s\"\n", filter);
	tmpdir_remove();
	printf("%d passed, %d failed\n", passed, n - passed);
	free(jobs);
	return passed < n || !n ? 1 : 0;
}
