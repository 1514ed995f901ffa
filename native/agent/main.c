/*
 * smol-agent's entry point and event loop: accepts the host's connection, parses its frames and hands each one to
 * exec.c, files.c or system.c; flushes replies; reaps children. docs/agent.md describes the protocol.
 *
 *	smol-agent [--listen vsock:52|unix:PATH] [--system] [--machine-id-file F] [--hostname-file F]
 */
#define _GNU_SOURCE
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int64_t agent_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void agent_log(const char *fmt, ...)
{
	va_list ap;

	fputs("smol-agent: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void conn_reply_error(struct agent *a, uint32_t id, int err, const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	size_t start;

	if (a->conn.fd < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	start = proto_frame_begin(&a->conn.out, PT_ERROR, 0, id);
	proto_put_u64(&a->conn.out, F_ERRNO, (uint64_t)err);
	proto_put_str(&a->conn.out, F_ERRNAME, proto_errname(err));
	proto_put_str(&a->conn.out, F_MESSAGE, msg);
	if (path)
		proto_put_str(&a->conn.out, F_PATH, path);
	proto_frame_end(&a->conn.out, start);
}

static struct stream *conn_stream_find(struct conn *c, uint32_t id)
{
	for (int i = 0; i < PROTO_MAX_STREAMS; i++)
		if (c->streams[i] && c->streams[i]->id == id)
			return c->streams[i];
	return NULL;
}

/* A new stream for request `id`, or NULL after replying why not. */
struct stream *conn_stream_new(struct agent *a, uint32_t id, enum stream_kind kind)
{
	struct conn *c = &a->conn;
	struct stream *s;
	int slot = -1;

	if (conn_stream_find(c, id)) {
		conn_reply_error(a, id, EBUSY, NULL, "request id %u is already in use", id);
		return NULL;
	}
	for (int i = 0; i < PROTO_MAX_STREAMS && slot < 0; i++)
		if (!c->streams[i])
			slot = i;
	if (slot < 0) {
		conn_reply_error(a, id, EMFILE, NULL, "too many open requests (at most %d)", PROTO_MAX_STREAMS);
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		conn_reply_error(a, id, ENOMEM, NULL, "out of memory");
		return NULL;
	}
	s->id = id;
	s->kind = kind;
	s->fd = -1;
	s->send_window = PROTO_WINDOW;
	s->recv_window = PROTO_WINDOW;
	s->proc.pid = -1;
	s->proc.in_fd = s->proc.out_fd = s->proc.err_fd = -1;
	c->streams[slot] = s;
	return s;
}

void conn_stream_close(struct agent *a, struct stream *s)
{
	struct conn *c = &a->conn;

	for (int i = 0; i < PROTO_MAX_STREAMS; i++)
		if (c->streams[i] == s)
			c->streams[i] = NULL;
	if (s->kind == STREAM_EXEC)
		proc_abort(&s->proc);
	else
		file_abort(s);
	free(s->path);
	free(s->tmp_path);
	free(s);
}

/* Ends the host connection: processes it started are killed, transfers abandoned (temporary files removed). */
static void conn_drop(struct agent *a, const char *why)
{
	struct conn *c = &a->conn;

	if (c->fd < 0)
		return;
	agent_log("host connection closed: %s", why);
	for (int i = 0; i < PROTO_MAX_STREAMS; i++)
		if (c->streams[i])
			conn_stream_close(a, c->streams[i]);
	close(c->fd);
	c->fd = -1;
	c->out.len = 0;
	c->out.failed = 0;
	proto_parser_reset(&c->in);
	a->init.reply_id = 0;	/* the init job goes on; a new connection asks for its report again */
}

static void send_hello(struct agent *a)
{
	struct proto_buf *b = &a->conn.out;
	size_t start = proto_frame_begin(b, PT_HELLO, 0, 0);

	proto_put_u64(b, F_PROTOCOL, PROTO_VERSION);
	proto_put_str(b, F_VERSION, AGENT_VERSION);
	proto_put_str(b, F_BOOT_ID, a->boot_id);
	proto_put_u64(b, F_GENERATION, a->generation);
	proto_put_u64(b, F_INIT_STATE, a->init.state);
	proto_put_u64(b, F_WINDOW, PROTO_WINDOW);
	proto_put_u64(b, F_MAX_PAYLOAD, PROTO_MAX_PAYLOAD);
	proto_put_str(b, F_FEATURE, "exec-user");
	proto_put_str(b, F_FEATURE, "exec-tty");
	proto_frame_end(b, start);
}

static void conn_accept(struct agent *a)
{
	int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			agent_log("accept: %s", strerror(errno));
		return;
	}
	/* The newest connection wins: after a restore or fork the old one is dead anyway. */
	conn_drop(a, "a new host connection replaced it");
	a->conn.fd = fd;
	send_hello(a);
}

static void window_grant(struct stream *s, const uint8_t *payload, size_t len)
{
	struct proto_reader r;
	struct proto_field f;
	uint64_t v;

	proto_reader_init(&r, payload, len);
	while (proto_field_next(&r, &f) > 0)
		if (f.tag == F_WINDOW && proto_field_u64(&f, &v) == 0 && v <= PROTO_MAX_PAYLOAD * 64ull)
			s->send_window += v;
}

/* True when a control frame's payload is a whole number of well-formed fields. */
static int fields_valid(const uint8_t *payload, size_t len)
{
	struct proto_reader r;
	struct proto_field f;
	int got;

	proto_reader_init(&r, payload, len);
	while ((got = proto_field_next(&r, &f)) > 0)
		;
	return got == 0;
}

/* One frame from the host. Returns 0, or -1 when the connection must be closed (its framing can't be trusted). */
static int conn_dispatch(struct agent *a, const struct proto_header *h, const uint8_t *payload)
{
	struct stream *s = h->id ? conn_stream_find(&a->conn, h->id) : NULL;
	const char *name = proto_type_name(h->type);

	if (h->type == PT_STDOUT || h->type == PT_STDERR) {
		conn_reply_error(a, h->id, EPROTO, NULL, "%s frames are sent by the agent, not the host", name);
		return 0;
	}
	if (proto_type_is_data(h->type)) {	/* STDIN for an exec, FILE_DATA for a write */
		if (!s || s->kind != (h->type == PT_STDIN ? STREAM_EXEC : STREAM_WRITE)) {
			conn_reply_error(a, h->id, EINVAL, NULL, "%s for request %u, which takes no such data", name,
					 h->id);
			return 0;
		}
		if (h->len > s->recv_window) {
			conn_reply_error(a, 0, EPROTO, NULL, "%u bytes of %s for request %u exceed its window of %llu",
					 h->len, name, h->id, (unsigned long long)s->recv_window);
			return -1;
		}
		s->recv_window -= h->len;
		if (h->type == PT_STDIN)
			exec_stdin(a, s, payload, h->len, h->flags & PROTO_FLAG_EOF);
		else
			file_write_data(a, s, payload, h->len, h->flags & PROTO_FLAG_EOF);
		return 0;
	}
	if (!name) {	/* a newer host's request, perhaps: say so, and the connection goes on */
		conn_reply_error(a, h->id, EOPNOTSUPP, NULL, "unknown frame type 0x%x (%u bytes)", h->type, h->len);
		return 0;
	}
	if (!fields_valid(payload, h->len)) {
		conn_reply_error(a, h->id, EBADMSG, NULL, "malformed %s: a field overruns the frame", name);
		return 0;
	}
	switch (h->type) {
	case PT_WINDOW:
		if (s)	/* a grant may cross the end of its stream: ignore it then */
			window_grant(s, payload, h->len);
		return 0;
	case PT_EXEC:
	case PT_FILE_READ:
	case PT_FILE_WRITE:
	case PT_INIT:
	case PT_REMINT:
	case PT_POWEROFF:
		if (!h->id) {
			conn_reply_error(a, 0, EINVAL, NULL, "%s needs a request id other than 0", name);
			return 0;
		}
		break;
	case PT_KILL:
		if (!s) {
			conn_reply_error(a, h->id, ESRCH, NULL, "KILL: request %u is not open", h->id);
		} else if (s->kind == STREAM_EXEC) {
			exec_kill(a, s, payload, h->len);
		} else {	/* cancels a transfer: a write's temporary file is removed */
			conn_reply_error(a, h->id, ECANCELED, s->path, "%s %s: cancelled by the host",
					 s->kind == STREAM_READ ? "read" : "write", s->path);
			conn_stream_close(a, s);
		}
		return 0;
	case PT_RESIZE:
		if (!s)
			conn_reply_error(a, h->id, ESRCH, NULL, "RESIZE: request %u is not open", h->id);
		else if (s->kind != STREAM_EXEC)
			conn_reply_error(a, h->id, ENOTTY, NULL, "RESIZE: request %u is a file transfer, not a terminal",
					 h->id);
		else
			exec_resize(a, s, payload, h->len);
		return 0;
	default:
		conn_reply_error(a, h->id, EPROTO, NULL, "%s frames are sent by the agent, not the host", name);
		return 0;
	}
	switch (h->type) {
	case PT_EXEC:
		exec_start(a, h->id, payload, h->len);
		break;
	case PT_FILE_READ:
		file_read_start(a, h->id, payload, h->len);
		break;
	case PT_FILE_WRITE:
		file_write_start(a, h->id, payload, h->len);
		break;
	case PT_INIT:
		init_request(a, h->id, payload, h->len);
		break;
	case PT_REMINT:
		system_remint(a, h->id, payload, h->len);
		break;
	case PT_POWEROFF: {
		struct proto_reader r;
		struct proto_field f;
		uint64_t reboot = 0;
		size_t start;

		proto_reader_init(&r, payload, h->len);
		while (proto_field_next(&r, &f) > 0)
			if (f.tag == F_REBOOT)
				proto_field_u64(&f, &reboot);
		start = proto_frame_begin(&a->conn.out, PT_OK, 0, h->id);
		proto_frame_end(&a->conn.out, start);
		a->power_request = reboot ? 2 : 1;
		break;
	}
	}
	return 0;
}

static void conn_read(struct agent *a)
{
	struct conn *c = &a->conn;
	struct proto_header h;
	const uint8_t *payload;
	size_t avail;
	uint8_t *space = proto_parser_space(&c->in, &avail);
	ssize_t n = read(c->fd, space, avail);
	int r;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		char why[96];

		if (n < 0)
			snprintf(why, sizeof(why), "%s", strerror(errno));
		else if (proto_parser_pending(&c->in))
			snprintf(why, sizeof(why), "the host hung up in the middle of a frame (%zu bytes of it)",
				 proto_parser_pending(&c->in));
		else
			snprintf(why, sizeof(why), "the host hung up");
		conn_drop(a, why);
		return;
	}
	proto_parser_commit(&c->in, (size_t)n);
	while (c->fd >= 0 && (r = proto_parser_next(&c->in, &h, &payload)) != 0) {
		if (r < 0) {
			conn_reply_error(a, 0, EMSGSIZE, NULL,
					 "a frame of %u bytes exceeds the protocol's limit of %u; closing the connection",
					 h.len, PROTO_MAX_PAYLOAD);
			send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
			conn_drop(a, "oversized frame");
			return;
		}
		if (conn_dispatch(a, &h, payload) < 0) {
			send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
			conn_drop(a, "protocol violation");
			return;
		}
	}
}

