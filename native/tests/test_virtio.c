/*
 * The virtio-mmio transport and split virtqueues, driven through the registers and guest memory exactly as a driver
 * would, with virtio-rng as the device. Every hostile-queue case must leave the device needing a reset, never crash,
 * hang, or touch memory outside guest RAM.
 */
#include "test.h"
#include "le_codec.h"
#include "error.h"
#include "virtio_driver.h"

#include <stdlib.h>

#define RAM (16ULL << 20)

struct rig {
	struct guest_mem mem;
	struct virtio_mmio t;
	struct drv d;
};

static int rig_init(struct rig *r, const struct virtio_dev_ops *ops, void *dev)
{
	struct vm_error err = { 0 };

	memset(r, 0, sizeof(*r));
	if (guest_mem_init(&r->mem, RAM, &err) < 0)
		return -1;
	virtio_mmio_init(&r->t, ops, dev, &r->mem);
	r->d.t = &r->t;
	r->d.mem = &r->mem;
	return 0;
}

static void rig_exit(struct rig *r)
{
	virtio_mmio_exit(&r->t);
	guest_mem_exit(&r->mem);
}

static int needs_reset(struct rig *r)
{
	return !!(drv_r32(&r->d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET);
}

TEST(virtio_mmio_registers_identify_a_modern_device)
{
	struct rig r;

	REQUIRE(rig_init(&r, &virtio_rng_ops, NULL) == 0);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_VERSION), 2);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_ENTROPY);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_QUEUE_NUM_MAX), VIRTQ_MAX_SIZE);
	drv_w32(&r.d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	CHECK(drv_r32(&r.d, VIRTIO_MMIO_DEVICE_FEATURES) & 1);	/* VIRTIO_F_VERSION_1 */
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_SEL, 1);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_QUEUE_NUM_MAX), 0);	/* no second queue */
	rig_exit(&r);
}

