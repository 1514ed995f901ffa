#include "console.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int byte_ring_init(struct byte_ring *r, size_t cap)
{
	r->buf = malloc(cap);
	r->cap = cap;
	r->head = r->len = 0;
	return r->buf ? 0 : -ENOMEM;
}

void byte_ring_free(struct byte_ring *r)
{
	free(r->buf);
	r->buf = NULL;
}

size_t byte_ring_put(struct byte_ring *r, const uint8_t *data, size_t len)
{
	size_t n = r->cap - r->len < len ? r->cap - r->len : len, tail = (r->head + r->len) % r->cap;
	size_t first = r->cap - tail < n ? r->cap - tail : n;

	memcpy(r->buf + tail, data, first);
	memcpy(r->buf, data + first, n - first);
	r->len += n;
	return n;
}

size_t byte_ring_get(struct byte_ring *r, uint8_t *out, size_t len)
{
	size_t n = r->len < len ? r->len : len, first = r->cap - r->head < n ? r->cap - r->head : n;

	memcpy(out, r->buf + r->head, first);
	memcpy(out + first, r->buf, n - first);
	r->head = (r->head + n) % r->cap;
	r->len -= n;
	return n;
}

int console_init(struct console *con, size_t out_limit, void (*on_output)(void *), void *opaque)
{
	pthread_condattr_t attr;

	memset(con, 0, sizeof(*con));
	con->out_limit = out_limit ? out_limit : CONSOLE_OUT_LIMIT;
	if (byte_ring_init(&con->out, con->out_limit + CONSOLE_OUT_RESERVE) < 0)
		return -ENOMEM;
	if (byte_ring_init(&con->in, CONSOLE_IN_LIMIT) < 0) {
		byte_ring_free(&con->out);
		return -ENOMEM;
	}
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);	/* a stalled reader's deadline ignores wall-clock steps */
	pthread_mutex_init(&con->lock, NULL);
	pthread_cond_init(&con->space, &attr);
	pthread_condattr_destroy(&attr);
	con->stall_ms = CONSOLE_STALL_MS;
	con->on_output = on_output;
	con->opaque = opaque;
	return 0;
}

void console_exit(struct console *con)
{
	byte_ring_free(&con->out);
	byte_ring_free(&con->in);
	pthread_cond_destroy(&con->space);
	pthread_mutex_destroy(&con->lock);
}

static uint64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Under the lock: ends a run of dropped output once the reader has drained the ring to half its limit. The marker
 * goes in where the dropped bytes would have been; it fits, since the ring holds the limit plus its reserve.
 */
static void gap_end_if_drained(struct console *con)
{
	char marker[CONSOLE_MARKER_MAX];
	int n;

	if (!con->dropping || con->out.len > con->out_limit / 2)
		return;
	n = snprintf(marker, sizeof(marker), "\r\n[smol: %llu bytes dropped: the console's reader fell behind]\r\n",
		     (unsigned long long)con->gap);
	byte_ring_put(&con->out, (const uint8_t *)marker, (size_t)n);
	con->dropping = 0;
	con->gap = 0;
	con->gaps++;
	con->full_since_ms = 0;
}

/*
 * Under the lock: waits while `need` more bytes do not fit under the limit. 1: they fit now; 0: the ring stayed
 * full for stall_ms with no read, so the reader is stalled and `dropping` is set; -1: the wait was cut short (a
 * pause, console_release, the VM stopping).
 */
static int wait_room(struct console *con, size_t need)
{
	unsigned gen = con->release_gen;

	while (con->out.len && con->out.len + need > con->out_limit) {
		uint64_t now = monotonic_ms(), deadline;
		struct timespec ts;

		if (gen != con->release_gen || con->closed || con->held)
			return -1;
		if (!con->full_since_ms)
			con->full_since_ms = now;
		deadline = con->full_since_ms + con->stall_ms;
		if (now >= deadline) {
			con->dropping = 1;
			return 0;
		}
		ts.tv_sec = (time_t)(deadline / 1000);
		ts.tv_nsec = (long)(deadline % 1000) * 1000000;
		pthread_cond_timedwait(&con->space, &con->lock, &ts);
	}
	return 1;
}

