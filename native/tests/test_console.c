/*
 * The console's output ring and its slow-reader policy: a writer waits for a reader that reads, nothing is dropped;
 * a reader that stalls loses output, said by a marker, and the writer never waits long for it.
 */
#define _GNU_SOURCE
#include "test.h"
#include "console.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

TEST(byte_ring_keeps_order_across_the_end_of_its_buffer)
{
	struct byte_ring r;
	uint8_t out[8];

	REQUIRE(byte_ring_init(&r, 8) == 0);
	CHECK_EQ_INT(byte_ring_put(&r, (const uint8_t *)"abcdef", 6), 6);
	CHECK_EQ_INT(byte_ring_get(&r, out, 4), 4);
	CHECK(memcmp(out, "abcd", 4) == 0);
	CHECK_EQ_INT(byte_ring_put(&r, (const uint8_t *)"ghijk", 5), 5);	/* tail wraps to the start */
	CHECK_EQ_INT(byte_ring_get(&r, out, 8), 7);				/* head wraps too */
	CHECK(memcmp(out, "efghijk", 7) == 0);
	CHECK_EQ_INT(byte_ring_get(&r, out, 8), 0);
	byte_ring_free(&r);
}

TEST(byte_ring_accepts_only_what_fits)
{
	struct byte_ring r;
	uint8_t out[8];

	REQUIRE(byte_ring_init(&r, 8) == 0);
	CHECK_EQ_INT(byte_ring_put(&r, (const uint8_t *)"0123456789", 10), 8);
	CHECK_EQ_INT(byte_ring_put(&r, (const uint8_t *)"x", 1), 0);
	CHECK_EQ_INT(byte_ring_get(&r, out, 8), 8);
	CHECK(memcmp(out, "01234567", 8) == 0);
	byte_ring_free(&r);
}

static void count_notification(void *opaque)
{
	atomic_fetch_add((atomic_int *)opaque, 1);
}

TEST(reader_is_notified_once_until_it_drains_the_output)
{
	struct console con;
	atomic_int notified = 0;
	uint8_t buf[8];

	REQUIRE(console_init(&con, 0, count_notification, &notified) == 0);
	console_out_put(&con, 'a');
	console_out_put(&con, 'b');
	console_out_put(&con, 'c');
	CHECK_EQ_INT(notified, 1);
	CHECK_EQ_INT(console_out_read(&con, buf, 1), 1);	/* partly drained: still nothing new to say */
	console_out_put(&con, 'd');
	CHECK_EQ_INT(notified, 1);
	CHECK_EQ_INT(console_out_read(&con, buf, sizeof(buf)), 3);
	CHECK(memcmp(buf, "bcd", 3) == 0);
	console_out_put(&con, 'e');
	CHECK_EQ_INT(notified, 2);
	console_exit(&con);
}

struct writer {
	struct console *con;
	pthread_t thread;
	atomic_int done;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	console_out_put(w->con, '!');
	atomic_store(&w->done, 1);
	return NULL;
}

/* Fills the output ring to the limit and starts a writer thread for one more byte. */
static int start_blocked_writer(struct console *con, struct writer *w)
{
	for (unsigned i = 0; i < CONSOLE_OUT_LIMIT; i++)
		console_out_put(con, (uint8_t)i);
	w->con = con;
	atomic_store(&w->done, 0);
	if (pthread_create(&w->thread, NULL, writer_main, w))
		return -1;
	usleep(100 * 1000);
	return 0;
}

/* Joins the writer within a few seconds; calls `nudge` (if any) meanwhile. Returns 0 when it ended. */
static int join_writer(struct writer *w, void (*nudge)(struct console *))
{
	for (int i = 0; i < 500; i++) {
		struct timespec ts;

		if (nudge)
			nudge(w->con);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_timedjoin_np(w->thread, NULL, &ts) == 0)
			return 0;
	}
	return -1;
}