TEST(virtio_legacy_driver_without_version_1_is_refused)
{
	struct rig r;

	REQUIRE(rig_init(&r, &virtio_rng_ops, NULL) == 0);
	drv_w32(&r.d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	drv_w32(&r.d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	CHECK(!(drv_r32(&r.d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_FEATURES_OK));
	/* A feature that was never offered is refused too. */
	drv_w32(&r.d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	drv_w32(&r.d, VIRTIO_MMIO_DRIVER_FEATURES, 1 | 2);
	drv_w32(&r.d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	CHECK(!(drv_r32(&r.d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_FEATURES_OK));
	rig_exit(&r);
}

TEST(virtio_rng_fills_the_buffer_and_interrupts)
{
	struct rig r;
	uint32_t id, len, status;
	uint8_t *buf;

	REQUIRE(rig_init(&r, &virtio_rng_ops, NULL) == 0);
	status = drv_setup(&r.d, 8, 0);
	CHECK(status & VIRTIO_STATUS_DRIVER_OK);
	buf = guest_mem_ptr(&r.mem, DRV_BUF, 64);
	drv_desc(&r.d, 3, DRV_BUF, 64, VIRTQ_DESC_F_WRITE, 0);
	drv_kick(&r.d, 3);
	CHECK_EQ_INT(drv_used_idx(&r.d), 1);
	drv_used(&r.d, 0, &id, &len);
	CHECK_EQ_INT(id, 3);
	CHECK_EQ_INT(len, 64);
	CHECK_EQ_INT(r.d.irqs, 1);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_INT_USED);
	drv_w32(&r.d, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_INT_USED);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	{
		int nonzero = 0;

		for (int i = 0; i < 64; i++)
			nonzero += buf[i] != 0;
		CHECK(nonzero > 32);
	}
	CHECK(!needs_reset(&r));
	rig_exit(&r);
}

/* Sets the device up, lets `bad` build a hostile chain at head 0, kicks, and checks the device gave up cleanly. */
static void hostile(void (*bad)(struct drv *d), const char *name)
{
	struct rig r;

	if (rig_init(&r, &virtio_rng_ops, NULL) < 0) {
		test_fail(__FILE__, __LINE__, "%s: no guest memory", name);
		return;
	}
	drv_setup(&r.d, 8, 0);
	bad(&r.d);
	if (!needs_reset(&r))
		test_fail(__FILE__, __LINE__, "%s: the device does not need a reset", name);
	if (drv_used_idx(&r.d) != 0)
		test_fail(__FILE__, __LINE__, "%s: something was put on the used ring", name);
	/* Further notifications do nothing until the driver resets the device... */
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	if (drv_used_idx(&r.d) != 0)
		test_fail(__FILE__, __LINE__, "%s: a broken queue was served", name);
	/* ...after which it works again. */
	drv_setup(&r.d, 8, 0);
	r.d.avail_idx = 0;
	memset(guest_mem_ptr(&r.mem, DRV_AVAIL, 4096), 0, 4096);
	memset(guest_mem_ptr(&r.mem, DRV_USED, 4096), 0, 4096);
	drv_desc(&r.d, 0, DRV_BUF, 16, VIRTQ_DESC_F_WRITE, 0);
	drv_kick(&r.d, 0);
	if (needs_reset(&r) || drv_used_idx(&r.d) != 1)
		test_fail(__FILE__, __LINE__, "%s: the device does not work again after a reset", name);
	rig_exit(&r);
}

static void desc_loop(struct drv *d)
{
	drv_desc(d, 0, DRV_BUF, 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	drv_desc(d, 1, DRV_BUF, 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 0);
	drv_kick(d, 0);
}

static void chain_longer_than_queue(struct drv *d)
{
	for (uint16_t i = 0; i < 8; i++)	/* 0 → 1 → ... → 7 → 0: every descriptor once, then once more */
		drv_desc(d, i, DRV_BUF, 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, (uint16_t)((i + 1) % 8));
	drv_kick(d, 0);
}

static void addr_outside_ram(struct drv *d)
{
	drv_desc(d, 0, RAM - 8, 16, VIRTQ_DESC_F_WRITE, 0);	/* runs 8 bytes past the end of RAM */
	drv_kick(d, 0);
}

static void addr_in_mmio_gap(struct drv *d)
{
	drv_desc(d, 0, 0xfee00000ULL, 16, VIRTQ_DESC_F_WRITE, 0);
	drv_kick(d, 0);
}

static void absurd_length(struct drv *d)
{
	drv_desc(d, 0, DRV_BUF, 0xffffffffu, VIRTQ_DESC_F_WRITE, 0);
	drv_kick(d, 0);
}

static void address_wraps(struct drv *d)
{
	drv_desc(d, 0, 0xfffffffffffffff0ULL, 0x20, VIRTQ_DESC_F_WRITE, 0);
	drv_kick(d, 0);
}

static void head_past_table(struct drv *d)
{
	drv_kick(d, 8);
}

static void next_past_table(struct drv *d)
{
	drv_desc(d, 0, DRV_BUF, 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 200);
	drv_kick(d, 0);
}

static void indirect(struct drv *d)
{
	drv_desc(d, 0, DRV_BUF, 16, VIRTQ_DESC_F_INDIRECT, 0);
	drv_kick(d, 0);
}

static void avail_index_runs_ahead(struct drv *d)
{
	uint8_t *avail = guest_mem_ptr(d->mem, DRV_AVAIL, 4);
	uint16_t idx = 9;	/* nine new entries in a queue of eight */

	drv_desc(d, 0, DRV_BUF, 16, VIRTQ_DESC_F_WRITE, 0);
	memcpy(avail + 2, &idx, 2);
	drv_w32(d, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
}

static void readable_after_writable(struct drv *d)
{
	drv_desc(d, 0, DRV_BUF, 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	drv_desc(d, 1, DRV_BUF + 16, 16, 0, 0);
	drv_kick(d, 0);
}

TEST(virtqueue_descriptor_loop_is_refused)
{
	hostile(desc_loop, "loop");
}

TEST(virtqueue_chain_longer_than_the_queue_is_refused)
{
	hostile(chain_longer_than_queue, "chain longer than the queue");
}

TEST(virtqueue_buffers_outside_guest_ram_are_refused)
{
	hostile(addr_outside_ram, "past the end of RAM");
	hostile(addr_in_mmio_gap, "in the MMIO gap");
	hostile(address_wraps, "address wraps around 2^64");
}

TEST(virtqueue_absurd_length_is_refused)
{
	hostile(absurd_length, "4 GiB buffer");
}

TEST(virtqueue_indices_past_the_table_are_refused)
{
	hostile(head_past_table, "head past the table");
	hostile(next_past_table, "next past the table");
}

TEST(virtqueue_indirect_descriptors_are_refused)
{
	hostile(indirect, "indirect descriptor");
}

TEST(virtqueue_avail_index_running_ahead_is_refused)
{
	hostile(avail_index_runs_ahead, "avail index ahead by more than the queue size");
}

TEST(virtqueue_readable_after_writable_is_refused)
{
	hostile(readable_after_writable, "readable descriptor after a writable one");
}

TEST(virtqueue_rings_outside_ram_make_the_queue_not_ready)
{
	struct rig r;

	REQUIRE(rig_init(&r, &virtio_rng_ops, NULL) == 0);
	drv_w32(&r.d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_NUM, 256);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)(RAM - 4096));	/* 4 KiB of a 4 KiB table fits, */
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)(RAM - 256));	/* 518 bytes of avail ring do not */
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)DRV_USED);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_READY, 1);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_QUEUE_READY), 0);
	CHECK(needs_reset(&r));
	/* A size that is not a power of two, misaligned rings: the same. */
	drv_w32(&r.d, VIRTIO_MMIO_STATUS, 0);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_NUM, 6);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)DRV_DESC);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)DRV_AVAIL);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)DRV_USED);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_READY, 1);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_QUEUE_READY), 0);
	drv_w32(&r.d, VIRTIO_MMIO_STATUS, 0);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_NUM, 8);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)DRV_DESC + 8);
	drv_w32(&r.d, VIRTIO_MMIO_QUEUE_READY, 1);
	CHECK_EQ_INT(drv_r32(&r.d, VIRTIO_MMIO_QUEUE_READY), 0);
	rig_exit(&r);
}

