/*
 * Processes: EXEC requests (streamed stdin, stdout and stderr under flow control, kill, timeout, exit status) and
 * the Smolfile's `init` commands (run once, output collected into a report). Each process leads a session of its
 * own, so a signal or the timeout reaches everything it started (`sh -c 'sleep 100'` included). With TTY the
 * process gets a pseudo-terminal as its controlling terminal (a shell's job control works), resized by RESIZE.
 */
#define _GNU_SOURCE
#include "agent.h"
#include "user.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

struct exec_req {
	char **argv, **env;
	int argc, nenv;
	char *cwd;
	char *user;	/* F_USER, NULL: as the agent (root) */
	uint64_t timeout_ms, stdin_on;
	uint64_t tty, rows, cols;	/* F_TTY, F_ROWS, F_COLS (24 by 80 unless given) */
};

static void strv_free(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void exec_req_free(struct exec_req *r)
{
	strv_free(r->argv, r->argc);
	strv_free(r->env, r->nenv);
	free(r->cwd);
	free(r->user);
}

/* Appends a string field to a NULL-terminated vector. */
static int strv_push(char ***v, int *n, const struct proto_field *f)
{
	char **nv, *s;
	int e = proto_field_str(f, &s);

	if (e < 0)
		return e;
	nv = realloc(*v, sizeof(char *) * ((size_t)*n + 2));
	if (!nv) {
		free(s);
		return -ENOMEM;
	}
	nv[(*n)++] = s;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}

/* Parses an EXEC payload; on failure replies and returns -1. */
static int exec_req_parse(struct agent *a, uint32_t id, const uint8_t *payload, size_t len, struct exec_req *r)
{
	struct proto_reader rd;
	struct proto_field f;
	int e = 0, got;

	memset(r, 0, sizeof(*r));
	r->rows = 24;
	r->cols = 80;
	proto_reader_init(&rd, payload, len);
	while (e == 0 && (got = proto_field_next(&rd, &f)) != 0) {
		if (got < 0) {
			conn_reply_error(a, id, EBADMSG, NULL, "EXEC: a field overruns the frame");
			goto fail;
		}
		switch (f.tag) {
		case F_ARGV: e = strv_push(&r->argv, &r->argc, &f); break;
		case F_ENV:
			e = strv_push(&r->env, &r->nenv, &f);
			/* "KEY=VALUE" with a nonempty KEY ("" and "=x" are refused) */
			if (e == 0 && (!r->env[r->nenv - 1][0] || !strchr(r->env[r->nenv - 1] + 1, '='))) {
				conn_reply_error(a, id, EINVAL, NULL, "EXEC: env entry '%.64s' is not KEY=VALUE",
						 r->env[r->nenv - 1]);
				goto fail;
			}
			break;
		case F_CWD:
			free(r->cwd);
			r->cwd = NULL;
			e = proto_field_str(&f, &r->cwd);
			break;
		case F_USER:
			free(r->user);
			r->user = NULL;
			e = proto_field_str(&f, &r->user);
			break;
		case F_TIMEOUT_MS: e = proto_field_u64(&f, &r->timeout_ms); break;
		case F_STDIN: e = proto_field_u64(&f, &r->stdin_on); break;
		case F_TTY: e = proto_field_u64(&f, &r->tty); break;
		case F_ROWS: e = proto_field_u64(&f, &r->rows); break;
		case F_COLS: e = proto_field_u64(&f, &r->cols); break;
		default: break;	/* unknown fields are for newer agents */
		}
	}
	if (e < 0) {
		conn_reply_error(a, id, -e, NULL, "EXEC: field %u is malformed (%s)", f.tag,
				 e == -EBADMSG ? "wrong size or a NUL byte in a string" : strerror(-e));
		goto fail;
	}
	if (!r->argc) {
		conn_reply_error(a, id, EINVAL, NULL, "EXEC needs at least one argv entry");
		goto fail;
	}
	if (r->timeout_ms > 365ull * 24 * 3600 * 1000) {
		conn_reply_error(a, id, EINVAL, NULL, "EXEC: timeout of %llu ms is absurd",
				 (unsigned long long)r->timeout_ms);
		goto fail;
	}
	if (r->tty && (r->rows < 1 || r->rows > PROTO_TTY_MAX || r->cols < 1 || r->cols > PROTO_TTY_MAX)) {
		conn_reply_error(a, id, EINVAL, NULL, "EXEC: a terminal of %llu rows and %llu columns (1 to %d each)",
				 (unsigned long long)r->rows, (unsigned long long)r->cols, PROTO_TTY_MAX);
		goto fail;
	}
	return 0;
fail:
	exec_req_free(r);
	return -1;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* What the child reports through its close-on-exec pipe when it cannot run the program. */
struct spawn_failure {
	int step;	/* 0: chdir, 1: exec, 2: setgroups, 3: setgid, 4: setuid, 5: the terminal (TIOCSCTTY) */
	int err;
};

static const char *const spawn_steps[] = { "chdir", "exec", "setgroups", "setgid", "setuid", "terminal" };

/*
 * A pseudo-terminal of `size`: returns its master (close-on-exec, no controlling terminal of ours) and its slave's
 * name in `name`, or -errno.
 */
static int pty_open(const struct winsize *size, char *name, size_t namelen)
{
	int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC), e;

	if (master < 0)
		return -errno;
	if (grantpt(master) < 0 || unlockpt(master) < 0 || ptsname_r(master, name, namelen) != 0 ||
	    ioctl(master, TIOCSWINSZ, size) < 0) {
		e = errno;
		close(master);
		return -e;
	}
	return master;
}

/*
 * In the child, after setsid: opens the slave as the controlling terminal and makes it stdin, stdout and stderr
 * (owned by `user`, as login does, so that the user's tools may use it). Returns 0, or -1 with errno set.
 */
static int pty_attach(const char *name, const struct user_ident *user)
{
	int fd = open(name, O_RDWR);

	if (fd < 0 || ioctl(fd, TIOCSCTTY, 0) < 0)
		return -1;
	if (user && fchown(fd, user->uid, (gid_t)-1) < 0)
		return -1;
	if (dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		return -1;
	if (fd > 2)
		close(fd);
	return 0;
}

/*
 * In the child: becomes `u` (groups, then gid, then uid: each needs the privilege the next drops) and sets HOME,
 * USER and LOGNAME from passwd; the request's env, put after, overrides them. Returns 0, or the failing step.
 */
static int become(const struct user_ident *u)
{
	if (setgroups((size_t)u->ngroups, u->groups) < 0)
		return 2;
	if (setgid(u->gid) < 0)
		return 3;
	if (setuid(u->uid) < 0)
		return 4;
	setenv("HOME", u->home, 1);
	if (u->named) {
		setenv("USER", u->name, 1);
		setenv("LOGNAME", u->name, 1);
	} else {
		unsetenv("USER");
		unsetenv("LOGNAME");
	}
	return 0;
}

/*
 * Forks and execs, as `user` unless it is NULL. `in_pipe`: give the child a stdin pipe (else /dev/null).
 * `merge_stderr`: 2>&1. `tty`: a pseudo-terminal of that size instead of pipes (its master is p's in and out).
 * Fills p's fds and pid. Returns 0, or -errno with `failure` saying which step failed.
 */
static int spawn(struct proc *p, char **argv, char **env, const char *cwd, const struct user_ident *user,
		 int in_pipe, int merge_stderr, const struct winsize *tty, struct spawn_failure *failure)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, report[2] = { -1, -1 };
	char pts[64];
	sigset_t all;
	ssize_t n;
	pid_t pid;

	failure->step = -1;
	if (tty) {
		int master = pty_open(tty, pts, sizeof(pts));

		if (master < 0)
			return master;
		out[0] = master;
		in[1] = fcntl(master, F_DUPFD_CLOEXEC, 0);
		if (in[1] < 0 || pipe2(report, O_CLOEXEC) < 0) {
			int e = errno;

			close_fd(&in[1]);
			close_fd(&out[0]);
			return -e;
		}
	} else if ((in_pipe ? pipe2(in, O_CLOEXEC) : (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC))) < 0 ||
		   pipe2(out, O_CLOEXEC) < 0 || (!merge_stderr && pipe2(err, O_CLOEXEC) < 0) ||
		   pipe2(report, O_CLOEXEC) < 0) {
		int e = errno;

		for (int i = 0; i < 2; i++) {
			close_fd(&in[i]);
			close_fd(&out[i]);
			close_fd(&err[i]);
			close_fd(&report[i]);
		}
		return -e;
	}
	pid = fork();
	if (pid == 0) {
		struct spawn_failure f = { 0, 0 };

		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		for (int sig = 1; sig < NSIG; sig++)
			signal(sig, SIG_DFL);
		setsid();
		if (tty) {
			if (pty_attach(pts, user) < 0)
				f.step = 5;
		} else {
			dup2(in[0], 0);
			dup2(out[1], 1);
			dup2(merge_stderr ? out[1] : err[1], 2);
		}
		/* The user first, so that chdir and exec are checked with its permissions, as docker does. */
		if (f.step == 0)
			f.step = user ? become(user) : 0;
		if (f.step) {
			f.err = errno;
		} else {
			for (int i = 0; env && env[i]; i++)
				putenv(env[i]);
			if (cwd && chdir(cwd) < 0) {
				f.err = errno;
			} else {
				execvp(argv[0], argv);
				f.step = 1;
				f.err = errno;
			}
		}
		n = write(report[1], &f, sizeof(f));
		(void)n;
		_exit(127);
	}
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&err[1]);
	close_fd(&report[1]);
	if (pid < 0) {
		int e = errno;

		close_fd(&in[1]);
		close_fd(&out[0]);
		close_fd(&err[0]);
		close_fd(&report[0]);
		return -e;
	}
	do
		n = read(report[0], failure, sizeof(*failure));
	while (n < 0 && errno == EINTR);
	close_fd(&report[0]);
	if (n == (ssize_t)sizeof(*failure)) {
		close_fd(&in[1]);
		close_fd(&out[0]);
		close_fd(&err[0]);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return -failure->err;
	}
	p->pid = pid;
	p->in_fd = in[1];
	p->out_fd = out[0];
	p->err_fd = err[0];
	p->tty = tty != NULL;
	p->exited = p->timed_out = 0;
	p->quiet_since_ms = agent_now_ms();
	for (int i = 0; i < 3; i++) {
		int fd = i == 0 ? p->in_fd : i == 1 ? p->out_fd : p->err_fd;

		if (fd >= 0)
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	}
	return 0;
}

