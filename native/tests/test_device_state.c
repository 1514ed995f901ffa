/*
 * Device state as plain data (docs/snapshots.md, "Device sections"; docs/devices.md): every device's state struct
 * encodes and decodes back to itself, its decoder refuses bytes that do not hold together and says why, the one
 * little-endian codec keeps to its bounds, and a snapshot of the old format is refused with its version named.
 */
#include "test.h"
#include "error.h"
#include "le_codec.h"
#include "snap_sample.h"
#include "snapfile.h"
#include "uart.h"
#include "virtio.h"
#include "virtio_net.h"
#include "virtio_vsock.h"
#include "vmgenid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the codec ---- */

TEST(codec_writes_little_endian_and_stops_at_the_end_of_its_buffer)
{
	uint8_t buf[15];
	struct le_writer w;

	le_writer_init(&w, buf, sizeof(buf));
	le_put_u8(&w, 0x01);
	le_put_u16(&w, 0x0302);
	le_put_u32(&w, 0x07060504);
	le_put_u64(&w, 0x0f0e0d0c0b0a0908ULL);	/* 8 bytes where 8 are left */
	CHECK(!w.overflow);
	CHECK_EQ_INT(w.len, 15);
	for (int i = 0; i < 15; i++)
		CHECK_EQ_INT(buf[i], i + 1);
	le_put_u8(&w, 0xff);
	CHECK(w.overflow);
	CHECK_EQ_INT(w.len, 15);
	le_writer_init(&w, buf, 3);
	le_put_u32(&w, 0xdeadbeef);	/* does not fit: nothing of it is written */
	CHECK(w.overflow && w.len == 0);
}

TEST(codec_reader_past_the_end_reads_zeros_and_says_how_short_the_input_was)
{
	static const uint8_t in[] = { 0x34, 0x12, 0x78, 0x56, 0x34 };
	struct le_reader r;

	le_reader_init(&r, in, sizeof(in));
	CHECK_EQ_INT(le_get_u16(&r), 0x1234);
	CHECK_EQ_INT(le_get_u32(&r), 0);	/* 3 bytes left: not read */
	CHECK_EQ_INT(le_get_u8(&r), 0);		/* and nothing after */
	CHECK_STR_CONTAINS(le_finish(&r), "5 bytes is too short");

	le_reader_init(&r, in, sizeof(in));
	CHECK_EQ_INT(le_get_u16(&r), 0x1234);
	CHECK_STR_CONTAINS(le_finish(&r), "3 bytes left over after 2");
	le_reader_init(&r, in, sizeof(in));
	le_get_zeros(&r, 1, "the first byte is not zero");
	le_fail(&r, "a later reason");	/* the first reason is the one kept */
	CHECK_STR_CONTAINS(le_finish(&r), "the first byte is not zero");
	le_reader_init(&r, in, 2);
	CHECK(le_get_u16(&r) == 0x1234 && le_finish(&r) == NULL);
}

/* ---- each device's state ---- */

/* Encodes `s` with `encode`, decodes the bytes with `decode` and checks the result encodes to the same bytes. */
#define CHECK_ROUND_TRIP(type, s, encode, decode, want_len)                                        \
	do {                                                                                       \
		static uint8_t a_[VIRTIO_BLK_STATE_MAX], b_[VIRTIO_BLK_STATE_MAX];                 \
		static type back_;                                                                 \
		struct le_writer w_;                                                               \
		size_t n_;                                                                         \
		le_writer_init(&w_, a_, sizeof(a_));                                               \
		encode(&(s), &w_);                                                                 \
		n_ = w_.len;                                                                       \
		CHECK_EQ_INT(n_, (want_len));                                                      \
		CHECK(decode(a_, n_, &back_) == NULL);                                             \
		le_writer_init(&w_, b_, sizeof(b_));                                               \
		encode(&back_, &w_);                                                               \
		CHECK(w_.len == n_ && memcmp(a_, b_, n_) == 0);                                    \
	} while (0)

static struct virtio_dev_state busy_virtio(uint8_t slot, uint8_t nr_queues)
{
	struct virtio_dev_state s = { .slot = slot, .gsi = 5u + slot, .base = 0xc0001000ULL + 0x1000ULL * slot };

