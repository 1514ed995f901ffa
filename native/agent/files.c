/*
 * File transfers. A read streams the file in FILE_DATA frames as the host's window allows; a write goes to a
 * temporary file next to the target, renamed over it at the end, so a reader never sees half a file and a
 * failed or abandoned transfer leaves the old one.
 */
#define _GNU_SOURCE
#include "agent.h"
#include "file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct file_req {
	char *path;
	uint64_t mode, mkdirs;
};

/* Parses FILE_READ and FILE_WRITE payloads; on failure replies and returns -1. */
static int file_req_parse(struct agent *a, uint32_t id, const char *what, const uint8_t *payload, size_t len,
			  struct file_req *r)
{
	struct proto_reader rd;
	struct proto_field f;
	int e = 0, got;

	*r = (struct file_req){ .mode = 0644 };
	proto_reader_init(&rd, payload, len);
	while (e == 0 && (got = proto_field_next(&rd, &f)) != 0) {
		if (got < 0)
			e = -EBADMSG;
		else if (f.tag == F_PATH && !r->path)
			e = proto_field_str(&f, &r->path);
		else if (f.tag == F_MODE)
			e = proto_field_u64(&f, &r->mode);
		else if (f.tag == F_MKDIRS)
			e = proto_field_u64(&f, &r->mkdirs);
	}
	if (e < 0) {
		conn_reply_error(a, id, -e, NULL, "%s: malformed request (a field overruns the frame, has the wrong "
				 "size, or a path holds a NUL byte)", what);
	} else if (!r->path || r->path[0] != '/') {
		conn_reply_error(a, id, EINVAL, r->path, "%s needs an absolute path%s%s", what,
				 r->path ? ", not " : "", r->path ? r->path : "");
		e = -EINVAL;
	} else if (r->mode > 07777) {
		conn_reply_error(a, id, EINVAL, r->path, "%s: mode %llo is not a permission mode", what,
				 (unsigned long long)r->mode);
		e = -EINVAL;
	}
	if (e < 0) {
		free(r->path);
		r->path = NULL;
		return -1;
	}
	return 0;
}

void file_read_start(struct agent *a, uint32_t id, const uint8_t *payload, size_t len)
{
	struct file_req r;
	struct stream *s;
	struct stat st;
	size_t start;
	int fd;

	if (file_req_parse(a, id, "FILE_READ", payload, len, &r) < 0)
		return;
	/* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below, like any non-regular file). */
	fd = open(r.path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = fd < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : EINVAL;

		if (e == EINVAL)	/* a device, FIFO or socket could block the agent or never end */
			conn_reply_error(a, id, e, r.path, "read %s: not a regular file", r.path);
		else
			conn_reply_error(a, id, e, r.path, "read %s: %s", r.path, strerror(e));
		if (fd >= 0)
			close(fd);
		free(r.path);
		return;
	}
	s = conn_stream_new(a, id, STREAM_READ);
	if (!s) {
		close(fd);
		free(r.path);
		return;
	}
	s->fd = fd;
	s->path = r.path;
	start = proto_frame_begin(&a->conn.out, PT_OK, 0, id);
	proto_put_u64(&a->conn.out, F_SIZE, (uint64_t)st.st_size);	/* 0 for /proc and /sys files */
	proto_put_u64(&a->conn.out, F_MODE, st.st_mode & 07777);
	proto_frame_end(&a->conn.out, start);
}

int file_pump(struct agent *a)
{
	uint8_t buf[PROTO_DATA_CHUNK];
	int sent = 0;

	for (int i = 0; i < PROTO_MAX_STREAMS; i++) {
		struct stream *s = a->conn.streams[i];

		while (s && s->kind == STREAM_READ && s->send_window && a->conn.out.len < AGENT_OUT_HIGH) {
			size_t want = s->send_window < sizeof(buf) ? (size_t)s->send_window : sizeof(buf);
			ssize_t n = read(s->fd, buf, want);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				conn_reply_error(a, s->id, errno, s->path, "read %s: %s", s->path, strerror(errno));
				conn_stream_close(a, s);
				s = NULL;
			} else {
				proto_put_data_frame(&a->conn.out, PT_FILE_DATA, n == 0 ? PROTO_FLAG_EOF : 0, s->id, buf,
						     (size_t)n);
				s->send_window -= (uint64_t)n;
				s->bytes += (uint64_t)n;
				if (n == 0) {
					conn_stream_close(a, s);
					s = NULL;
				}
			}
			sent = 1;
		}
	}
	return sent;
}