void exec_start(struct agent *a, uint32_t id, const uint8_t *payload, size_t len)
{
	struct spawn_failure failure;
	struct user_ident user = { 0 };
	struct winsize tty;
	struct exec_req r;
	struct stream *s;
	size_t start;
	int e;

	if (exec_req_parse(a, id, payload, len, &r) < 0)
		return;
	if (r.user) {
		char why[512];

		e = user_resolve(r.user, a->opt.etc_dir, &user, why, sizeof(why));
		if (e < 0) {
			conn_reply_error(a, id, -e, NULL, "EXEC: %s", why);
			exec_req_free(&r);
			return;
		}
	}
	s = conn_stream_new(a, id, STREAM_EXEC);
	if (!s) {
		user_ident_free(&user);
		exec_req_free(&r);
		return;
	}
	tty = (struct winsize){ .ws_row = (unsigned short)r.rows, .ws_col = (unsigned short)r.cols };
	e = spawn(&s->proc, r.argv, r.env, r.cwd, r.user ? &user : NULL, r.stdin_on != 0, 0, r.tty ? &tty : NULL,
		  &failure);
	user_ident_free(&user);
	if (e < 0) {
		if (failure.step == 0)
			conn_reply_error(a, id, -e, r.cwd, "chdir %s: %s", r.cwd, strerror(-e));
		else if (failure.step == 1)
			conn_reply_error(a, id, -e, r.argv[0], "exec %s: %s", r.argv[0], strerror(-e));
		else if (failure.step == 5)
			conn_reply_error(a, id, -e, NULL, "EXEC: cannot make the terminal its controlling one: %s",
					 strerror(-e));
		else if (failure.step >= 2 && failure.step <= 4)
			conn_reply_error(a, id, -e, NULL, "EXEC: cannot become user \"%.64s\" (uid %u, gid %u): %s: %s",
					 r.user, (unsigned)user.uid, (unsigned)user.gid, spawn_steps[failure.step],
					 strerror(-e));
		else
			conn_reply_error(a, id, -e, NULL, "cannot start %s: %s", r.argv[0], strerror(-e));
		conn_stream_close(a, s);
		exec_req_free(&r);
		return;
	}
	if (r.timeout_ms)
		s->proc.deadline_ms = agent_now_ms() + (int64_t)r.timeout_ms;
	if (!r.stdin_on && !r.tty)	/* a terminal always takes input */
		s->recv_window = 0;
	start = proto_frame_begin(&a->conn.out, PT_STARTED, 0, id);
	proto_put_u64(&a->conn.out, F_PID, (uint64_t)s->proc.pid);
	proto_frame_end(&a->conn.out, start);
	exec_req_free(&r);
}

