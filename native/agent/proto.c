/* The agent's frame codec and parser (proto.h, docs/agent.md). Every length read from the wire is checked here. */
#include "proto.h"
#include "le_codec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int proto_header_decode(const uint8_t *buf, struct proto_header *h)
{
	struct le_reader r;

	le_reader_init(&r, buf, PROTO_HEADER_SIZE);
	h->len = le_get_u32(&r);
	h->type = le_get_u16(&r);
	h->flags = le_get_u16(&r);
	h->id = le_get_u32(&r);
	return h->len > PROTO_MAX_PAYLOAD ? -EMSGSIZE : 0;
}

void proto_header_encode(uint8_t *buf, const struct proto_header *h)
{
	struct le_writer w;

	le_writer_init(&w, buf, PROTO_HEADER_SIZE);
	le_put_u32(&w, h->len);
	le_put_u16(&w, h->type);
	le_put_u16(&w, h->flags);
	le_put_u32(&w, h->id);
}

int proto_type_is_data(uint16_t type)
{
	return type == PT_STDIN || type == PT_STDOUT || type == PT_STDERR || type == PT_FILE_DATA;
}

const char *proto_type_name(uint16_t type)
{
	switch (type) {
	case PT_HELLO: return "HELLO";
	case PT_OK: return "OK";
	case PT_ERROR: return "ERROR";
	case PT_WINDOW: return "WINDOW";
	case PT_EXEC: return "EXEC";
	case PT_STDIN: return "STDIN";
	case PT_KILL: return "KILL";
	case PT_STARTED: return "STARTED";
	case PT_STDOUT: return "STDOUT";
	case PT_STDERR: return "STDERR";
	case PT_EXIT: return "EXIT";
	case PT_RESIZE: return "RESIZE";
	case PT_FILE_READ: return "FILE_READ";
	case PT_FILE_WRITE: return "FILE_WRITE";
	case PT_FILE_DATA: return "FILE_DATA";
	case PT_INIT: return "INIT";
	case PT_REMINT: return "REMINT";
	case PT_POWEROFF: return "POWEROFF";
	}
	return NULL;
}

void proto_reader_init(struct proto_reader *r, const uint8_t *payload, size_t len)
{
	r->p = payload;
	r->left = len;
}

int proto_field_next(struct proto_reader *r, struct proto_field *f)
{
	struct le_reader in;

	if (!r->left)
		return 0;
	le_reader_init(&in, r->p, r->left);
	f->tag = le_get_u16(&in);
	f->len = le_get_u32(&in);
	f->val = le_get_span(&in, f->len);
	if (!f->val) {
		r->left = 0;
		return -EBADMSG;
	}
	r->p += in.at;
	r->left -= in.at;
	return 1;
}

int proto_field_u64(const struct proto_field *f, uint64_t *out)
{
	if (f->len != 8)
		return -EBADMSG;
	*out = le_load64(f->val);
	return 0;
}

int proto_field_str(const struct proto_field *f, char **out)
{
	char *s;

	if (memchr(f->val, 0, f->len))
		return -EBADMSG;
	s = malloc((size_t)f->len + 1);
	if (!s)
		return -ENOMEM;
	memcpy(s, f->val, f->len);
	s[f->len] = 0;
	*out = s;
	return 0;
}

