/*
 * Writes the virtio-vsock fuzzer's seed corpus into the directory given: scripts (vsock_input.h) in which the guest
 * accepts a host connection and data flows both ways, connects to the host itself, runs out of credit, handles a
 * transport reset, resets the device, and sends what it must not.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "virtio_vsock.h"
#include "vsock_input.h"

#define SEED_MAX 4096

struct seed {
	uint8_t b[SEED_MAX];
	size_t len;
};

/* Port selectors (fuzz_vsock.c): guest port 52; host side: the listener, the first host connection, nobody. */
#define G52 0
#define H_LISTEN 0
#define H_FIRST 1
#define H_NOBODY 2

static void put(struct seed *s, const void *p, size_t n)
{
	memcpy(s->b + s->len, p, n);
	s->len += n;
}

static void u8(struct seed *s, uint8_t v)
{
	put(s, &v, 1);
}

static void u16(struct seed *s, uint16_t v)
{
	put(s, &v, 2);
}

static void u32(struct seed *s, uint32_t v)
{
	put(s, &v, 4);
}

/* Queues of 16 entries; the first host connection asks for guest port 52. */
static void start(struct seed *s)
{
	s->len = 0;
	u8(s, 4);
	u8(s, 4);
	u8(s, 4);
	u32(s, 52);
}

static void tx(struct seed *s, uint8_t shape, uint8_t op, uint8_t dst, uint8_t flags, uint32_t buf_alloc,
	       uint32_t fwd_cnt, uint16_t pay)
{
	u8(s, CMD_TX);
	u8(s, shape);
	u8(s, op);
	u8(s, G52);
	u8(s, dst);
	u8(s, flags);
	u32(s, buf_alloc);
	u32(s, fwd_cnt);
	u16(s, pay);
	u8(s, 20);	/* split points: used by two- and three-descriptor chains only */
	u8(s, 2);
}

static void rx(struct seed *s, uint8_t count, uint16_t len, uint8_t shape)
{
	u8(s, CMD_RX);
	u8(s, count - 1);
	u16(s, len);
	u8(s, shape);
}

static void cmd2(struct seed *s, uint8_t cmd, uint8_t a, uint16_t b)
{
	u8(s, cmd);
	u8(s, a);
	if (cmd == CMD_HOST_WRITE)
		u16(s, b);
	else if (cmd == CMD_HOST_CLOSE || cmd == CMD_EVENT)
		u8(s, (uint8_t)b);
}

/* The guest accepts the first host connection (device port VSOCK_HOST_PORT_BASE) and data flows both ways. */
static void accepted(struct seed *s, uint32_t buf_alloc)
{
	start(s);
	rx(s, 8, 4096, 0);
	tx(s, 0, VSOCK_OP_RESPONSE, H_FIRST, 0, buf_alloc, 0, 0);
	cmd2(s, CMD_HOST_WRITE, 0, 1000);
	tx(s, TX_HONEST_FWD, VSOCK_OP_RW, H_FIRST, 0, buf_alloc, 0, 300);
	cmd2(s, CMD_HOST_READ, 0, 0);
}

static int save(const char *dir, const char *name, const struct seed *s)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s->b, s->len, 1, f) != 1) {
		perror(path);
		return 1;
	}
	return fclose(f) != 0;
}

int main(int argc, char **argv)
{
	static struct seed s;
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: vsock_seeds DIR\n");
		return 2;
	}
	accepted(&s, 65536);
	tx(&s, TX_HONEST_FWD, VSOCK_OP_CREDIT_REQUEST, H_FIRST, 0, 65536, 0, 0);
	tx(&s, 1, VSOCK_OP_RW, H_FIRST, 0, 65536, 0, 5000);	/* two descriptors, the header split */
	tx(&s, 2, VSOCK_OP_RW, H_FIRST, 0, 65536, 0, 9000);	/* three */
	cmd2(&s, CMD_HOST_CLOSE, 0, 1);
	rx(&s, 2, 4096, BUF_TWO);
	tx(&s, 0, VSOCK_OP_SHUTDOWN, H_FIRST, VSOCK_SHUTDOWN_RCV | VSOCK_SHUTDOWN_SEND, 65536, 0, 0);
	bad |= save(argv[1], "host-connects", &s);

	/* Credit: the guest allows 10 bytes, the host sends 1000; then the guest says it consumed them. */
	accepted(&s, 10);
	rx(&s, 4, 4096, 0);
	tx(&s, TX_HONEST_FWD, VSOCK_OP_CREDIT_UPDATE, H_FIRST, 0, 10, 0, 0);
	rx(&s, 4, 4096, 0);
	tx(&s, TX_HONEST_FWD, VSOCK_OP_CREDIT_UPDATE, H_FIRST, 0, 0xffffffff, 0, 0);
	bad |= save(argv[1], "credit", &s);

	/* The guest connects to a host program (the second host slot), and to a port nobody listens on. */
	start(&s);
	rx(&s, 8, 4096, 0);
	tx(&s, 0, VSOCK_OP_REQUEST, H_LISTEN, 0, 65536, 0, 0);
	tx(&s, 0, VSOCK_OP_RW, H_LISTEN, 0, 65536, 0, 700);
	cmd2(&s, CMD_HOST_WRITE, 1, 2000);
	cmd2(&s, CMD_HOST_READ, 1, 0);
	rx(&s, 4, 100, 0);
	tx(&s, 0, VSOCK_OP_REQUEST, H_NOBODY, 0, 65536, 0, 0);
	cmd2(&s, CMD_HOST_CLOSE, 1, 0);
	tx(&s, 0, VSOCK_OP_RST, H_LISTEN, 0, 0, 0, 0);
	bad |= save(argv[1], "guest-connects", &s);

	/* A transport reset (after a restore or fork): the guest takes the event, then acks it with a kick. */
	accepted(&s, 65536);
	u8(&s, CMD_TRANSPORT_RESET);
	cmd2(&s, CMD_EVENT, 4, 0);
	cmd2(&s, CMD_NOTIFY, VSOCK_EVENT_QUEUE, 0);
	cmd2(&s, CMD_HOST_CONNECT, 0, 0);	/* port 0, a good line */
	u8(&s, 0);
	u8(&s, 0);
	u8(&s, 0);
	u8(&s, 0);
	rx(&s, 4, 4096, 0);
	bad |= save(argv[1], "transport-reset", &s);

	/* A device reset mid-stream, then a start over. */
	accepted(&s, 65536);
	u8(&s, CMD_STATUS);
	u8(&s, 0);
	rx(&s, 8, 4096, 0);
	tx(&s, 0, VSOCK_OP_REQUEST, H_LISTEN, 0, 65536, 0, 0);
	bad |= save(argv[1], "device-reset", &s);

	/* What a guest must not send: a len past its chain, a bogus op, an rx buffer too small for a header. */
	accepted(&s, 65536);
	tx(&s, 0, 0x80 | VSOCK_OP_RW, H_FIRST, 0, 65536, 0, 100);
	u32(&s, 1000);
	tx(&s, TX_BAD_SRC_CID, VSOCK_OP_RW, H_FIRST, 0, 65536, 0, 10);
	tx(&s, 0, 9, H_FIRST, 0, 65536, 0, 0);
	rx(&s, 1, 20, 0);
	bad |= save(argv[1], "hostile", &s);
	return bad;
}