/*
 * Signals the process's group and, on a terminal, its foreground job too (a shell's job leads a group of its own:
 * `sleep 100` typed into bash is not in bash's group). Returns kill's result for the process's group.
 */
static int proc_signal(struct proc *p, int sig)
{
	int fd = p->out_fd >= 0 ? p->out_fd : p->in_fd;
	pid_t job = p->tty && fd >= 0 ? tcgetpgrp(fd) : -1;

	if (job > 1 && job != p->pid)
		kill(-job, sig);
	return kill(-p->pid, sig);
}

void exec_kill(struct agent *a, struct stream *s, const uint8_t *payload, size_t len)
{
	struct proto_reader r;
	struct proto_field f;
	uint64_t sig = SIGTERM;

	proto_reader_init(&r, payload, len);
	while (proto_field_next(&r, &f) > 0)
		if (f.tag == F_SIGNAL && proto_field_u64(&f, &sig) < 0)
			sig = 0;
	if (sig < 1 || sig >= (uint64_t)NSIG) {
		conn_reply_error(a, s->id, EINVAL, NULL, "KILL: %llu is not a signal number", (unsigned long long)sig);
		return;
	}
	if (!s->proc.exited && proc_signal(&s->proc, (int)sig) < 0 && errno != ESRCH)
		conn_reply_error(a, s->id, errno, NULL, "kill %d: %s", s->proc.pid, strerror(errno));
}