void proto_buf_free(struct proto_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

uint8_t *proto_buf_grow(struct proto_buf *b, size_t len)
{
	uint8_t *p;

	if (b->failed)
		return NULL;
	if (b->cap - b->len < len) {
		size_t cap = b->cap ? b->cap : 4096;

		while (cap - b->len < len)
			cap *= 2;
		p = realloc(b->data, cap);
		if (!p) {
			b->failed = 1;
			return NULL;
		}
		b->data = p;
		b->cap = cap;
	}
	p = b->data + b->len;
	b->len += len;
	return p;
}

void proto_buf_consume(struct proto_buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

size_t proto_frame_begin(struct proto_buf *b, uint16_t type, uint16_t flags, uint32_t id)
{
	struct proto_header h = { .len = 0, .type = type, .flags = flags, .id = id };
	size_t start = b->len;
	uint8_t *p = proto_buf_grow(b, PROTO_HEADER_SIZE);

	if (p)
		proto_header_encode(p, &h);
	return start;
}

void proto_put_bytes(struct proto_buf *b, uint16_t tag, const void *v, size_t len)
{
	uint8_t *p = proto_buf_grow(b, 6 + len);
	struct le_writer w;

	if (!p)
		return;
	le_writer_init(&w, p, 6 + len);
	le_put_u16(&w, tag);
	le_put_u32(&w, (uint32_t)len);
	le_put_bytes(&w, v, len);
}

void proto_put_u64(struct proto_buf *b, uint16_t tag, uint64_t v)
{
	uint8_t le[8];

	le_store64(le, v);
	proto_put_bytes(b, tag, le, 8);
}

void proto_put_str(struct proto_buf *b, uint16_t tag, const char *s)
{
	proto_put_bytes(b, tag, s, strlen(s));
}

void proto_frame_end(struct proto_buf *b, size_t start)
{
	if (!b->failed)
		le_store32(b->data + start, (uint32_t)(b->len - start - PROTO_HEADER_SIZE));
}

void proto_put_data_frame(struct proto_buf *b, uint16_t type, uint16_t flags, uint32_t id, const void *data,
			  size_t len)
{
	struct proto_header h = { .len = (uint32_t)len, .type = type, .flags = flags, .id = id };
	uint8_t *p = proto_buf_grow(b, PROTO_HEADER_SIZE + len);

	if (!p)
		return;
	proto_header_encode(p, &h);
	if (len)
		memcpy(p + PROTO_HEADER_SIZE, data, len);
}

int proto_parser_init(struct proto_parser *p)
{
	memset(p, 0, sizeof(*p));
	p->cap = PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD;
	p->buf = malloc(p->cap);
	return p->buf ? 0 : -ENOMEM;
}

void proto_parser_free(struct proto_parser *p)
{
	free(p->buf);
	memset(p, 0, sizeof(*p));
}

void proto_parser_reset(struct proto_parser *p)
{
	p->len = p->off = 0;
}

uint8_t *proto_parser_space(struct proto_parser *p, size_t *avail)
{
	if (p->off) {	/* move the unparsed rest to the front */
		memmove(p->buf, p->buf + p->off, p->len - p->off);
		p->len -= p->off;
		p->off = 0;
	}
	*avail = p->cap - p->len;
	return p->buf + p->len;
}

void proto_parser_commit(struct proto_parser *p, size_t n)
{
	p->len += n;
}

int proto_parser_next(struct proto_parser *p, struct proto_header *h, const uint8_t **payload)
{
	size_t have = p->len - p->off;

	if (have < PROTO_HEADER_SIZE)
		return 0;
	if (proto_header_decode(p->buf + p->off, h) < 0)
		return -EMSGSIZE;
	if (have - PROTO_HEADER_SIZE < h->len)
		return 0;
	*payload = p->buf + p->off + PROTO_HEADER_SIZE;
	p->off += PROTO_HEADER_SIZE + h->len;
	return 1;
}

size_t proto_parser_pending(const struct proto_parser *p)
{
	return p->len - p->off;
}

const char *proto_errname(int err)
{
	static char other[16];

	switch (err) {
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ESRCH: return "ESRCH";
	case EINTR: return "EINTR";
	case EIO: return "EIO";
	case E2BIG: return "E2BIG";
	case ENOEXEC: return "ENOEXEC";
	case EBADF: return "EBADF";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EINVAL: return "EINVAL";
	case EMFILE: return "EMFILE";
	case ENFILE: return "ENFILE";
	case ENOTTY: return "ENOTTY";
	case ETXTBSY: return "ETXTBSY";
	case EFBIG: return "EFBIG";
	case ENOSPC: return "ENOSPC";
	case EROFS: return "EROFS";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	case ELOOP: return "ELOOP";
	case ENOTEMPTY: return "ENOTEMPTY";
	case EBADMSG: return "EBADMSG";
	case EPROTO: return "EPROTO";
	case EMSGSIZE: return "EMSGSIZE";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EDQUOT: return "EDQUOT";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECANCELED: return "ECANCELED";
	}
	snprintf(other, sizeof(other), "E%d", err);
	return other;
}