TEST(writer_blocked_by_a_full_ring_resumes_when_the_reader_drains)
{
	static uint8_t buf[CONSOLE_OUT_LIMIT + 1];
	struct console con;
	struct writer w;
	size_t n;

	REQUIRE(console_init(&con, 0, NULL, NULL) == 0);
	con.stall_ms = 60 * 1000;	/* the reader here reads, late: never taken for stalled */
	REQUIRE(start_blocked_writer(&con, &w) == 0);
	CHECK_EQ_INT(atomic_load(&w.done), 0);			/* waiting, not dropping */
	CHECK_EQ_INT(console_out_pending(&con), CONSOLE_OUT_LIMIT);
	CHECK_EQ_INT(console_out_read(&con, buf, 4096), 4096);
	if (join_writer(&w, NULL) < 0) {
		test_fail(__FILE__, __LINE__, "the writer is still blocked after the reader drained 4096 bytes");
		console_release(&con);
		pthread_join(w.thread, NULL);
	}
	CHECK_EQ_INT(con.out_total, CONSOLE_OUT_LIMIT + 1);
	CHECK_EQ_INT(con.out_dropped, 0);
	n = console_out_read(&con, buf, sizeof(buf));
	CHECK_EQ_INT(n, CONSOLE_OUT_LIMIT - 4096 + 1);
	CHECK(n > 0 && buf[n - 1] == '!');
	console_exit(&con);
}

TEST(console_release_wakes_a_blocked_writer_which_keeps_its_byte)
{
	struct console con;
	struct writer w;

	REQUIRE(console_init(&con, 0, NULL, NULL) == 0);
	con.stall_ms = 60 * 1000;
	REQUIRE(start_blocked_writer(&con, &w) == 0);
	CHECK_EQ_INT(atomic_load(&w.done), 0);
	/* Released repeatedly, in case the writer had not reached its wait when the first release came. */
	if (join_writer(&w, console_release) < 0) {
		test_fail(__FILE__, __LINE__, "console_release did not wake the writer");
		return;	/* the writer is stuck; the child process ends with it */
	}
	CHECK_EQ_INT(con.out_total, CONSOLE_OUT_LIMIT + 1);
	CHECK_EQ_INT(con.out_dropped, 0);
	CHECK_EQ_INT(console_out_pending(&con), CONSOLE_OUT_LIMIT + 1);
	console_exit(&con);
}

TEST(stalled_reader_loses_output_for_a_marker_and_the_writer_goes_on)
{
	static uint8_t buf[CONSOLE_OUT_LIMIT + CONSOLE_OUT_RESERVE];
	static const char marker[] = "\r\n[smol: 1002 bytes dropped: the console's reader fell behind]\r\n";
	struct console con;
	size_t n;

	REQUIRE(console_init(&con, 0, NULL, NULL) == 0);
	con.stall_ms = 20;
	for (unsigned i = 0; i < CONSOLE_OUT_LIMIT; i++)
		console_out_put(&con, 'x');
	console_out_put(&con, '!');	/* waits 20 ms for a read that does not come, then drops */
	CHECK_EQ_INT(con.dropping, 1);
	for (int i = 0; i < 1000; i++)
		console_out_put(&con, '?');	/* no more waiting while the reader is stalled */
	CHECK_EQ_INT(con.out_dropped, 1001);
	CHECK_EQ_INT(console_out_read(&con, buf, CONSOLE_OUT_LIMIT / 4), CONSOLE_OUT_LIMIT / 4);
	console_out_put(&con, '?');	/* read, but not yet down to half the limit: still dropping */
	CHECK_EQ_INT(con.out_dropped, 1002);
	CHECK_EQ_INT(console_out_read(&con, buf, CONSOLE_OUT_LIMIT / 2), CONSOLE_OUT_LIMIT / 2);
	console_out_put(&con, 'y');	/* the marker first, then the byte */
	n = console_out_read(&con, buf, sizeof(buf));
	REQUIRE(n == CONSOLE_OUT_LIMIT / 4 + strlen(marker) + 1);
	CHECK(buf[CONSOLE_OUT_LIMIT / 4 - 1] == 'x');
	buf[n] = 0;
	CHECK(strncmp((const char *)buf + CONSOLE_OUT_LIMIT / 4, marker, strlen(marker)) == 0);
	CHECK(buf[n - 1] == 'y');
	CHECK_EQ_INT(con.gaps, 1);
	console_exit(&con);
}

TEST(console_input_accepts_up_to_its_limit_and_says_how_much)
{
	static uint8_t data[CONSOLE_IN_LIMIT + 10];
	struct console con;
	uint8_t out[4];

	REQUIRE(console_init(&con, 0, NULL, NULL) == 0);
	data[0] = 'q';
	CHECK_EQ_INT(console_in_write(&con, data, sizeof(data)), CONSOLE_IN_LIMIT);
	CHECK_EQ_INT(console_in_write(&con, data, 1), 0);
	CHECK_EQ_INT(console_in_take(&con, out, sizeof(out)), sizeof(out));
	CHECK_EQ_INT(out[0], 'q');
	CHECK_EQ_INT(console_in_write(&con, data, 10), sizeof(out));
	console_exit(&con);
}