void exec_resize(struct agent *a, struct stream *s, const uint8_t *payload, size_t len)
{
	struct proc *p = &s->proc;
	uint64_t rows = 0, cols = 0;
	struct proto_reader r;
	struct proto_field f;
	struct winsize size;
	int fd = p->out_fd >= 0 ? p->out_fd : p->in_fd;

	if (!p->tty) {
		conn_reply_error(a, s->id, ENOTTY, NULL, "RESIZE: request %u runs without a terminal (EXEC had no TTY)",
				 s->id);
		return;
	}
	proto_reader_init(&r, payload, len);
	while (proto_field_next(&r, &f) > 0) {
		if ((f.tag == F_ROWS && proto_field_u64(&f, &rows) < 0) || (f.tag == F_COLS && proto_field_u64(&f, &cols) < 0))
			rows = cols = 0;
	}
	if (rows < 1 || rows > PROTO_TTY_MAX || cols < 1 || cols > PROTO_TTY_MAX) {
		conn_reply_error(a, s->id, EINVAL, NULL, "RESIZE: %llu rows and %llu columns (1 to %d each)",
				 (unsigned long long)rows, (unsigned long long)cols, PROTO_TTY_MAX);
		return;
	}
	if (fd < 0)	/* the terminal is gone (its process ended): nothing to resize */
		return;
	size = (struct winsize){ .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
	/* The kernel sends SIGWINCH to the terminal's foreground job. */
	if (ioctl(fd, TIOCSWINSZ, &size) < 0)
		conn_reply_error(a, s->id, errno, NULL, "RESIZE: %s", strerror(errno));
}

/* Tells the host it may send `n` more stdin bytes. */
static void stdin_grant(struct agent *a, struct stream *s, size_t n)
{
	size_t start;

	if (!n || a->conn.fd < 0)
		return;
	start = proto_frame_begin(&a->conn.out, PT_WINDOW, 0, s->id);
	proto_put_u64(&a->conn.out, F_WINDOW, n);
	proto_frame_end(&a->conn.out, start);
	s->recv_window += n;
}

void exec_stdin(struct agent *a, struct stream *s, const uint8_t *data, size_t len, int eof)
{
	struct proc *p = &s->proc;
	uint8_t *dst;

	if (p->in_fd >= 0 && !p->in_eof) {
		dst = proto_buf_grow(&p->in_pending, len);
		if (dst && len)
			memcpy(dst, data, len);
	} else {
		/* The process closed its stdin or ended: the bytes are dropped and the window given back. */
		stdin_grant(a, s, len);
	}
	if (eof)
		p->in_eof = 1;
	proc_write_stdin(a, s);
}

void proc_write_stdin(struct agent *a, struct stream *s)
{
	struct proc *p = &s->proc;
	size_t written = 0, dropped = 0;

	while (p->in_fd >= 0 && written < p->in_pending.len) {
		ssize_t n = write(p->in_fd, p->in_pending.data + written, p->in_pending.len - written);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {	/* EPIPE: the process closed its stdin; what is left is dropped */
			close_fd(&p->in_fd);
			break;
		}
		written += (size_t)n;
	}
	proto_buf_consume(&p->in_pending, written);
	if (p->in_fd < 0) {
		dropped = p->in_pending.len;
		p->in_pending.len = 0;
	}
	if (p->in_eof && !p->in_pending.len)
		close_fd(&p->in_fd);
	stdin_grant(a, s, written + dropped);
}

void proc_read(struct agent *a, struct stream *s, struct proc *p, int fd)
{
	uint8_t buf[PROTO_DATA_CHUNK];
	size_t want = sizeof(buf);
	ssize_t n;

	if (s && s->send_window < want)
		want = (size_t)s->send_window;
	if (!want)
		return;
	n = read(fd, buf, want);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		if (fd == p->out_fd)
			close_fd(&p->out_fd);
		else
			close_fd(&p->err_fd);
		return;
	}
	p->quiet_since_ms = agent_now_ms();
	if (!s) {
		size_t keep = p->capture->len < AGENT_INIT_OUTPUT_MAX ? AGENT_INIT_OUTPUT_MAX - p->capture->len : 0;
		uint8_t *dst = proto_buf_grow(p->capture, (size_t)n < keep ? (size_t)n : keep);

		if (dst)
			memcpy(dst, buf, (size_t)n < keep ? (size_t)n : keep);
		return;
	}
	s->send_window -= (uint64_t)n;
	proto_put_data_frame(&a->conn.out, fd == p->out_fd ? PT_STDOUT : PT_STDERR, 0, s->id, buf, (size_t)n);
}