static void conn_flush(struct agent *a)
{
	struct conn *c = &a->conn;

	if (c->out.failed) {
		conn_drop(a, "out of memory for replies");
		return;
	}
	while (c->fd >= 0 && c->out.len) {
		ssize_t n = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			conn_drop(a, strerror(errno));
			return;
		}
		proto_buf_consume(&c->out, (size_t)n);
	}
}

static void reap(struct agent *a)
{
	struct signalfd_siginfo si;
	int status;
	pid_t pid;

	while (read(a->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
			a->power_request = 2;	/* busybox `reboot`, Ctrl-Alt-Del */
		else if (si.ssi_signo == SIGUSR2 || si.ssi_signo == SIGUSR1)
			a->power_request = 1;	/* busybox `poweroff`, `halt` */
	}
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		proc_reaped(a, pid, status);
}

enum slot_kind { SLOT_LISTEN, SLOT_SIGNAL, SLOT_CONN, SLOT_PROC_OUT, SLOT_PROC_IN };

struct slot {
	enum slot_kind kind;
	struct stream *s;	/* NULL for the init job's process */
	struct proc *p;
};

#define MAX_POLL (3 + 3 * PROTO_MAX_STREAMS + 1)

static void add(struct pollfd *pfd, struct slot *slots, int *n, int fd, short events, struct slot slot)
{
	pfd[*n] = (struct pollfd){ .fd = fd, .events = events };
	slots[(*n)++] = slot;
}

static void proc_poll(struct agent *a, struct pollfd *pfd, struct slot *slots, int *n, struct stream *s,
		      struct proc *p)
{
	/* A stream's output waits while its window is shut or the host is not reading (backpressure to the child). */
	int may_read = !s || (s->send_window > 0 && a->conn.out.len < AGENT_OUT_HIGH);

	if (may_read && p->out_fd >= 0)
		add(pfd, slots, n, p->out_fd, POLLIN, (struct slot){ SLOT_PROC_OUT, s, p });
	if (may_read && p->err_fd >= 0)
		add(pfd, slots, n, p->err_fd, POLLIN, (struct slot){ SLOT_PROC_OUT, s, p });
	if (p->in_fd >= 0 && p->in_pending.len)
		add(pfd, slots, n, p->in_fd, POLLOUT, (struct slot){ SLOT_PROC_IN, s, p });
}

static int proc_slot_alive(struct agent *a, const struct slot *slot, int fd)
{
	const struct proc *p = slot->p;
	int alive = 0;

	if (!slot->s) {
		alive = a->init.state == INIT_RUNNING;
	} else {
		for (int i = 0; i < PROTO_MAX_STREAMS; i++)
			alive |= a->conn.streams[i] == slot->s;
	}
	return alive && (fd == p->out_fd || fd == p->err_fd || fd == p->in_fd);
}

static void loop(struct agent *a)
{
	struct pollfd pfd[MAX_POLL];
	struct slot slots[MAX_POLL];

	for (;;) {
		int n = 0, timeout = proc_tick(a);

		if (file_pump(a))
			timeout = 0;
		conn_flush(a);
		if (a->power_request && (a->conn.fd < 0 || !a->conn.out.len))
			system_power(a, a->power_request);
		add(pfd, slots, &n, a->listen_fd, POLLIN, (struct slot){ SLOT_LISTEN, NULL, NULL });
		add(pfd, slots, &n, a->sig_fd, POLLIN, (struct slot){ SLOT_SIGNAL, NULL, NULL });
		if (a->conn.fd >= 0)
			add(pfd, slots, &n, a->conn.fd,
			    (short)((a->conn.out.len < AGENT_IN_STOP ? POLLIN : 0) | (a->conn.out.len ? POLLOUT : 0)),
			    (struct slot){ SLOT_CONN, NULL, NULL });
		for (int i = 0; i < PROTO_MAX_STREAMS; i++)
			if (a->conn.streams[i] && a->conn.streams[i]->kind == STREAM_EXEC)
				proc_poll(a, pfd, slots, &n, a->conn.streams[i], &a->conn.streams[i]->proc);
		if (a->init.state == INIT_RUNNING && a->init.proc.pid > 0)
			proc_poll(a, pfd, slots, &n, NULL, &a->init.proc);
		if (a->power_request)
			timeout = timeout < 0 || timeout > 100 ? 100 : timeout;
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno != EINTR)
				agent_log("poll: %s", strerror(errno));
			continue;
		}
		for (int i = 0; i < n; i++) {
			if (!pfd[i].revents)
				continue;
			switch (slots[i].kind) {
			case SLOT_LISTEN:
				conn_accept(a);
				break;
			case SLOT_SIGNAL:
				reap(a);
				break;
			case SLOT_CONN:
				if (a->conn.fd == pfd[i].fd && pfd[i].revents & POLLOUT)
					conn_flush(a);
				if (a->conn.fd == pfd[i].fd && pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
					conn_read(a);
				break;
			case SLOT_PROC_OUT:
				/* Earlier slots may have ended the stream (a drop, a reply): check it is still there. */
				if (proc_slot_alive(a, &slots[i], pfd[i].fd))
					proc_read(a, slots[i].s, slots[i].p, pfd[i].fd);
				break;
			case SLOT_PROC_IN:
				if (proc_slot_alive(a, &slots[i], pfd[i].fd))
					proc_write_stdin(a, slots[i].s);
				break;
			}
		}
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: smol-agent [--listen vsock:PORT|unix:PATH] [--system] [--machine-id-file FILE]\n"
		   "                  [--hostname-file FILE] [--etc-dir DIR]\n"
		   "Serves Smol Studio's guest agent protocol (docs/agent.md). As PID 1 or with --system it owns\n"
		   "the guest's poweroff, hostname and RNG; as PID 1 it also brings the system up (mounts) and takes\n"
		   "init's signals. EXEC's USER is looked up in DIR/passwd and DIR/group (default /etc).\n"
		   "Default: --listen vsock:%d.\n",
		AGENT_DEFAULT_PORT);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "system", no_argument, NULL, 's' },
		{ "machine-id-file", required_argument, NULL, 'm' },
		{ "hostname-file", required_argument, NULL, 'n' },
		{ "etc-dir", required_argument, NULL, 'e' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct agent a = { .listen_fd = -1, .sig_fd = -1, .conn = { .fd = -1 } };
	char default_listen[32], err[256];
	sigset_t mask;
	int c;

	snprintf(default_listen, sizeof(default_listen), "vsock:%d", AGENT_DEFAULT_PORT);
	a.opt = (struct agent_options){ .listen = default_listen, .system = getpid() == 1,
					.machine_id_file = "/etc/machine-id", .hostname_file = "/etc/hostname",
					.etc_dir = "/etc" };
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'l': a.opt.listen = optarg; break;
		case 's': a.opt.system = 1; break;
		case 'm': a.opt.machine_id_file = optarg; break;
		case 'n': a.opt.hostname_file = optarg; break;
		case 'e': a.opt.etc_dir = optarg; break;
		case 'V': printf("smol-agent %s (protocol %d)\n", AGENT_VERSION, PROTO_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "smol-agent: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	/* Mounts and init's signals are PID 1's: under another init (busybox's) --system only owns the identity. */
	if (a.opt.system && getpid() == 1 && system_bring_up() < 0)
		agent_log("bringing the system up failed in part; serving anyway");
	/* Descriptors 0 to 2 must be taken (by /dev/null if need be), so that no pipe spawn dup2s onto them is one. */
	for (int fd = 0; fd >= 0 && fd <= 2;)
		if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) > 2)
			close(fd);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (a.opt.system && getpid() == 1) {
		sigaddset(&mask, SIGTERM);
		sigaddset(&mask, SIGINT);
		sigaddset(&mask, SIGUSR1);
		sigaddset(&mask, SIGUSR2);
	}
	sigprocmask(SIG_BLOCK, &mask, NULL);
	a.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (a.sig_fd < 0 || proto_parser_init(&a.conn.in) < 0) {
		agent_log("cannot set up: %s", strerror(errno));
		return 1;
	}
	system_read_boot_id(&a);
	while (listen_parse_and_open(a.opt.listen, &a.listen_fd, err, sizeof(err)) < 0) {
		agent_log("%s", err);
		if (!a.opt.system)
			return 1;
		/* As the guest's init the agent must not exit: the vsock device may come later. */
		sleep(1);
		reap(&a);
	}
	agent_log("listening on %s", a.opt.listen);
	loop(&a);
}