/* mkdir -p of path's parent directory. */
static int make_parents(const char *path)
{
	char *copy = strdup(path), *dir;
	int e = 0;

	if (!copy)
		return -ENOMEM;
	dir = dirname(copy);
	for (char *p = dir + 1; e == 0; p++) {
		char c = *p;

		if (c != '/' && c != 0)
			continue;
		*p = 0;
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			e = -errno;
		*p = c;
		if (!c)
			break;
	}
	free(copy);
	return e;
}

void file_write_start(struct agent *a, uint32_t id, const uint8_t *payload, size_t len)
{
	struct file_req r;
	struct stream *s;
	struct stat st;
	char *tmp, *slash;
	size_t start;
	int fd, e;

	if (file_req_parse(a, id, "FILE_WRITE", payload, len, &r) < 0)
		return;
	if (stat(r.path, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* renaming a file over a device node or a FIFO would replace it, not write to it */
		e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		conn_reply_error(a, id, e, r.path, "write %s: %s", r.path,
				 e == EISDIR ? strerror(e) : "not a regular file");
		free(r.path);
		return;
	}
	if (r.mkdirs && (e = make_parents(r.path)) < 0) {
		conn_reply_error(a, id, -e, r.path, "write %s: creating its directory: %s", r.path, strerror(-e));
		free(r.path);
		return;
	}
	slash = strrchr(r.path, '/');
	if (asprintf(&tmp, "%.*s/.%s.smol-XXXXXX", (int)(slash - r.path), r.path, slash + 1) < 0) {
		conn_reply_error(a, id, ENOMEM, r.path, "out of memory");
		free(r.path);
		return;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		conn_reply_error(a, id, e, r.path, "write %s: %s", r.path, strerror(e));
		free(tmp);
		free(r.path);
		return;
	}
	s = conn_stream_new(a, id, STREAM_WRITE);
	if (!s) {
		close(fd);
		unlink(tmp);
		free(tmp);
		free(r.path);
		return;
	}
	s->fd = fd;
	s->path = r.path;
	s->tmp_path = tmp;
	s->mode = (unsigned)r.mode;
	start = proto_frame_begin(&a->conn.out, PT_OK, 0, id);
	proto_put_u64(&a->conn.out, F_WINDOW, PROTO_WINDOW);
	proto_frame_end(&a->conn.out, start);
}

void file_write_data(struct agent *a, struct stream *s, const uint8_t *data, size_t len, int eof)
{
	size_t start;
	int e = -file_write_all(s->fd, data, len);

	if (e) {
		conn_reply_error(a, s->id, e, s->path, "write %s: %s", s->path, strerror(e));
		conn_stream_close(a, s);
		return;
	}
	s->bytes += len;
	if (!eof) {
		if (len) {	/* written: the host may send as much again */
			start = proto_frame_begin(&a->conn.out, PT_WINDOW, 0, s->id);
			proto_put_u64(&a->conn.out, F_WINDOW, len);
			proto_frame_end(&a->conn.out, start);
			s->recv_window += len;
		}
		return;
	}
	e = fchmod(s->fd, s->mode) < 0 ? errno : 0;
	if (close(s->fd) < 0 && !e)
		e = errno;
	s->fd = -1;
	if (!e && rename(s->tmp_path, s->path) < 0)
		e = errno;
	if (e) {
		conn_reply_error(a, s->id, e, s->path, "write %s: %s", s->path, strerror(e));
		conn_stream_close(a, s);
		return;
	}
	free(s->tmp_path);
	s->tmp_path = NULL;
	start = proto_frame_begin(&a->conn.out, PT_OK, 0, s->id);
	proto_put_u64(&a->conn.out, F_SIZE, s->bytes);
	proto_frame_end(&a->conn.out, start);
	conn_stream_close(a, s);
}

void file_abort(struct stream *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	if (s->tmp_path)
		unlink(s->tmp_path);
}
