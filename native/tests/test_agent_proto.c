/* The guest agent's frame codec and parser (native/agent/proto.c), fed well-formed and hostile bytes. */
#include "test.h"
#include "proto.h"

#include <errno.h>
#include <stdlib.h>

/* Builds EXEC id 7 with argv "sh" "-c" and a timeout. */
static void build_exec(struct proto_buf *b)
{
	size_t start = proto_frame_begin(b, PT_EXEC, 0, 7);

	proto_put_str(b, F_ARGV, "sh");
	proto_put_str(b, F_ARGV, "-c");
	proto_put_u64(b, F_TIMEOUT_MS, 1500);
	proto_frame_end(b, start);
}

TEST(agent_frame_round_trips_through_the_parser_byte_by_byte)
{
	struct proto_buf b = { 0 };
	struct proto_parser p;
	struct proto_header h;
	struct proto_reader r;
	struct proto_field f;
	const uint8_t *payload;
	uint64_t v;
	char *s;
	int frames = 0;

	build_exec(&b);
	proto_put_data_frame(&b, PT_STDIN, PROTO_FLAG_EOF, 7, "abc", 3);
	REQUIRE(!b.failed);
	REQUIRE(proto_parser_init(&p) == 0);
	for (size_t i = 0; i < b.len; i++) {
		size_t avail;
		uint8_t *space = proto_parser_space(&p, &avail);

		REQUIRE(avail >= 1);
		space[0] = b.data[i];
		proto_parser_commit(&p, 1);
		while (proto_parser_next(&p, &h, &payload) == 1) {
			frames++;
			if (frames == 1) {
				CHECK_EQ_INT(h.type, PT_EXEC);
				CHECK_EQ_INT(h.id, 7);
				proto_reader_init(&r, payload, h.len);
				REQUIRE(proto_field_next(&r, &f) == 1);
				CHECK_EQ_INT(f.tag, F_ARGV);
				REQUIRE(proto_field_str(&f, &s) == 0);
				CHECK(strcmp(s, "sh") == 0);
				free(s);
				REQUIRE(proto_field_next(&r, &f) == 1);
				REQUIRE(proto_field_next(&r, &f) == 1);
				CHECK_EQ_INT(f.tag, F_TIMEOUT_MS);
				REQUIRE(proto_field_u64(&f, &v) == 0);
				CHECK_EQ_INT(v, 1500);
				CHECK_EQ_INT(proto_field_next(&r, &f), 0);
			} else {
				CHECK_EQ_INT(h.type, PT_STDIN);
				CHECK_EQ_INT(h.flags, PROTO_FLAG_EOF);
				CHECK_EQ_INT(h.len, 3);
				CHECK(memcmp(payload, "abc", 3) == 0);
			}
		}
	}
	CHECK_EQ_INT(frames, 2);
	CHECK_EQ_INT(proto_parser_pending(&p), 0);
	proto_parser_free(&p);
	proto_buf_free(&b);
}

TEST(agent_parser_refuses_an_absurd_length_before_buffering_it)
{
	uint8_t head[PROTO_HEADER_SIZE];
	struct proto_header h = { .len = 0xffffffffu, .type = PT_EXEC, .id = 1 }, out;
	struct proto_parser p;
	const uint8_t *payload;
	size_t avail;

	proto_header_encode(head, &h);
	CHECK_EQ_INT(proto_header_decode(head, &out), -EMSGSIZE);
	h.len = PROTO_MAX_PAYLOAD + 1;
	proto_header_encode(head, &h);
	REQUIRE(proto_parser_init(&p) == 0);
	memcpy(proto_parser_space(&p, &avail), head, sizeof(head));
	proto_parser_commit(&p, sizeof(head));
	CHECK_EQ_INT(proto_parser_next(&p, &out, &payload), -EMSGSIZE);
	/* exactly the limit is fine: it waits for the payload */
	h.len = PROTO_MAX_PAYLOAD;
	proto_header_encode(head, &h);
	proto_parser_reset(&p);
	memcpy(proto_parser_space(&p, &avail), head, sizeof(head));
	proto_parser_commit(&p, sizeof(head));
	CHECK_EQ_INT(proto_parser_next(&p, &out, &payload), 0);
	/* and the buffer has room for all of it */
	proto_parser_space(&p, &avail);
	CHECK_EQ_INT(avail, PROTO_MAX_PAYLOAD);
	proto_parser_free(&p);
}

TEST(agent_parser_reports_a_truncated_frame_as_pending)
{
	struct proto_buf b = { 0 };
	struct proto_parser p;
	struct proto_header h;
	const uint8_t *payload;
	size_t avail;

	build_exec(&b);
	REQUIRE(proto_parser_init(&p) == 0);
	memcpy(proto_parser_space(&p, &avail), b.data, b.len - 1);
	proto_parser_commit(&p, b.len - 1);
	CHECK_EQ_INT(proto_parser_next(&p, &h, &payload), 0);
	CHECK_EQ_INT(proto_parser_pending(&p), b.len - 1);
	proto_parser_free(&p);
	proto_buf_free(&b);
}

