/*
 * virtio-console, driven through its registers and two queues in guest memory as Linux's virtio_console does, on a
 * real console (console.c): output reaches the console whole and in order, a full console held for a pause makes the
 * device put the buffer back without losing or reordering anything, a stalled reader's buffers are dropped and said by
 * a marker, input reaches the receive queue's buffers, and input goes to the device
 * only while its driver is up.
 */
#include "test.h"
#include "console.h"
#include "error.h"
#include "virtio_driver.h"

#include <stdio.h>
#include <stdlib.h>

#define RAM (16ULL << 20)
#define QNUM 8

/* Queue q's parts: descriptors, avail and used rings, and buffers, each queue in its own 64 KiB. */
#define Q_DESC(q) (0x100000ULL + 0x10000ULL * (q))
#define Q_AVAIL(q) (Q_DESC(q) + 0x1000)
#define Q_USED(q) (Q_DESC(q) + 0x2000)
#define Q_BUF(q, i) (0x200000ULL + 0x100000ULL * (q) + 0x8000ULL * (i))

struct rig {
	struct guest_mem mem;
	struct console con;
	struct virtio_console vc;
	struct virtio_mmio t;
	struct drv d;
	uint16_t avail[2];
	int space_calls;
};

static void count_space(void *opaque)
{
	((struct rig *)opaque)->space_calls++;
}

static int rig_init(struct rig *r, size_t console_limit)
{
	struct vm_error err = { 0 };

	memset(r, 0, sizeof(*r));
	if (guest_mem_init(&r->mem, RAM, &err) < 0 || console_init(&r->con, console_limit, NULL, NULL) < 0)
		return -1;
	console_set_space_hook(&r->con, count_space, r);
	r->vc.con = &r->con;
	r->vc.buf = malloc(VIRTIO_CONSOLE_MAX_BUFFER);
	virtio_mmio_init(&r->t, &virtio_console_ops, &r->vc, &r->mem);
	r->d.t = &r->t;
	r->d.mem = &r->mem;
	r->d.t->raise_irq = drv_irq;
	r->d.t->irq_opaque = &r->d;
	return r->vc.buf ? 0 : -1;
}

static void rig_exit(struct rig *r)
{
	virtio_mmio_exit(&r->t);
	free(r->vc.buf);
	console_exit(&r->con);
	guest_mem_exit(&r->mem);
}

static void queue_setup(struct rig *r, uint32_t q)
{
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_SEL, q);
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_NUM, QNUM);
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)Q_DESC(q));
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)Q_AVAIL(q));
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)Q_USED(q));
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_READY, 1);
}

/* As Linux's driver: features (VERSION_1 only), both queues, DRIVER_OK. */
static void driver_up(struct rig *r)
{
	const uint32_t base = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER;

	drv_w32(&r->d, VIRTIO_MMIO_STATUS, 0);
	drv_w32(&r->d, VIRTIO_MMIO_STATUS, base);
	drv_w32(&r->d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	drv_w32(&r->d, VIRTIO_MMIO_DRIVER_FEATURES, 1);
	drv_w32(&r->d, VIRTIO_MMIO_STATUS, base | VIRTIO_STATUS_FEATURES_OK);
	queue_setup(r, VIRTIO_CONSOLE_RX);
	queue_setup(r, VIRTIO_CONSOLE_TX);
	drv_w32(&r->d, VIRTIO_MMIO_STATUS, base | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
}

/* Offers buffer slot `i` of queue q (`len` bytes, device-writable or not) as a one-descriptor chain; no notify. */
static void offer(struct rig *r, uint32_t q, uint16_t i, uint32_t len, int writable)
{
	uint64_t addr = Q_BUF(q, i);
	uint16_t flags = writable ? VIRTQ_DESC_F_WRITE : 0, zero = 0;
	uint8_t *desc = guest_mem_ptr(&r->mem, Q_DESC(q) + 16ULL * i, 16);
	uint8_t *avail = guest_mem_ptr(&r->mem, Q_AVAIL(q), 4 + 2 * QNUM);

	memcpy(desc, &addr, 8);
	memcpy(desc + 8, &len, 4);
	memcpy(desc + 12, &flags, 2);
	memcpy(desc + 14, &zero, 2);
	memcpy(avail + 4 + 2 * (r->avail[q] % QNUM), &i, 2);
	r->avail[q]++;
	memcpy(avail + 2, &r->avail[q], 2);
}

static void notify(struct rig *r, uint32_t q)
{
	drv_w32(&r->d, VIRTIO_MMIO_QUEUE_NOTIFY, q);
}

static uint16_t used_idx(struct rig *r, uint32_t q)
{
	uint16_t v;

	memcpy(&v, (uint8_t *)guest_mem_ptr(&r->mem, Q_USED(q), 4) + 2, 2);
	return v;
}

static void used(struct rig *r, uint32_t q, uint16_t n, uint32_t *id, uint32_t *len)
{
	uint8_t *e = guest_mem_ptr(&r->mem, Q_USED(q) + 4 + 8ULL * (n % QNUM), 8);

	memcpy(id, e, 4);
	memcpy(len, e + 4, 4);
}

/* Writes `text` into transmit slot i and offers it. */
static void transmit(struct rig *r, uint16_t i, const char *text)
{
	memcpy(guest_mem_ptr(&r->mem, Q_BUF(VIRTIO_CONSOLE_TX, i), strlen(text)), text, strlen(text));
	offer(r, VIRTIO_CONSOLE_TX, i, (uint32_t)strlen(text), 0);
}

static size_t drain(struct rig *r, char *out, size_t len)
{
	size_t n = console_out_read(&r->con, (uint8_t *)out, len - 1);

	out[n] = 0;
	return n;
}

TEST(virtio_console_identifies_itself_with_two_queues_and_no_features)
{
	struct rig r;

	REQUIRE(rig_init(&r, 0) == 0);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_CONSOLE);
	drv_w32(&r.d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_DEVICE_FEATURES), 0);	/* no SIZE, MULTIPORT or EMERG_WRITE */
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_SEL, 1);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_QUEUE_NUM_MAX), VIRTQ_MAX_SIZE);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_SEL, 2);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_QUEUE_NUM_MAX), 0);
	rig_exit(&r);
}

