/* The little-endian cursor (le_codec.h). */
#include "le_codec.h"

#include <stdio.h>
#include <string.h>

void le_writer_init(struct le_writer *w, void *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap;
	w->len = 0;
	w->overflow = 0;
}

uint8_t *le_put_space(struct le_writer *w, size_t n)
{
	uint8_t *p;

	if (w->overflow || n > w->cap - w->len) {
		w->overflow = 1;
		return NULL;
	}
	p = w->buf + w->len;
	w->len += n;
	return p;
}

void le_put_u8(struct le_writer *w, uint8_t v)
{
	uint8_t *p = le_put_space(w, 1);

	if (p)
		*p = v;
}

void le_put_u16(struct le_writer *w, uint16_t v)
{
	uint8_t *p = le_put_space(w, 2);

	if (p)
		le_store16(p, v);
}

void le_put_u32(struct le_writer *w, uint32_t v)
{
	uint8_t *p = le_put_space(w, 4);

	if (p)
		le_store32(p, v);
}

void le_put_u64(struct le_writer *w, uint64_t v)
{
	uint8_t *p = le_put_space(w, 8);

	if (p)
		le_store64(p, v);
}

void le_put_bytes(struct le_writer *w, const void *src, size_t n)
{
	uint8_t *p = le_put_space(w, n);

	if (p && n)
		memcpy(p, src, n);
}

void le_put_zeros(struct le_writer *w, size_t n)
{
	uint8_t *p = le_put_space(w, n);

	if (p && n)
		memset(p, 0, n);
}

void le_reader_init(struct le_reader *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->at = 0;
	r->truncated = 0;
	r->error = NULL;
}

int le_fail(struct le_reader *r, const char *why)
{
	if (!r->error && !r->truncated)
		r->error = why;
	return -1;
}

const uint8_t *le_get_span(struct le_reader *r, size_t n)
{
	const uint8_t *p;

	if (r->error || r->truncated)
		return NULL;
	if (n > r->len - r->at) {
		r->truncated = 1;
		r->at = r->len;
		return NULL;
	}
	p = r->p + r->at;
	r->at += n;
	return p;
}

uint8_t le_get_u8(struct le_reader *r)
{
	const uint8_t *p = le_get_span(r, 1);

	return p ? *p : 0;
}

uint16_t le_get_u16(struct le_reader *r)
{
	const uint8_t *p = le_get_span(r, 2);

	return p ? le_load16(p) : 0;
}

uint32_t le_get_u32(struct le_reader *r)
{
	const uint8_t *p = le_get_span(r, 4);

	return p ? le_load32(p) : 0;
}

uint64_t le_get_u64(struct le_reader *r)
{
	const uint8_t *p = le_get_span(r, 8);

	return p ? le_load64(p) : 0;
}

void le_get_bytes(struct le_reader *r, void *dst, size_t n)
{
	const uint8_t *p = le_get_span(r, n);

	if (p)
		memcpy(dst, p, n);
	else if (n)
		memset(dst, 0, n);
}

void le_get_zeros(struct le_reader *r, size_t n, const char *what)
{
	const uint8_t *p = le_get_span(r, n);

	for (size_t i = 0; p && i < n; i++)
		if (p[i]) {
			le_fail(r, what);
			return;
		}
}

size_t le_remaining(const struct le_reader *r)
{
	return r->len - r->at;
}

const char *le_finish(struct le_reader *r)
{
	static __thread char msg[64];

	if (r->error)
		return r->error;
	if (r->truncated) {
		snprintf(msg, sizeof(msg), "%zu bytes is too short", r->len);
		return msg;
	}
	if (r->at != r->len) {
		snprintf(msg, sizeof(msg), "%zu bytes left over after %zu", r->len - r->at, r->at);
		return msg;
	}
	return NULL;
}