	s.transport = (struct virtio_mmio_state){ .nr_queues = nr_queues, .status = 0x0f, .dev_features_sel = 1,
						  .drv_features_sel = 1, .queue_sel = (uint32_t)nr_queues - 1,
						  .int_status = 3, .config_gen = 7,
						  .drv_features = 1ULL << VIRTIO_F_VERSION_1 };
	for (int q = 0; q < nr_queues; q++)
		s.transport.q[q] = (struct virtq_state){ .num = 256, .ready = 1, .broken = (uint8_t)(q == 1),
							 .last_avail = 65535, .used_idx = 65535,
							 .desc = 0x100000000ULL + 4096u * q, .avail = 0x2000,
							 .used = 0x3000 };
	return s;
}

TEST(uart_state_round_trips_with_its_fifo_and_a_polled_byte_offered)
{
	struct uart_state s = { .ier = 0x0f, .lcr = 0x83, .mcr = 0x1f, .lsr = UART_LSR_OE, .scr = 0xa5, .dll = 1,
				.dlm = 2, .fcr = 0xc1, .thri_pending = 1, .rx_len = UART_FIFO_SIZE };
	struct uart_state offered = { .lcr = 0x03, .mcr = 0x0b, .lsr = UART_LSR_DR, .dll = 12, .fcr = 0xc1 };

	for (int i = 0; i < UART_FIFO_SIZE; i++)
		s.rx[i] = (uint8_t)('a' + i);
	CHECK_ROUND_TRIP(struct uart_state, s, uart_state_encode, uart_state_decode, UART_STATE_MAX);
	CHECK_ROUND_TRIP(struct uart_state, offered, uart_state_encode, uart_state_decode, UART_STATE_FIXED);
}

TEST(vmgenid_state_round_trips)
{
	struct vmgenid_state s = { .addr = 0xef000, .gsi = 23 };

	CHECK_ROUND_TRIP(struct vmgenid_state, s, vmgenid_state_encode, vmgenid_state_decode, VMGENID_STATE_LEN);
}

TEST(virtio_device_state_round_trips_for_one_two_and_three_queues)
{
	for (uint8_t n = 1; n <= VIRTIO_MAX_QUEUES; n++) {
		struct virtio_dev_state s = busy_virtio(n, n);

		CHECK_ROUND_TRIP(struct virtio_dev_state, s, virtio_dev_state_encode, virtio_dev_state_parse,
				 VIRTIO_DEV_STATE_LEN);
	}
}

TEST(virtio_blk_state_round_trips_with_the_longest_path)
{
	static struct virtio_blk_state s;

	s.dev = busy_virtio(0, 1);
	s.writable = 1;
	s.disk_size = 1ULL << 40;
	for (int i = 0; i < 16; i++)
		s.layer_id[i] = (uint8_t)(0xf0 + i);
	memset(s.path, 'p', VIRTIO_BLK_PATH_MAX);
	s.path[0] = '/';
	s.path[VIRTIO_BLK_PATH_MAX] = 0;
	CHECK_ROUND_TRIP(struct virtio_blk_state, s, virtio_blk_state_encode, virtio_blk_state_decode,
			 VIRTIO_BLK_STATE_MAX);
	strcpy(s.path, "/d");
	s.writable = 0;
	CHECK_ROUND_TRIP(struct virtio_blk_state, s, virtio_blk_state_encode, virtio_blk_state_decode,
			 VIRTIO_DEV_STATE_LEN + 36 + 2);
}

TEST(virtio_vsock_state_round_trips_with_the_highest_cid)
{
	struct virtio_vsock_state s = { .dev = busy_virtio(2, 3), .guest_cid = UINT32_MAX };

	CHECK_ROUND_TRIP(struct virtio_vsock_state, s, virtio_vsock_state_encode, virtio_vsock_state_decode,
			 VIRTIO_VSOCK_STATE_LEN);
}

/* ---- what each decoder refuses ---- */

static size_t encoded_virtio(const struct virtio_dev_state *s, uint8_t *buf)
{
	struct le_writer w;

	le_writer_init(&w, buf, VIRTIO_DEV_STATE_LEN);
	virtio_dev_state_encode(s, &w);
	return w.len;
}