TEST(virtio_console_output_reaches_the_console_whole_and_in_order)
{
	struct rig r;
	char out[64];
	uint32_t id, len;

	REQUIRE(rig_init(&r, 0) == 0);
	driver_up(&r);
	transmit(&r, 0, "hello, ");
	transmit(&r, 1, "world\r\n");
	notify(&r, VIRTIO_CONSOLE_TX);
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_TX), 2);
	used(&r, VIRTIO_CONSOLE_TX, 0, &id, &len);
	CHECK_EQ_INT(id, 0);
	CHECK_EQ_INT(len, 0);	/* nothing written into a transmit buffer */
	CHECK(r.d.irqs >= 1);
	CHECK_EQ_INT(drain(&r, out, sizeof(out)), 14);
	CHECK(strcmp(out, "hello, world\r\n") == 0);
	rig_exit(&r);
}

TEST(virtio_console_full_console_while_held_puts_buffers_back_and_loses_nothing)
{
	struct rig r;
	static char block[4096], out[16384];
	uint32_t id, len;

	REQUIRE(rig_init(&r, 8192) == 0);	/* room for two of the four blocks */
	driver_up(&r);
	console_hold(&r.con, 1);	/* a pause: the device must not wait for the reader */
	for (uint16_t i = 0; i < 4; i++) {
		memset(block, 'a' + i, sizeof(block) - 1);
		transmit(&r, i, block);
	}
	notify(&r, VIRTIO_CONSOLE_TX);
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_TX), 2);	/* the third waits on the avail ring */
	CHECK_EQ_INT(r.space_calls, 0);
	notify(&r, VIRTIO_CONSOLE_TX);	/* a spurious notification takes nothing more */
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_TX), 2);
	/* The reader drains one block: down to half the limit, the console calls the device back. */
	CHECK_EQ_INT(console_out_read(&r.con, (uint8_t *)out, 4095), 4095);
	CHECK_EQ_INT(r.space_calls, 1);
	CHECK(out[0] == 'a' && out[4094] == 'a');
	notify(&r, VIRTIO_CONSOLE_TX);	/* what the space hook's kick does */
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_TX), 3);
	used(&r, VIRTIO_CONSOLE_TX, 2, &id, &len);
	CHECK_EQ_INT(id, 2);
	CHECK_EQ_INT(console_out_read(&r.con, (uint8_t *)out, sizeof(out)), 2 * 4095);
	CHECK(out[0] == 'b' && out[4095] == 'c' && out[2 * 4095 - 1] == 'c');
	notify(&r, VIRTIO_CONSOLE_TX);
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_TX), 4);
	CHECK_EQ_INT(console_out_read(&r.con, (uint8_t *)out, sizeof(out)), 4095);
	CHECK(out[0] == 'd');
	CHECK_EQ_INT(r.con.out_dropped, 0);
	CHECK_EQ_INT(r.con.out_total, 4 * 4095);
	rig_exit(&r);
}

TEST(virtio_console_stalled_reader_loses_buffers_for_a_marker_and_never_holds_the_guest)
{
	struct rig r;
	static char block[4096], out[16384];

	REQUIRE(rig_init(&r, 8192) == 0);	/* room for two of the four blocks */
	r.con.stall_ms = 20;
	driver_up(&r);
	for (uint16_t i = 0; i < 4; i++) {
		memset(block, 'a' + i, sizeof(block) - 1);
		transmit(&r, i, block);
	}
	notify(&r, VIRTIO_CONSOLE_TX);	/* nobody reads: after 20 ms the device takes the rest without keeping it */
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_TX), 4);
	CHECK_EQ_INT(r.con.out_dropped, 2 * 4095);
	transmit(&r, 4, "later\r\n");
	notify(&r, VIRTIO_CONSOLE_TX);	/* still over half the limit: dropped too */
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_TX), 5);
	CHECK_EQ_INT(drain(&r, out, sizeof(out)), 2 * 4095);
	CHECK(out[0] == 'a' && out[4095] == 'b');
	transmit(&r, 5, "after\r\n");
	notify(&r, VIRTIO_CONSOLE_TX);
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_TX), 6);
	drain(&r, out, sizeof(out));
	CHECK(strcmp(out, "\r\n[smol: 8197 bytes dropped: the console's reader fell behind]\r\nafter\r\n") == 0);
	CHECK_EQ_INT(r.con.gaps, 1);
	rig_exit(&r);
}