void proc_abort(struct proc *p)
{
	if (p->pid > 0 && !p->exited)
		proc_signal(p, SIGKILL);	/* reaped by the loop's waitpid(-1) like any orphan */
	close_fd(&p->in_fd);
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	proto_buf_free(&p->in_pending);
	p->pid = -1;
}

static void init_next(struct agent *a);

void proc_reaped(struct agent *a, pid_t pid, int status)
{
	struct proc *p = NULL;

	for (int i = 0; i < PROTO_MAX_STREAMS && !p; i++) {
		struct stream *s = a->conn.streams[i];

		if (s && s->kind == STREAM_EXEC && s->proc.pid == pid && !s->proc.exited)
			p = &s->proc;
	}
	if (!p && a->init.state == INIT_RUNNING && a->init.proc.pid == pid)
		p = &a->init.proc;
	if (!p)
		return;
	p->exited = 1;
	p->status = status;
	p->quiet_since_ms = agent_now_ms();
	close_fd(&p->in_fd);
	proto_buf_free(&p->in_pending);
}

/* True once a process is done: exited, and its pipes at EOF or silent for the grace period (a daemon it left). */
static int proc_finished(struct proc *p, int blocked, int64_t now, int *timeout)
{
	int64_t quiet_until = p->quiet_since_ms + AGENT_EXIT_GRACE_MS;

	if (!p->exited)
		return 0;
	if (p->out_fd < 0 && p->err_fd < 0)
		return 1;
	if (blocked)
		return 0;
	if (now >= quiet_until) {
		close_fd(&p->out_fd);
		close_fd(&p->err_fd);
		return 1;
	}
	if (*timeout < 0 || quiet_until - now < *timeout)
		*timeout = (int)(quiet_until - now);
	return 0;
}