void console_out_put(struct console *con, uint8_t byte)
{
	int notify = 0;

	pthread_mutex_lock(&con->lock);
	gap_end_if_drained(con);
	if (!con->dropping)
		(void)wait_room(con, 1);	/* cut short: the byte goes into the reserve */
	if (con->dropping) {
		con->gap++;
		con->out_dropped++;
	} else if (byte_ring_put(&con->out, &byte, 1)) {
		con->out_total++;
	} else {
		con->out_dropped++;	/* only when more than the reserve was written across pauses */
	}
	if (!con->out_notified) {
		con->out_notified = 1;
		notify = 1;
	}
	pthread_mutex_unlock(&con->lock);
	if (notify && con->on_output)
		con->on_output(con->opaque);
}

size_t console_out_read(struct console *con, uint8_t *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(&con->lock);
	n = byte_ring_get(&con->out, buf, len);
	if (n)
		con->full_since_ms = 0;	/* the reader reads: a writer's wait for it starts again */
	if (con->out.len == 0)
		con->out_notified = 0;
	if (n)
		pthread_cond_broadcast(&con->space);
	if (con->space_wanted && con->out.len <= con->out_limit / 2) {
		con->space_wanted = 0;
		if (con->on_space)	/* under the lock, so the hook cannot be taken away meanwhile; it only wakes */
			con->on_space(con->space_opaque);
	}
	pthread_mutex_unlock(&con->lock);
	return n;
}

int console_out_offer(struct console *con, const uint8_t *data, size_t len)
{
	int notify = 0;
	size_t n;

	pthread_mutex_lock(&con->lock);
	gap_end_if_drained(con);
	if (!con->dropping && wait_room(con, len) < 0) {
		con->space_wanted = 1;
		pthread_mutex_unlock(&con->lock);
		return 0;
	}
	if (con->dropping) {
		con->gap += len;
		con->out_dropped += len;
		pthread_mutex_unlock(&con->lock);
		return 1;
	}
	n = byte_ring_put(&con->out, data, len);
	con->out_total += n;
	con->out_dropped += len - n;	/* one buffer larger than the whole ring */
	if (n && !con->out_notified) {
		con->out_notified = 1;
		notify = 1;
	}
	pthread_mutex_unlock(&con->lock);
	if (notify && con->on_output)
		con->on_output(con->opaque);
	return 1;
}

void console_set_space_hook(struct console *con, void (*on_space)(void *opaque), void *opaque)
{
	pthread_mutex_lock(&con->lock);
	con->on_space = on_space;
	con->space_opaque = opaque;
	pthread_mutex_unlock(&con->lock);
}

size_t console_out_pending(struct console *con)
{
	size_t n;

	pthread_mutex_lock(&con->lock);
	n = con->out.len;
	pthread_mutex_unlock(&con->lock);
	return n;
}

void console_release(struct console *con)
{
	pthread_mutex_lock(&con->lock);
	con->release_gen++;
	pthread_cond_broadcast(&con->space);
	pthread_mutex_unlock(&con->lock);
}

void console_hold(struct console *con, int held)
{
	pthread_mutex_lock(&con->lock);
	con->held = held;
	pthread_cond_broadcast(&con->space);
	pthread_mutex_unlock(&con->lock);
}

void console_close(struct console *con)
{
	pthread_mutex_lock(&con->lock);
	con->closed = 1;
	pthread_cond_broadcast(&con->space);
	pthread_mutex_unlock(&con->lock);
}

size_t console_in_write(struct console *con, const uint8_t *data, size_t len)
{
	size_t n;

	pthread_mutex_lock(&con->lock);
	n = byte_ring_put(&con->in, data, len);
	pthread_mutex_unlock(&con->lock);
	return n;
}

size_t console_in_take(struct console *con, uint8_t *out, size_t len)
{
	size_t n;

	pthread_mutex_lock(&con->lock);
	n = byte_ring_get(&con->in, out, len);
	pthread_mutex_unlock(&con->lock);
	return n;
}

size_t console_in_pending(struct console *con)
{
	size_t n;

	pthread_mutex_lock(&con->lock);
	n = con->in.len;
	pthread_mutex_unlock(&con->lock);
	return n;
}

size_t console_in_peek(struct console *con, uint8_t *out, size_t len)
{
	size_t n;

	pthread_mutex_lock(&con->lock);
	n = con->in.len < len ? con->in.len : len;
	for (size_t i = 0; i < n; i++)
		out[i] = con->in.buf[(con->in.head + i) % con->in.cap];
	pthread_mutex_unlock(&con->lock);
	return n;
}