TEST(virtio_console_buffer_larger_than_the_console_is_taken_when_it_is_empty)
{
	struct rig r;
	static char block[20000], out[20000];

	REQUIRE(rig_init(&r, 4096) == 0);	/* the ring holds 4096 + CONSOLE_OUT_RESERVE */
	driver_up(&r);
	memset(block, 'x', sizeof(block) - 1);
	transmit(&r, 0, block);
	notify(&r, VIRTIO_CONSOLE_TX);
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_TX), 1);	/* never stuck: the guest gets its buffer back */
	CHECK_EQ_INT(console_out_read(&r.con, (uint8_t *)out, sizeof(out)), 4096 + CONSOLE_OUT_RESERVE);
	CHECK_EQ_INT(r.con.out_dropped, sizeof(block) - 1 - 4096 - CONSOLE_OUT_RESERVE);
	rig_exit(&r);
}

TEST(virtio_console_input_fills_the_receive_buffers_in_order)
{
	struct rig r;
	uint32_t id, len;
	const char *text = "echo hi\r";

	REQUIRE(rig_init(&r, 0) == 0);
	driver_up(&r);
	CHECK_EQ_INT(console_in_write(&r.con, (const uint8_t *)text, strlen(text)), strlen(text));
	notify(&r, VIRTIO_CONSOLE_RX);	/* no buffer yet: the input waits in the console */
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_RX), 0);
	CHECK_EQ_INT(console_in_pending(&r.con), strlen(text));
	offer(&r, VIRTIO_CONSOLE_RX, 0, 5, 1);
	offer(&r, VIRTIO_CONSOLE_RX, 1, 64, 1);
	offer(&r, VIRTIO_CONSOLE_RX, 2, 64, 1);
	notify(&r, VIRTIO_CONSOLE_RX);
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_RX), 2);	/* the third buffer stays for later input */
	used(&r, VIRTIO_CONSOLE_RX, 0, &id, &len);
	CHECK_EQ_INT(len, 5);
	CHECK(memcmp(guest_mem_ptr(&r.mem, Q_BUF(VIRTIO_CONSOLE_RX, 0), 5), "echo ", 5) == 0);
	used(&r, VIRTIO_CONSOLE_RX, 1, &id, &len);
	CHECK_EQ_INT(id, 1);
	CHECK_EQ_INT(len, 3);
	CHECK(memcmp(guest_mem_ptr(&r.mem, Q_BUF(VIRTIO_CONSOLE_RX, 1), 3), "hi\r", 3) == 0);
	CHECK_EQ_INT(console_in_pending(&r.con), 0);
	/* Input that arrives later goes into the buffer the driver left (the VM kicks the device on input). */
	console_in_write(&r.con, (const uint8_t *)"x", 1);
	notify(&r, VIRTIO_CONSOLE_RX);
	CHECK_EQ_INT(used_idx(&r, VIRTIO_CONSOLE_RX), 3);
	rig_exit(&r);
}

TEST(virtio_console_takes_input_only_while_its_driver_is_up)
{
	struct rig r;

	REQUIRE(rig_init(&r, 0) == 0);
	CHECK(!virtio_console_takes_input(&r.t));	/* before the driver: the UART gets the input */
	driver_up(&r);
	CHECK(virtio_console_takes_input(&r.t));
	drv_w32(&r.d, VIRTIO_MMIO_STATUS, 0);	/* reset */
	CHECK(!virtio_console_takes_input(&r.t));
	driver_up(&r);
	/* A transmit buffer outside guest RAM breaks the queue: the device needs a reset and gives up the input. */
	{
		uint64_t addr = RAM + 4096;
		uint32_t len = 16;
		uint16_t zero = 0, head = 0;
		uint8_t *desc = guest_mem_ptr(&r.mem, Q_DESC(VIRTIO_CONSOLE_TX), 16);
		uint8_t *avail = guest_mem_ptr(&r.mem, Q_AVAIL(VIRTIO_CONSOLE_TX), 6);

		memcpy(desc, &addr, 8);
		memcpy(desc + 8, &len, 4);
		memcpy(desc + 12, &zero, 2);
		memcpy(desc + 14, &zero, 2);
		memcpy(avail + 4, &head, 2);
		r.avail[VIRTIO_CONSOLE_TX] = 1;
		memcpy(avail + 2, &r.avail[VIRTIO_CONSOLE_TX], 2);
		notify(&r, VIRTIO_CONSOLE_TX);
	}
	CHECK(drv_r32(&r.d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET);
	CHECK(!virtio_console_takes_input(&r.t));
	CHECK_EQ_INT(r.con.out_total, 0);
	rig_exit(&r);
}
