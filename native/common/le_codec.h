/*
 * Little-endian encoding with a cursor and bounds checks: the one codec for every byte layout we define (snapshot
 * sections and device state, docs/snapshots.md; the agent's frames, docs/agent.md). Shared by the VMM and the
 * guest agent, so it depends on nothing but the C library.
 *
 * A writer fills a buffer it does not own; a reader walks bytes it does not own. Both fail sticky: the first put
 * that does not fit, or the first get past the end, marks the cursor failed and every later call does nothing (gets
 * return 0), so a codec checks once at the end. A reader also keeps the first reason a decoder gave (le_fail), for
 * the message that names what is wrong.
 */
#ifndef SMOL_LE_CODEC_H
#define SMOL_LE_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* Fixed-position loads and stores, for headers patched after the fact. */
static inline void le_store16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void le_store32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void le_store64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t le_load16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t le_load32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t le_load64(const uint8_t *p)
{
	return (uint64_t)le_load32(p) | (uint64_t)le_load32(p + 4) << 32;
}

struct le_writer {
	uint8_t *buf;
	size_t cap, len;
	int overflow;		/* a put did not fit: len stopped before it */
};

void le_writer_init(struct le_writer *w, void *buf, size_t cap);
void le_put_u8(struct le_writer *w, uint8_t v);
void le_put_u16(struct le_writer *w, uint16_t v);
void le_put_u32(struct le_writer *w, uint32_t v);
void le_put_u64(struct le_writer *w, uint64_t v);
void le_put_bytes(struct le_writer *w, const void *p, size_t n);
void le_put_zeros(struct le_writer *w, size_t n);
/* Reserves n bytes and returns where they are (to be filled in later), or NULL when they do not fit. */
uint8_t *le_put_space(struct le_writer *w, size_t n);

struct le_reader {
	const uint8_t *p;
	size_t len, at;
	int truncated;		/* a get ran past the end */
	const char *error;	/* a decoder's reason (le_fail) */
};

void le_reader_init(struct le_reader *r, const void *p, size_t len);
uint8_t le_get_u8(struct le_reader *r);
uint16_t le_get_u16(struct le_reader *r);
uint32_t le_get_u32(struct le_reader *r);
uint64_t le_get_u64(struct le_reader *r);
/* Copies n bytes out (zeros after a failure). */
void le_get_bytes(struct le_reader *r, void *dst, size_t n);
/* The next n bytes in place, or NULL (failed) when fewer remain. */
const uint8_t *le_get_span(struct le_reader *r, size_t n);
/* n reserved bytes that must be zero: `what` names them in the failure. */
void le_get_zeros(struct le_reader *r, size_t n, const char *what);
size_t le_remaining(const struct le_reader *r);
/* Marks the reader failed with `why` (kept only if it is the first reason). Returns -1, for `return le_fail(...)`. */
int le_fail(struct le_reader *r, const char *why);
/*
 * The end of a decode: NULL when every byte was read and nothing failed, else what is wrong ("N bytes is too
 * short", "N bytes left over", or the decoder's own reason).
 */
const char *le_finish(struct le_reader *r);

#endif