TEST(virtqueue_indices_wrap_around_65536)
{
	struct rig r;
	uint32_t id, len;

	REQUIRE(rig_init(&r, &virtio_rng_ops, NULL) == 0);
	drv_setup(&r.d, 4, 0);
	/* As if 65534 requests had been served: the driver's and the device's free-running indices agree. */
	r.t.q[0].last_avail = r.t.q[0].used_idx = 0xfffe;
	r.d.avail_idx = 0xfffe;
	for (uint16_t i = 0; i < 4; i++)
		drv_desc(&r.d, i, DRV_BUF + 64ULL * i, 8, VIRTQ_DESC_F_WRITE, 0);
	for (uint16_t i = 0; i < 6; i++) {
		drv_kick(&r.d, (uint16_t)(i % 4));
		CHECK_EQ_INT(drv_used_idx(&r.d), (uint16_t)(0xffff + i));
		drv_used(&r.d, (uint16_t)(0xfffe + i), &id, &len);
		CHECK_EQ_INT(id, i % 4);
		CHECK_EQ_INT(len, 8);
	}
	CHECK(!needs_reset(&r));
	CHECK_EQ_INT(r.t.q[0].last_avail, 4);
	rig_exit(&r);
}

TEST(virtio_config_space_reads_outside_it_return_zero)
{
	struct rig r;
	uint8_t b[8] = { 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa };

	REQUIRE(rig_init(&r, &virtio_rng_ops, NULL) == 0);
	virtio_mmio_access(&r.t, VIRTIO_MMIO_CONFIG + 0xe00, b, 8, 0);
	CHECK_EQ_INT(b[0] | b[7], 0);
	memset(b, 0xaa, sizeof(b));
	virtio_mmio_access(&r.t, VIRTIO_MMIO_STATUS + 1, b, 2, 0);	/* unaligned register access */
	CHECK_EQ_INT(b[0] | b[1], 0);
	rig_exit(&r);
}

/* The transport's state as its snapshot section holds it (docs/snapshots.md), slot 0. */
static void state_save(struct virtio_mmio *t, uint8_t out[VIRTIO_DEV_STATE_LEN])
{
	struct virtio_dev_state s = { .slot = 0, .gsi = 5, .base = 0xc0001000ULL };
	struct le_writer w;

	virtio_mmio_get_state(t, &s.transport);
	le_writer_init(&w, out, VIRTIO_DEV_STATE_LEN);
	virtio_dev_state_encode(&s, &w);
}

