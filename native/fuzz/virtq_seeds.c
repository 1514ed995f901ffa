/*
 * Writes the virtqueue fuzzer's seed corpus into the directory given: well-formed requests for virtio-rng and
 * virtio-blk (read, write, flush and get-id, and indices about to wrap) and virtio-console (output that overflows
 * the fuzzer's small console, and input into receive buffers), in fuzz_virtq.c's input format.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "virtio.h"

#define HEAD 12
#define IMAGE 0xa000
#define DESC 0x1000
#define AVAIL 0x2000
#define USED 0x3000

struct seed {
	uint8_t head[HEAD];
	uint8_t image[IMAGE];
};

static void put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

static void desc(struct seed *s, int i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	uint8_t *p = s->image + DESC + 16 * i;

	memcpy(p, &addr, 8);
	memcpy(p + 8, &len, 4);
	memcpy(p + 12, &flags, 2);
	memcpy(p + 14, &next, 2);
}

static void init(struct seed *s, int rng, uint16_t start)
{
	memset(s, 0, sizeof(*s));
	s->head[0] = (uint8_t)rng;
	s->head[1] = 4;			/* 16 entries */
	put16(s->head + 2, DESC / 16);
	put16(s->head + 4, AVAIL / 2);
	put16(s->head + 6, USED / 4);
	put16(s->head + 8, start);
	s->head[10] = 1;		/* two notifications */
}

static void offer(struct seed *s, uint16_t start, int n, const uint16_t *heads)
{
	for (int i = 0; i < n; i++)
		put16(s->image + AVAIL + 4 + 2 * ((uint16_t)(start + i) % 16), heads[i]);
	put16(s->image + AVAIL + 2, (uint16_t)(start + n));
}

static void blk_header(struct seed *s, uint64_t at, uint32_t type, uint64_t sector)
{
	memcpy(s->image + at, &type, 4);
	memcpy(s->image + at + 8, &sector, 8);
}

static int save(const char *dir, const char *name, const struct seed *s)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s, sizeof(*s), 1, f) != 1) {
		perror(path);
		return 1;
	}
	return fclose(f) != 0;
}

int main(int argc, char **argv)
{
	static struct seed s;
	static const uint16_t h0[] = { 0 }, h03[] = { 0, 3 };
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: virtq_seeds DIR\n");
		return 2;
	}
	init(&s, 1, 0);
	desc(&s, 0, 0x8000, 64, VIRTQ_DESC_F_WRITE, 0);
	offer(&s, 0, 1, h0);
	bad |= save(argv[1], "rng", &s);

	init(&s, 2 | 1 << 2, 0);	/* virtio-console's transmit queue: 3 KiB, then 3 KiB that must wait */
	desc(&s, 0, 0x5000, 3072, 0, 0);
	desc(&s, 3, 0x6000, 3072, 0, 0);
	offer(&s, 0, 2, h03);
	bad |= save(argv[1], "console-tx", &s);

	init(&s, 2, 0);		/* its receive queue */
	desc(&s, 0, 0x8000, 16, VIRTQ_DESC_F_WRITE, 0);
	desc(&s, 3, 0x9000, 4096, VIRTQ_DESC_F_WRITE, 0);
	offer(&s, 0, 2, h03);
	bad |= save(argv[1], "console-rx", &s);

	init(&s, 0, 0);
	blk_header(&s, 0x5000, VIRTIO_BLK_T_IN, 3);
	desc(&s, 0, 0x5000, 16, VIRTQ_DESC_F_NEXT, 1);
	desc(&s, 1, 0x6000, 1024, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 2);
	desc(&s, 2, 0x9000, 1, VIRTQ_DESC_F_WRITE, 0);
	offer(&s, 0, 1, h0);
	bad |= save(argv[1], "blk-read", &s);

	blk_header(&s, 0x5000, VIRTIO_BLK_T_OUT, 70000 / 512);
	desc(&s, 1, 0x6000, 1024, VIRTQ_DESC_F_NEXT, 2);
	blk_header(&s, 0x5100, VIRTIO_BLK_T_FLUSH, 0);
	desc(&s, 3, 0x5100, 16, VIRTQ_DESC_F_NEXT, 4);
	desc(&s, 4, 0x9001, 1, VIRTQ_DESC_F_WRITE, 0);
	offer(&s, 0, 2, h03);
	bad |= save(argv[1], "blk-write-flush", &s);

	init(&s, 0, 0xfffe);
	blk_header(&s, 0x5000, VIRTIO_BLK_T_GET_ID, 0);
	desc(&s, 0, 0x5000, 16, VIRTQ_DESC_F_NEXT, 1);
	desc(&s, 1, 0x6000, 20, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 2);
	desc(&s, 2, 0x9000, 1, VIRTQ_DESC_F_WRITE, 0);
	offer(&s, 0xfffe, 2, (const uint16_t[]){ 0, 0 });
	bad |= save(argv[1], "blk-get-id-wrap", &s);
	return bad;
}