TEST(virtio_device_state_that_does_not_hold_together_is_refused_with_the_reason)
{
	struct virtio_dev_state good = busy_virtio(1, 1), s;
	uint8_t buf[VIRTIO_DEV_STATE_LEN + 1];
	static const struct {
		size_t at;
		uint8_t value;
		const char *want;
	} cases[] = {
		{ 1, 0, "number of queues" },
		{ 1, 4, "number of queues" },
		{ 2, 1, "reserved bytes" },
		{ 16 + 1, 0x01, "device status has unknown bits" },		/* status bit 8 */
		{ 40, 0x04, "interrupt status has unknown bits" },
		{ 48 + 1, 0x02, "queue's state is out of range" },		/* size 512 */
		{ 48 + 2, 2, "queue's state is out of range" },		/* ready 2 */
		{ 48 + 32 + 3, 1, "a queue the device does not have" },	/* queue 1 broken */
	};

	REQUIRE(encoded_virtio(&good, buf) == VIRTIO_DEV_STATE_LEN);
	CHECK(virtio_dev_state_parse(buf, VIRTIO_DEV_STATE_LEN, &s) == NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		encoded_virtio(&good, buf);
		buf[cases[i].at] = cases[i].value;
		CHECK_STR_CONTAINS(virtio_dev_state_parse(buf, VIRTIO_DEV_STATE_LEN, &s), cases[i].want);
	}
	encoded_virtio(&good, buf);
	CHECK_STR_CONTAINS(virtio_dev_state_parse(buf, VIRTIO_DEV_STATE_LEN - 1, &s), "143 bytes is too short");
	CHECK_STR_CONTAINS(virtio_dev_state_parse(buf, VIRTIO_DEV_STATE_LEN + 1, &s), "1 bytes left over");
}

TEST(virtio_blk_state_with_a_bad_path_or_flag_is_refused_with_the_reason)
{
	static struct virtio_blk_state s, back;
	static uint8_t buf[VIRTIO_BLK_STATE_MAX + 8];
	struct le_writer w;
	size_t n, at = VIRTIO_DEV_STATE_LEN;

	s.dev = busy_virtio(0, 1);
	s.disk_size = 4096;
	strcpy(s.path, "/disk");
	le_writer_init(&w, buf, sizeof(buf));
	virtio_blk_state_encode(&s, &w);
	n = w.len;
	REQUIRE(virtio_blk_state_decode(buf, n, &back) == NULL);
	CHECK(!strcmp(back.path, "/disk"));
	buf[at] = 2;
	CHECK_STR_CONTAINS(virtio_blk_state_decode(buf, n, &back), "writable flag");
	buf[at] = 0;
	buf[at + 3] = 1;
	CHECK_STR_CONTAINS(virtio_blk_state_decode(buf, n, &back), "reserved bytes");
	buf[at + 3] = 0;
	CHECK_STR_CONTAINS(virtio_blk_state_decode(buf, n - 1, &back), "path length does not match");
	CHECK_STR_CONTAINS(virtio_blk_state_decode(buf, at + 20, &back), "is too short");
	buf[n - 2] = 0;	/* "/di\0k" */
	CHECK_STR_CONTAINS(virtio_blk_state_decode(buf, n, &back), "NUL");
	buf[n - 2] = 's';
	buf[at + 32] = 0;
	buf[at + 33] = 0;	/* path length 0 */
	CHECK_STR_CONTAINS(virtio_blk_state_decode(buf, at + 36, &back), "path length does not match");
}

