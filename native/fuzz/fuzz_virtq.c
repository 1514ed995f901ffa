/*
 * libFuzzer target for virtqueue handling (docs/vmm.md, "Virtio"): the input is what a hostile guest controls. It
 * picks the device (virtio-blk over a disk layer, as the root disk or a volume, writable or read-only; virtio-rng;
 * either queue of virtio-net over a backend fed from the input; or either queue of virtio-console over a small
 * console with input waiting), the queue's size and ring addresses,
 * where the device's indices start (as after a restore, so wrap-around is reached), register writes, and the first
 * 256 KiB of guest RAM: descriptor tables, rings, request headers. Then the queue is notified a few times. Guest
 * RAM is 1 MiB with an inaccessible page on each side, so any access outside it crashes; the sanitizers catch the
 * rest. What must hold: no crash, no hang (libFuzzer's -timeout), the used ring never runs ahead of what the driver
 * offered, and a device that gave up says so (DEVICE_NEEDS_RESET) and then stays quiet.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "console.h"
#include "disk.h"
#include "error.h"
#include "guest_mem.h"
#include "le_codec.h"
#include "virtio.h"
#include "virtio_net.h"

#define RAM (1ULL << 20)
#define IMAGE_MAX (256u << 10)
#define HEAD 12
#define OP_LEN 6

#define CHECK(cond)                                                                             \
	do {                                                                                    \
		if (!(cond)) {                                                                  \
			fprintf(stderr, "fuzz_virtq.c:%d: invariant broken: %s\n", __LINE__, #cond); \
			abort();                                                                \
		}                                                                               \
	} while (0)

static struct guest_mem mem;
static struct virtio_blk blk;
static struct console con;
static struct virtio_console vcon;
static struct virtio_net vnet;

/* virtio-net's other end: takes frames unless the input says it is full, and offers frames cut from the input. */
static const uint8_t *net_input;
static size_t net_input_len, net_input_at;
static int net_full;

static int fuzz_net_send(void *opaque, const void *frame, size_t len)
{
	(void)opaque;
	CHECK(len >= 14 && len <= VIRTIO_NET_FRAME_MAX);
	(void)((const volatile uint8_t *)frame)[len - 1];
	return net_full ? -EAGAIN : 0;
}

static ssize_t fuzz_net_recv(void *opaque, void *buf, size_t size)
{
	size_t n;

	(void)opaque;
	if (net_input_at + 2 > net_input_len)
		return -EAGAIN;
	n = (net_input[net_input_at] | (size_t)net_input[net_input_at + 1] << 8) % (size + 1);
	net_input_at += 2;
	if (n > net_input_len - net_input_at)
		n = net_input_len - net_input_at;
	memcpy(buf, net_input + net_input_at, n);
	net_input_at += n;
	return (ssize_t)n;
}

static const struct virtio_net_backend fuzz_net_backend = { fuzz_net_send, fuzz_net_recv, NULL };
static int irqs;

static void count_irq(void *opaque)
{
	(void)opaque;
	irqs++;
}