static void put_status(struct proto_buf *b, const struct proc *p)
{
	if (WIFSIGNALED(p->status))
		proto_put_u64(b, F_SIGNAL, (uint64_t)WTERMSIG(p->status));
	else
		proto_put_u64(b, F_EXIT_CODE, (uint64_t)WEXITSTATUS(p->status));
}

static void deadline(struct proc *p, int64_t now, int *timeout)
{
	if (!p->deadline_ms || p->exited || p->timed_out)
		return;
	if (now >= p->deadline_ms) {
		p->timed_out = 1;
		proc_signal(p, SIGKILL);
		return;
	}
	if (*timeout < 0 || p->deadline_ms - now < *timeout)
		*timeout = (int)(p->deadline_ms - now);
}

int proc_tick(struct agent *a)
{
	int64_t now = agent_now_ms();
	int timeout = -1;

	for (int i = 0; i < PROTO_MAX_STREAMS; i++) {
		struct stream *s = a->conn.streams[i];
		size_t start;

		if (!s || s->kind != STREAM_EXEC)
			continue;
		deadline(&s->proc, now, &timeout);
		if (!proc_finished(&s->proc, s->send_window == 0 || a->conn.out.len >= AGENT_OUT_HIGH, now, &timeout))
			continue;
		start = proto_frame_begin(&a->conn.out, PT_EXIT, 0, s->id);
		put_status(&a->conn.out, &s->proc);
		proto_put_u64(&a->conn.out, F_TIMED_OUT, (uint64_t)s->proc.timed_out);
		proto_frame_end(&a->conn.out, start);
		s->proc.pid = -1;
		conn_stream_close(a, s);
	}
	if (a->init.state == INIT_RUNNING && a->init.proc.pid > 0) {
		deadline(&a->init.proc, now, &timeout);
		if (proc_finished(&a->init.proc, 0, now, &timeout)) {
			init_next(a);
			timeout = 0;
		}
	}
	return timeout;
}

/* The init job's answer: its state and the report of every command run so far. */
static void init_reply(struct agent *a, uint32_t id, int already_ran)
{
	struct proto_buf *b = &a->conn.out;
	size_t start;
	uint8_t *dst;

	if (a->conn.fd < 0 || !id)
		return;
	start = proto_frame_begin(b, PT_OK, 0, id);
	proto_put_u64(b, F_INIT_STATE, a->init.state);
	proto_put_u64(b, F_ALREADY_RAN, (uint64_t)already_ran);
	dst = proto_buf_grow(b, a->init.report.len);
	if (dst && a->init.report.len)
		memcpy(dst, a->init.report.data, a->init.report.len);
	proto_frame_end(b, start);
}

