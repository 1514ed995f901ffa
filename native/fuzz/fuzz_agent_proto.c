/*
 * libFuzzer target for the guest agent's decoder of what the host sends (agent/proto.c; docs/agent.md, "Hostile or
 * broken frames"): the input's first byte sets how many bytes each read() delivers (1 to 256), the rest is the byte
 * stream. It goes through the parser as the agent's loop feeds it, and every frame's TLV fields are walked and read
 * as integers and strings. Checked: a header over PROTO_MAX_PAYLOAD is refused from the header alone (and nothing
 * after it is parsed); every frame and field lies inside what was received; the parser's buffer never grows past
 * one maximal frame; a u64 is read only from 8 bytes, a string only without NUL; and the frames are the same
 * however the stream is cut into reads (checked against a one-read parse). A broken check aborts (a crash input).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define CHECK(cond)                                                                                                 \
	do {                                                                                                        \
		if (!(cond)) {                                                                                      \
			fprintf(stderr, "invariant broken: %s (%s:%d)\n", #cond, __FILE__, __LINE__);              \
			abort();                                                                                    \
		}                                                                                                   \
	} while (0)

/* What a parse saw, to compare the cut-up parse with the whole one. */
struct seen {
	uint64_t frames, fields, digest;
	int refused;
};

static void mix(struct seen *s, uint64_t v)
{
	s->digest = (s->digest ^ v) * 0x100000001b3ull;
}

static void walk_fields(struct seen *s, const uint8_t *payload, uint32_t len)
{
	struct proto_reader r;
	struct proto_field f;
	int rc;

	proto_reader_init(&r, payload, len);
	while ((rc = proto_field_next(&r, &f)) == 1) {
		CHECK(f.val >= payload && f.val + f.len <= payload + len);
		s->fields++;
		mix(s, f.tag);
		mix(s, f.len);
		uint64_t v;
		int u = proto_field_u64(&f, &v);
		CHECK(u == 0 ? f.len == 8 : u == -EBADMSG && f.len != 8);
		char *str = NULL;
		int st = proto_field_str(&f, &str);
		if (st == 0) {
			CHECK(strlen(str) == f.len);
			free(str);
		} else {
			CHECK(st == -EBADMSG && memchr(f.val, 0, f.len) != NULL);
		}
	}
	CHECK(rc == 0 || rc == -EBADMSG);
}

/* Feeds `data` in reads of `step` bytes (all at once when 0) and parses as the agent does. */
static void parse(struct proto_parser *p, const uint8_t *data, size_t size, size_t step, struct seen *s)
{
	size_t at = 0;

	memset(s, 0, sizeof(*s));
	proto_parser_reset(p);
	while (at < size && !s->refused) {
		size_t avail;
		uint8_t *space = proto_parser_space(p, &avail);
		CHECK(p->cap == PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD);
		if (avail == 0)
			break; /* a whole maximal frame is buffered: next() takes it below */
		size_t n = size - at;
		if (step && n > step)
			n = step;
		if (n > avail)
			n = avail;
		memcpy(space, data + at, n);
		proto_parser_commit(p, n);
		at += n;
		for (;;) {
			struct proto_header h;
			const uint8_t *payload;
			int rc = proto_parser_next(p, &h, &payload);
			if (rc == 0)
				break;
			if (rc < 0) {
				CHECK(rc == -EMSGSIZE);
				s->refused = 1;
				break;
			}
			CHECK(h.len <= PROTO_MAX_PAYLOAD);
			CHECK(payload >= p->buf && payload + h.len <= p->buf + p->len);
			s->frames++;
			mix(s, h.type);
			mix(s, h.flags);
			mix(s, h.id);
			mix(s, h.len);
			if (!proto_type_is_data(h.type))
				walk_fields(s, payload, h.len);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct proto_parser parser;
	static int ready;

	if (!ready) {
		CHECK(proto_parser_init(&parser) == 0);
		ready = 1;
	}
	if (size < 1)
		return 0;
	size_t step = 1 + data[0];
	struct seen cut, whole;
	parse(&parser, data + 1, size - 1, step, &cut);
	parse(&parser, data + 1, size - 1, 0, &whole);
	CHECK(cut.refused == whole.refused);
	CHECK(cut.frames == whole.frames && cut.fields == whole.fields && cut.digest == whole.digest);
	return 0;
}