/* Guest RAM between two PROT_NONE pages. */
static void ram_init(void)
{
	uint8_t *area = mmap(NULL, RAM + 2 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(area != MAP_FAILED);
	CHECK(mprotect(area + 4096, RAM, PROT_READ | PROT_WRITE) == 0);
	mem.fd = -1;
	mem.host = area + 4096;
	mem.size = mem.low_size = RAM;
}

/* A 1 MiB raw base and a writable layer over it, in a directory that goes away with the process. */
static void disk_init(void)
{
	/* On tmpfs where there is one: a flush request's fdatasync costs nothing there, and ~30 ms on ext4, which made
	 * the fuzzer run at 34 inputs a second. */
	char shm[] = "/dev/shm/smol-fuzz-virtq-XXXXXX", tmp[] = "/tmp/smol-fuzz-virtq-XXXXXX", base[64], top[64];
	char *dir = mkdtemp(shm);
	struct vm_error err = { 0 };
	uint8_t *data = calloc(1, RAM);
	int fd;

	if (!dir)
		dir = mkdtemp(tmp);
	CHECK(data && dir);
	snprintf(base, sizeof(base), "%s/base", dir);
	snprintf(top, sizeof(top), "%s/top", dir);
	for (uint64_t i = 0; i < RAM; i++)
		data[i] = (uint8_t)(i >> 9);
	fd = open(base, O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0 && write(fd, data, RAM) == (ssize_t)RAM);
	close(fd);
	free(data);
	if (disk_layer_create(top, base, &err) < 0 || disk_open(top, 0, &blk.disk, &err) < 0) {
		fprintf(stderr, "fuzz_virtq: %s\n", err.msg);
		abort();
	}
	unlink(top);	/* the open files stay; the directory is gone when the fuzzer is */
	unlink(base);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ram_init();
	disk_init();
	CHECK(console_init(&con, 4096, NULL, NULL) == 0);	/* small, so that transmit buffers have to wait */
	con.stall_ms = 1;	/* a reader that never reads is stalled at once: waiting 1 s per full ring made 3 inputs/s */
	vcon.con = &con;
	vcon.buf = malloc(VIRTIO_CONSOLE_MAX_BUFFER);
	CHECK(vcon.buf);
	return 0;
}

static void w32(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	virtio_mmio_access(t, off, (uint8_t *)&v, 4, 1);
}

static uint32_t r32(struct virtio_mmio *t, uint64_t off)
{
	uint32_t v;

	virtio_mmio_access(t, off, (uint8_t *)&v, 4, 0);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct virtio_dev_ops *ops;
	void *dev = &blk;
	uint32_t qi = 0;
	struct virtio_mmio t;
	struct virtio_dev_state state = { .slot = 1, .gsi = 6, .base = 0xc0002000ULL }, back;
	uint8_t saved[VIRTIO_DEV_STATE_LEN], again[VIRTIO_DEV_STATE_LEN];
	struct le_writer w;
	size_t n_ops, image;
	uint16_t start;
	int broken_before;

	if (size < HEAD)
		return 0;
	ops = data[0] & 1 ? &virtio_rng_ops : &virtio_blk_ops;
	if ((data[0] & 3) == 0) {	/* virtio-blk: the root disk or a volume (its own GET_ID), writable or not */
		blk.id = (data[0] >> 2) & 1 ? "smol-vol4" : NULL;
		blk.disk->read_only = (data[0] >> 3) & 1;
	}
	if ((data[0] & 3) == 2) {	/* virtio-console: its receive queue (0) or its transmit queue (1) */
		uint8_t drained[8192];

		ops = &virtio_console_ops;
		dev = &vcon;
		qi = (data[0] >> 2) & 1;
		while (console_out_read(&con, drained, sizeof(drained)))
			;
		while (console_in_take(&con, drained, sizeof(drained)))
			;
		console_in_write(&con, data, size < 300 ? size : 300);
	}
	if ((data[0] & 7) == 3) {	/* virtio-net: its receive queue (0) or its transmit queue (1) */
		ops = &virtio_net_ops;
		dev = &vnet;
		qi = (data[0] >> 3) & 1;
		vnet.backend = &fuzz_net_backend;
		net_full = (data[0] >> 4) & 1;
		net_input = data;
		net_input_len = size < 4096 ? size : 4096;
		net_input_at = 0;
	}
	n_ops = data[11] % 9;
	if (size < HEAD + n_ops * OP_LEN)
		return 0;
	memset(mem.host, 0, RAM);
	image = size - HEAD - n_ops * OP_LEN;
	image = image < IMAGE_MAX ? image : IMAGE_MAX;
	memcpy(mem.host, data + HEAD + n_ops * OP_LEN, image);
	irqs = 0;

	virtio_mmio_init(&t, ops, dev, &mem);
	t.raise_irq = count_irq;
	/* The driver's side of setting the device up, with the queue as the input says. */
	w32(&t, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	w32(&t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	w32(&t, VIRTIO_MMIO_DRIVER_FEATURES, 1);
	w32(&t, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	w32(&t, VIRTIO_MMIO_QUEUE_SEL, qi);
	w32(&t, VIRTIO_MMIO_QUEUE_NUM, 1u << (data[1] % 9));
	w32(&t, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)le_load16(data + 2) * 16);
	w32(&t, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)le_load16(data + 4) * 2);
	w32(&t, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)le_load16(data + 6) * 4);
	w32(&t, VIRTIO_MMIO_QUEUE_READY, 1);
	w32(&t, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
					      VIRTIO_STATUS_DRIVER_OK);
	start = le_load16(data + 8);
	t.q[qi].last_avail = t.q[qi].used_idx = start;	/* as a restore would leave them */
	for (size_t i = 0; i < n_ops; i++) {
		const uint8_t *op = data + HEAD + i * OP_LEN;

		w32(&t, le_load16(op) & 0x1fc, le_load32(op + 2));
	}

	for (int i = 0; i < 1 + data[10] % 4; i++) {
		uint16_t used_before = t.q[qi].used_idx, last_before = t.q[qi].last_avail;
		int needed_reset = !!(t.status & VIRTIO_STATUS_NEEDS_RESET);

		broken_before = t.q[qi].broken;
		w32(&t, VIRTIO_MMIO_QUEUE_NOTIFY,
		    ops == &virtio_console_ops || ops == &virtio_net_ops ? qi : data[10] >> 7u);
		/*
		 * Each chain taken is answered once, except the one that broke the queue; a queue that broke takes
		 * nothing more.
		 */
		if (t.q[qi].broken)
			CHECK((uint16_t)(t.q[qi].last_avail - last_before) - (uint16_t)(t.q[qi].used_idx - used_before) <= 1);
		else
			CHECK((uint16_t)(t.q[qi].used_idx - used_before) == (uint16_t)(t.q[qi].last_avail - last_before));
		CHECK((uint16_t)(t.q[qi].used_idx - used_before) <= t.q[qi].num);
		if (broken_before || needed_reset) {
			CHECK(t.q[qi].used_idx == used_before);
			CHECK(t.q[qi].last_avail == last_before);
		}
		if (t.q[qi].broken)
			CHECK(t.status & VIRTIO_STATUS_NEEDS_RESET);
	}
	(void)r32(&t, VIRTIO_MMIO_INTERRUPT_STATUS);

	/* The state a snapshot would record encodes, decodes and loads back to itself. */
	virtio_mmio_get_state(&t, &state.transport);
	le_writer_init(&w, saved, sizeof(saved));
	virtio_dev_state_encode(&state, &w);
	CHECK(!w.overflow && w.len == sizeof(saved));
	{
		struct virtio_mmio u;
		const char *bad = virtio_dev_state_parse(saved, sizeof(saved), &back);

		virtio_mmio_init(&u, ops, dev, &mem);
		if (!bad)
			bad = virtio_mmio_set_state(&u, &back.transport);
		if (bad)
			fprintf(stderr, "fuzz_virtq: the saved state does not load: %s\n", bad);
		CHECK(!bad);	/* a guest cannot make its own snapshots unrestorable */
		virtio_mmio_get_state(&u, &back.transport);
		le_writer_init(&w, again, sizeof(again));
		virtio_dev_state_encode(&back, &w);
		CHECK(memcmp(saved, again, sizeof(saved)) == 0);
		virtio_mmio_exit(&u);
	}
	virtio_mmio_exit(&t);
	return 0;
}