TEST(agent_fields_that_overrun_or_lie_about_their_size_are_refused)
{
	uint8_t overrun[10] = { F_ARGV, 0, 0xe8, 0x03, 0, 0 };	/* claims 1000 bytes */
	uint8_t cut[4] = { F_ARGV, 0, 1, 0 };			/* a field header cut short */
	uint8_t u32[10] = { F_TIMEOUT_MS, 0, 4, 0, 0, 0, 1, 2, 3, 4 };
	uint8_t nul[9] = { F_PATH, 0, 3, 0, 0, 0, 'a', 0, 'b' };
	struct proto_reader r;
	struct proto_field f;
	uint64_t v;
	char *s = NULL;

	proto_reader_init(&r, overrun, sizeof(overrun));
	CHECK_EQ_INT(proto_field_next(&r, &f), -EBADMSG);
	CHECK_EQ_INT(proto_field_next(&r, &f), 0);	/* and it stays at the end */
	proto_reader_init(&r, cut, sizeof(cut));
	CHECK_EQ_INT(proto_field_next(&r, &f), -EBADMSG);
	proto_reader_init(&r, u32, sizeof(u32));
	REQUIRE(proto_field_next(&r, &f) == 1);
	CHECK_EQ_INT(proto_field_u64(&f, &v), -EBADMSG);
	proto_reader_init(&r, nul, sizeof(nul));
	REQUIRE(proto_field_next(&r, &f) == 1);
	CHECK_EQ_INT(proto_field_str(&f, &s), -EBADMSG);
	CHECK(s == NULL);
}

TEST(agent_a_field_length_near_4GiB_does_not_wrap)
{
	uint8_t field[8] = { F_ARGV, 0, 0xfe, 0xff, 0xff, 0xff, 'x', 'y' };
	struct proto_reader r;
	struct proto_field f;

	proto_reader_init(&r, field, sizeof(field));
	CHECK_EQ_INT(proto_field_next(&r, &f), -EBADMSG);
}

TEST(agent_frame_types_are_named_and_unknown_ones_are_not)
{
	CHECK(strcmp(proto_type_name(PT_FILE_WRITE), "FILE_WRITE") == 0);
	CHECK(proto_type_name(0x7777) == NULL);
	CHECK(proto_type_name(0) == NULL);
	CHECK(proto_type_is_data(PT_STDOUT));
	CHECK(proto_type_is_data(PT_FILE_DATA));
	CHECK(!proto_type_is_data(PT_EXEC));
	CHECK(strcmp(proto_errname(ENOENT), "ENOENT") == 0);
	CHECK(strcmp(proto_errname(4095), "E4095") == 0);
}

TEST(agent_resize_is_a_control_frame_whose_rows_and_cols_round_trip)
{
	struct proto_buf b = { 0 };
	struct proto_parser p;
	struct proto_header h;
	struct proto_reader r;
	struct proto_field f;
	const uint8_t *payload;
	uint64_t rows = 0, cols = 0;
	size_t start, avail;
	uint8_t *space;

	start = proto_frame_begin(&b, PT_RESIZE, 0, 9);
	proto_put_u64(&b, F_ROWS, 50);
	proto_put_u64(&b, F_COLS, PROTO_TTY_MAX);
	proto_frame_end(&b, start);
	CHECK(!b.failed);
	CHECK_EQ_INT(proto_parser_init(&p), 0);
	space = proto_parser_space(&p, &avail);
	CHECK(avail >= b.len);
	memcpy(space, b.data, b.len);
	proto_parser_commit(&p, b.len);
	CHECK_EQ_INT(proto_parser_next(&p, &h, &payload), 1);
	CHECK_EQ_INT(h.type, PT_RESIZE);
	CHECK_EQ_INT(h.id, 9);
	proto_reader_init(&r, payload, h.len);
	while (proto_field_next(&r, &f) > 0) {
		if (f.tag == F_ROWS)
			CHECK_EQ_INT(proto_field_u64(&f, &rows), 0);
		if (f.tag == F_COLS)
			CHECK_EQ_INT(proto_field_u64(&f, &cols), 0);
	}
	CHECK_EQ_INT(rows, 50);
	CHECK_EQ_INT(cols, 1000);
	CHECK(strcmp(proto_type_name(PT_RESIZE), "RESIZE") == 0);
	CHECK(!proto_type_is_data(PT_RESIZE));
	CHECK(strcmp(proto_errname(ENOTTY), "ENOTTY") == 0);
	proto_parser_free(&p);
	proto_buf_free(&b);
}

TEST(agent_buffer_consumes_sent_bytes_and_keeps_the_rest)
{
	struct proto_buf b = { 0 };
	uint8_t *p = proto_buf_grow(&b, 10000);

	REQUIRE(p);
	for (int i = 0; i < 10000; i++)
		p[i] = (uint8_t)i;
	proto_buf_consume(&b, 9000);
	CHECK_EQ_INT(b.len, 1000);
	CHECK_EQ_INT(b.data[0], (uint8_t)9000);
	proto_buf_consume(&b, 5000);
	CHECK_EQ_INT(b.len, 0);
	proto_buf_free(&b);
}