TEST(vsock_and_vmgenid_states_out_of_range_are_refused_with_the_reason)
{
	struct virtio_vsock_state v = { .dev = busy_virtio(2, 3), .guest_cid = 2 }, back;
	struct vmgenid_state g;
	uint8_t buf[VIRTIO_VSOCK_STATE_LEN], gen[VMGENID_STATE_LEN] = { 0 };
	struct le_writer w;

	le_writer_init(&w, buf, sizeof(buf));
	virtio_vsock_state_encode(&v, &w);
	CHECK_STR_CONTAINS(virtio_vsock_state_decode(buf, sizeof(buf), &back), "CID is out of range");
	v.guest_cid = 1ULL << 32;
	le_writer_init(&w, buf, sizeof(buf));
	virtio_vsock_state_encode(&v, &w);
	CHECK_STR_CONTAINS(virtio_vsock_state_decode(buf, sizeof(buf), &back), "CID is out of range");
	gen[12] = 1;
	CHECK_STR_CONTAINS(vmgenid_state_decode(gen, sizeof(gen), &g), "reserved");
	CHECK_STR_CONTAINS(vmgenid_state_decode(gen, 8, &g), "8 bytes is too short");
}

/* ---- the whole snapshot ---- */

TEST(a_blob_with_every_device_section_is_valid_and_each_section_decodes)
{
	struct snap_sample sp;
	struct snap_blob b;
	struct snap_vm_info info;
	struct vm_error err = { 0 };
	size_t len;
	uint8_t *blob;
	int found = 0;

	sample_init(&sp, 1, 64ULL << 20, NULL);
	sample_add_devices(&sp);
	blob = sample_build(&sp, &len);
	REQUIRE(blob);
	REQUIRE(snap_parse(blob, len, "state", &b, &err) == 0);
	CHECK_OK(snap_validate(&b, "state", &info, &err), err.msg);
	for (uint32_t i = 0; i < b.nr_sections; i++) {
		const struct snap_section *s = &b.sections[i];
		const uint8_t *state = s->data + 1 + s->data[0];
		size_t n = (size_t)s->len - 1 - s->data[0];
		static struct virtio_blk_state blk;
		struct virtio_vsock_state vsock;
		struct virtio_net_state net;
		struct virtio_dev_state dev;
		struct vmgenid_state gen;
		struct uart_state uart;
		const char *name = (const char *)s->data + 1, *bad = "not a device this test knows";

		if (s->kind != SNAP_DEVICE)
			continue;
		if (s->data[0] == 4 && !memcmp(name, "com1", 4))
			bad = uart_state_decode(state, n, &uart);
		else if (s->data[0] == 7 && !memcmp(name, "vmgenid", 7))
			bad = vmgenid_state_decode(state, n, &gen);
		else if ((s->data[0] == 10 && !memcmp(name, "virtio-blk", 10)) ||
			 (s->data[0] == 12 && !memcmp(name, "virtio-blk-", 11)))	/* the root disk, a volume */
			bad = virtio_blk_state_decode(state, n, &blk);
		else if (s->data[0] == 12 && !memcmp(name, "virtio-vsock", 12))
			bad = virtio_vsock_state_decode(state, n, &vsock);
		else if (s->data[0] == 10 && !memcmp(name, "virtio-net", 10))
			bad = virtio_net_state_decode(state, n, &net);
		else if ((s->data[0] == 10 && !memcmp(name, "virtio-rng", 10)) ||
			 (s->data[0] == 14 && !memcmp(name, "virtio-console", 14)))
			bad = virtio_dev_state_parse(state, n, &dev);
		CHECK_OK(bad ? -1 : 0, bad ? bad : "");
		found++;
	}
	CHECK_EQ_INT(found, SAMPLE_NR_DEVICES);
	snap_blob_free(&b);
	free(blob);
	sample_free(&sp);
}

/*
 * A real snapshot of format 1 (an echo guest with COM1, vmgenid, virtio-blk, -rng, -vsock and -console, taken by
 * the Smol before this format) is refused, saying which version it is and that an older Smol wrote it.
 */
TEST(a_snapshot_of_the_old_format_is_refused_naming_its_version)
{
	FILE *f = fopen("tests/samples/state-v1.bin", "rb");
	static uint8_t buf[1 << 16];
	struct vm_error err = { 0 };
	struct snap_blob b;
	size_t len;

	REQUIRE(f);
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	REQUIRE(len > SNAP_HEADER_SIZE && !memcmp(buf, SNAP_MAGIC, 8) && buf[8] == 1);
	CHECK(snap_parse(buf, len, "snaps/old/state", &b, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "snaps/old/state has snapshot format version 1; this Smol reads version 2 "
			   "(written by an older Smol)");
}
