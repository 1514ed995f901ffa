/*
 * The host side of the serial console: a bounded output ring drained by the reader (JavaScript), and a bounded
 * input queue the UART pulls from. Policy for a slow reader (docs/vmm.md, "Console output and a slow reader"): while
 * the reader keeps reading, a writer finding the ring full waits for room (nothing is lost); once the ring has stayed
 * full for `stall_ms` with no read, the reader is stalled and output is dropped, not waited for, until the reader has
 * drained the ring to half its limit. Then a marker line saying how many bytes were dropped goes into the ring where
 * they would have been, and output flows again. So a guest never waits on a reader for longer than `stall_ms`.
 */
#ifndef SMOL_CONSOLE_H
#define SMOL_CONSOLE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define CONSOLE_OUT_LIMIT (1u << 20)	/* default: a writer waits when this much output is unread */
#define CONSOLE_OUT_RESERVE 4096u	/* room for bytes written while the VM pauses or stops */
#define CONSOLE_IN_LIMIT (1u << 20)
/*
 * Default: a full ring unread this long means the reader is stalled. 100 ms was too short: a busy Node event loop (a
 * GC, a large synchronous step) went that long without reading and lost lines of a reader that was keeping up
 * (tests/vmm/lifecycle.test.ts, "loses no console output", under CI's load). A second is far below what Linux
 * reports as a stall (RCU after 21 s, soft lockup after 20 s).
 */
#define CONSOLE_STALL_MS 1000u
#define CONSOLE_MARKER_MAX 96u		/* the dropped-bytes marker's longest form */

struct byte_ring {
	uint8_t *buf;
	size_t cap, head, len;
};

struct console {
	pthread_mutex_t lock;
	pthread_cond_t space;
	struct byte_ring out, in;
	size_t out_limit;
	int out_notified;		/* the reader has been told there is output and has not drained it yet */
	unsigned release_gen;		/* bumped to wake writers when the VM pauses */
	int closed;			/* the VM is stopping: writers never wait again */
	int held;			/* the VM is pausing or paused: writers do not wait until it resumes */
	uint64_t out_total, out_dropped;
	unsigned stall_ms;		/* CONSOLE_STALL_MS unless a test sets it */
	uint64_t full_since_ms;		/* when a writer first found the ring full with no read since (0: not full) */
	int dropping;			/* the reader stalled: output is dropped until it drains to half the limit */
	uint64_t gap;			/* bytes dropped since dropping began, said by the marker when it ends */
	uint64_t gaps;			/* how many markers were written */
	void (*on_output)(void *opaque);
	void *opaque;
	/* A writer that does not wait (virtio-console) asked to be told once the reader has made room. */
	int space_wanted;
	void (*on_space)(void *opaque);
	void *space_opaque;
};

int byte_ring_init(struct byte_ring *r, size_t cap);
void byte_ring_free(struct byte_ring *r);
size_t byte_ring_put(struct byte_ring *r, const uint8_t *data, size_t len);
size_t byte_ring_get(struct byte_ring *r, uint8_t *out, size_t len);

/* out_limit 0 means CONSOLE_OUT_LIMIT. */
int console_init(struct console *con, size_t out_limit, void (*on_output)(void *), void *opaque);
void console_exit(struct console *con);

/*
 * Output from the guest. May wait for the reader, at most `stall_ms` (then the byte is dropped); returns early,
 * keeping the byte, after console_release().
 */
void console_out_put(struct console *con, uint8_t byte);
size_t console_out_read(struct console *con, uint8_t *buf, size_t len);
/*
 * Output as a whole buffer (a virtio queue). If `len` bytes fit under the limit, or the ring is empty (a buffer
 * larger than the limit is kept up to the ring's capacity; the rest counts as dropped), they are queued and it
 * returns 1. Otherwise it waits for room like console_out_put, at most `stall_ms`: a stalled reader's buffer is
 * dropped (counted, and said by the marker) and it returns 1 too. Only when the wait is cut short (a pause, the VM
 * stopping) is nothing queued: it returns 0, and once the reader has drained the ring to half the limit it calls
 * `on_space` (console_set_space_hook), from the reader's thread, so the writer can try again.
 */
int console_out_offer(struct console *con, const uint8_t *data, size_t len);
void console_set_space_hook(struct console *con, void (*on_space)(void *opaque), void *opaque);
size_t console_out_pending(struct console *con);

/* Wakes every writer waiting for room (the VM is pausing); later writers may wait again. */
void console_release(struct console *con);
/* While held (a pause), writers never wait, so every vCPU gets back to its run loop and parks. */
void console_hold(struct console *con, int held);
/* The VM is stopping and nobody may read any more: wake every writer and never let one wait again. */
void console_close(struct console *con);

size_t console_in_write(struct console *con, const uint8_t *data, size_t len);
size_t console_in_take(struct console *con, uint8_t *out, size_t len);
size_t console_in_pending(struct console *con);
/* Copies queued input without taking it (a snapshot saves it). */
size_t console_in_peek(struct console *con, uint8_t *out, size_t len);

#endif