static const char *state_load(struct virtio_mmio *t, const uint8_t *data, size_t len)
{
	struct virtio_dev_state s;
	const char *bad = virtio_dev_state_parse(data, len, &s);

	return bad ? bad : virtio_mmio_set_state(t, &s.transport);
}

TEST(virtio_state_round_trips_and_resumes_the_queue)
{
	struct rig a, b;
	uint8_t state[VIRTIO_DEV_STATE_LEN], again[VIRTIO_DEV_STATE_LEN];
	uint32_t id, len;

	REQUIRE(rig_init(&a, &virtio_rng_ops, NULL) == 0);
	drv_setup(&a.d, 8, 0);
	drv_desc(&a.d, 0, DRV_BUF, 8, VIRTQ_DESC_F_WRITE, 0);
	drv_kick(&a.d, 0);
	drv_kick(&a.d, 0);
	state_save(&a.t, state);

	/* The "restored" device: guest memory copied (a snapshot carries it), then the transport's state. */
	REQUIRE(rig_init(&b, &virtio_rng_ops, NULL) == 0);
	memcpy(b.mem.host, a.mem.host, 1 << 20);
	CHECK(state_load(&b.t, state, sizeof(state)) == NULL);
	state_save(&b.t, again);
	CHECK(memcmp(state, again, sizeof(state)) == 0);
	/* A request the driver posted but never notified (as if the snapshot swallowed the eventfd) is served on kick. */
	b.d.t = &b.t;
	b.d.mem = &b.mem;
	b.d.num = 8;
	b.d.avail_idx = 2;
	b.t.raise_irq = drv_irq;
	b.t.irq_opaque = &b.d;
	{
		uint8_t *avail = guest_mem_ptr(&b.mem, DRV_AVAIL, 64);
		uint16_t idx = 3, head = 0;

		memcpy(avail + 4 + 2 * 2, &head, 2);
		memcpy(avail + 2, &idx, 2);
	}
	pthread_mutex_lock(&b.t.lock);
	virtio_mmio_kick_all_locked(&b.t);
	pthread_mutex_unlock(&b.t.lock);
	CHECK_EQ_INT(drv_used_idx(&b.d), 3);
	drv_used(&b.d, 2, &id, &len);
	CHECK_EQ_INT(len, 8);
	CHECK_EQ_INT(b.d.irqs, 1);
	rig_exit(&a);
	rig_exit(&b);
}

TEST(virtio_corrupt_state_is_refused)
{
	struct rig r;
	uint8_t state[VIRTIO_DEV_STATE_LEN], bad[VIRTIO_DEV_STATE_LEN];
	uint64_t far = 1ULL << 40;
	uint32_t status_bits = 0x100;

	REQUIRE(rig_init(&r, &virtio_rng_ops, NULL) == 0);
	drv_setup(&r.d, 8, 0);
	state_save(&r.t, state);
	CHECK(state_load(&r.t, state, sizeof(state) - 1) != NULL);
	memcpy(bad, state, sizeof(bad));
	bad[1] = 9;	/* nine queues */
	CHECK(test_str_contains(state_load(&r.t, bad, sizeof(bad)), "number of queues"));
	memcpy(bad, state, sizeof(bad));
	bad[1] = 2;	/* two queues: the device has one */
	CHECK(test_str_contains(state_load(&r.t, bad, sizeof(bad)), "number of queues"));
	memcpy(bad, state, sizeof(bad));
	memcpy(bad + 16, &status_bits, 4);
	CHECK(test_str_contains(state_load(&r.t, bad, sizeof(bad)), "status"));
	memcpy(bad, state, sizeof(bad));
	memcpy(bad + 48 + 8, &far, 8);	/* queue 0's descriptor table, 1 TiB up */
	CHECK(test_str_contains(state_load(&r.t, bad, sizeof(bad)), "not in guest RAM"));
	memcpy(bad, state, sizeof(bad));
	bad[48 + 32 + 2] = 1;	/* queue 1 ready: the device has one queue */
	CHECK(state_load(&r.t, bad, sizeof(bad)) != NULL);
	/* Nothing of the refused states stuck. */
	state_save(&r.t, bad);
	CHECK(memcmp(state, bad, sizeof(bad)) == 0);
	rig_exit(&r);
}