/* The running command ended (or none has started): records it and starts the next, or finishes. */
static void init_next(struct agent *a)
{
	struct init_job *j = &a->init;
	struct spawn_failure failure;
	char *argv[4] = { "/bin/sh", "-c", NULL, NULL };
	int failed = 0;

	if (j->proc.pid > 0) {
		proto_put_str(&j->report, F_COMMAND, j->cmds[j->next - 1]);
		put_status(&j->report, &j->proc);
		if (j->proc.timed_out)
			proto_put_u64(&j->report, F_TIMED_OUT, 1);
		proto_put_bytes(&j->report, F_OUTPUT, j->output.data, j->output.len);
		failed = !WIFEXITED(j->proc.status) || WEXITSTATUS(j->proc.status) != 0;
		proc_abort(&j->proc);
	}
	while (!failed && j->next < j->ncmds) {
		int e;

		argv[2] = j->cmds[j->next++];
		j->output.len = 0;
		memset(&j->proc, 0, sizeof(j->proc));
		j->proc.capture = &j->output;
		e = spawn(&j->proc, argv, NULL, "/", NULL, 0, 1, NULL, &failure);
		if (e == 0) {
			if (j->timeout_ms)
				j->proc.deadline_ms = agent_now_ms() + (int64_t)j->timeout_ms;
			return;
		}
		j->proc.pid = -1;
		proto_put_str(&j->report, F_COMMAND, argv[2]);
		proto_put_u64(&j->report, F_EXIT_CODE, 127);
		proto_put_str(&j->report, F_OUTPUT, strerror(-e));
		failed = 1;
	}
	j->state = failed ? INIT_FAILED : INIT_DONE;
	agent_log("init %s (%d of %d commands run)", failed ? "failed" : "done", j->next, j->ncmds);
	if (j->report.failed)
		agent_log("init: out of memory for the report");
	init_reply(a, j->reply_id, 0);
	j->reply_id = 0;
	proto_buf_free(&j->output);
	strv_free(j->cmds, j->ncmds);
	j->cmds = NULL;
}

void init_request(struct agent *a, uint32_t id, const uint8_t *payload, size_t len)
{
	struct init_job *j = &a->init;
	struct proto_reader r;
	struct proto_field f;
	char **cmds = NULL;
	uint64_t timeout_ms = 0;
	int n = 0, got, e = 0;

	if (j->state == INIT_DONE || j->state == INIT_FAILED) {
		init_reply(a, id, 1);
		return;
	}
	if (j->state == INIT_RUNNING) {
		if (j->reply_id) {
			conn_reply_error(a, id, EBUSY, NULL, "init is running and request %u waits for it", j->reply_id);
			return;
		}
		j->reply_id = id;	/* a new connection asking again: it gets the report when init ends */
		return;
	}
	proto_reader_init(&r, payload, len);
	while (e == 0 && (got = proto_field_next(&r, &f)) != 0) {
		if (got < 0)
			e = -EBADMSG;
		else if (f.tag == F_COMMAND)
			e = strv_push(&cmds, &n, &f);
		else if (f.tag == F_TIMEOUT_MS)
			e = proto_field_u64(&f, &timeout_ms);
	}
	if (e < 0) {
		conn_reply_error(a, id, -e, NULL, "INIT: malformed command list");
		strv_free(cmds, n);
		return;
	}
	if (timeout_ms > 365ull * 24 * 3600 * 1000) {
		conn_reply_error(a, id, EINVAL, NULL, "INIT: timeout of %llu ms is absurd", (unsigned long long)timeout_ms);
		strv_free(cmds, n);
		return;
	}
	j->cmds = cmds;
	j->ncmds = n;
	j->timeout_ms = timeout_ms;
	j->next = 0;
	j->reply_id = id;
	j->state = INIT_RUNNING;
	j->proc.pid = -1;
	j->proc.in_fd = j->proc.out_fd = j->proc.err_fd = -1;
	agent_log("init: running %d command%s", n, n == 1 ? "" : "s");
	init_next(a);
}
