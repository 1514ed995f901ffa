/*
 * libFuzzer target for the snapshot loader (docs/snapshots.md, "Fuzzing"). Every input is tried as a state blob
 * (snap_parse, snap_validate, then each DEVICE section through its device's decoder, `decoders` below: every
 * device that saves state has one there) and as a memory layer header
 * (mem_layer_header_parse, with the input's length as the file size and with the size its header implies). Each is
 * tried as given, which reaches the size and checksum checks, and again with its total size and checksum made right,
 * so that mutations get past the CRC to the section, bitmap and device checks behind it. Besides the sanitizers,
 * what a parser accepts must hold together: an accepted input that breaks an invariant below aborts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "le_codec.h"
#include "snap_sample.h"
#include "snapfile.h"
#include "uart.h"
#include "virtio.h"
#include "virtio_net.h"
#include "virtio_vsock.h"
#include "vmgenid.h"

#define CHECK(cond)                                                                             \
	do {                                                                                    \
		if (!(cond)) {                                                                  \
			fprintf(stderr, "fuzz_snapshot.c:%d: invariant broken: %s\n", __LINE__, #cond); \
			abort();                                                                \
		}                                                                               \
	} while (0)

static void no_tx(void *opaque, uint8_t byte)
{
}

static size_t no_rx_pull(void *opaque, uint8_t *buf, size_t max)
{
	return 0;
}

static void no_set_irq(void *opaque, int level)
{
}

static const struct uart_hooks no_hooks = { .tx = no_tx, .rx_pull = no_rx_pull, .set_irq = no_set_irq };

static uint64_t le(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = bytes - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* A UART loaded from these bytes saves to bytes that load to the same state, and a guest can then drive it. */
static void load_uart(const uint8_t *data, size_t len)
{
	uint8_t saved[UART_STATE_MAX], again[UART_STATE_MAX];
	struct uart u, v;
	size_t n;

	uart_init(&u, &no_hooks);
	if (uart_load(&u, data, len)) {
		uart_exit(&u);
		return;
	}
	n = uart_save(&u, saved);
	CHECK(n == len);
	uart_init(&v, &no_hooks);
	CHECK(uart_load(&v, saved, n) == NULL);
	CHECK(uart_save(&v, again) == n && memcmp(saved, again, n) == 0);
	uart_exit(&v);
	uart_resync_irq(&u);
	for (int i = 0; i < UART_FIFO_SIZE + 2; i++) {
		uart_read(&u, UART_IIR);
		uart_read(&u, UART_LSR);
		uart_read(&u, UART_RBR);
	}
	uart_exit(&u);
}

/*
 * The other devices: a state their decoder accepts encodes back to the same bytes, and those bytes decode to the
 * same state again. Every decoder checks untrusted bytes, so each must also survive whatever it refuses.
 */
static uint8_t encoded[VIRTIO_BLK_STATE_MAX + 64];

#define ROUND_TRIP(type, decode, encode, data, len)                                                        \
	do {                                                                                               \
		static type s, again;                                                                      \
		struct le_writer w;                                                                        \
		const char *bad = decode(data, len, &s);                                                   \
		if (bad) {                                                                                 \
			CHECK(bad[0]);                                                                     \
			break;                                                                             \
		}                                                                                          \
		le_writer_init(&w, encoded, sizeof(encoded));                                              \
		encode(&s, &w);                                                                            \
		CHECK(!w.overflow && w.len == len && memcmp(encoded, data, len) == 0);                     \
		CHECK(decode(encoded, w.len, &again) == NULL);                                             \
	} while (0)

static void load_vmgenid(const uint8_t *data, size_t len)
{
	ROUND_TRIP(struct vmgenid_state, vmgenid_state_decode, vmgenid_state_encode, data, len);
}

static void load_virtio(const uint8_t *data, size_t len)
{
	ROUND_TRIP(struct virtio_dev_state, virtio_dev_state_parse, virtio_dev_state_encode, data, len);
}

static void load_virtio_blk(const uint8_t *data, size_t len)
{
	ROUND_TRIP(struct virtio_blk_state, virtio_blk_state_decode, virtio_blk_state_encode, data, len);
}

static void load_virtio_vsock(const uint8_t *data, size_t len)
{
	ROUND_TRIP(struct virtio_vsock_state, virtio_vsock_state_decode, virtio_vsock_state_encode, data, len);
}

static void load_virtio_net(const uint8_t *data, size_t len)
{
	ROUND_TRIP(struct virtio_net_state, virtio_net_state_decode, virtio_net_state_encode, data, len);
}

/* Every device that saves state (DEVICE_REGISTER with .save), by the name of its section. */
static const struct {
	const char *name;
	void (*load)(const uint8_t *data, size_t len);
} decoders[] = {
	{ "com1", load_uart },
	{ "vmgenid", load_vmgenid },
	{ "virtio-blk", load_virtio_blk },
	{ "virtio-rng", load_virtio },
	{ "virtio-vsock", load_virtio_vsock },
	{ "virtio-console", load_virtio },
	{ "virtio-net", load_virtio_net },
	{ "virtio-blk-1", load_virtio_blk },
	{ "virtio-blk-2", load_virtio_blk },
	{ "virtio-blk-3", load_virtio_blk },
	{ "virtio-blk-4", load_virtio_blk },
};

static void load_device(const uint8_t *data, size_t len)
{
	size_t name_len = data[0];	/* snap_validate: 1 <= name_len < len */

	for (size_t i = 0; i < sizeof(decoders) / sizeof(decoders[0]); i++)
		if (strlen(decoders[i].name) == name_len && !memcmp(data + 1, decoders[i].name, name_len))
			decoders[i].load(data + 1 + name_len, len - 1 - name_len);
}

static void load_state(const uint8_t *buf, size_t len)
{
	struct vm_error err = { 0 };
	struct snap_vm_info info;
	struct snap_blob b;

	if (snap_parse(buf, len, "state", &b, &err) < 0) {
		CHECK(err.code > 0 && err.msg[0]);
		return;
	}
	for (uint32_t i = 0; i < b.nr_sections; i++) {
		const struct snap_section *s = &b.sections[i];

		CHECK(snap_kind_name(s->kind));
		CHECK(s->data >= buf + SNAP_HEADER_SIZE + 16 && s->len <= (uint64_t)(buf + len - SNAP_TRAILER_SIZE - s->data));
	}
	if (snap_validate(&b, "state", &info, &err) < 0) {
		CHECK(err.code > 0 && err.msg[0]);
		snap_blob_free(&b);
		return;
	}
	CHECK(info.nr_cpus >= 1 && info.nr_cpus <= SNAP_MAX_CPUS && info.mem_size);
	CHECK(!!info.parent_path[0] == snap_has_parent(&b));
	for (uint32_t i = 0; i < b.nr_sections; i++) {
		const struct snap_section *s = &b.sections[i];

		if (s->kind == SNAP_DEVICE)
			load_device(s->data, (size_t)s->len);
	}
	snap_blob_free(&b);
}

static void load_layer(const uint8_t *buf, size_t len, uint64_t file_size)
{
	struct vm_error err = { 0 };
	struct mem_layer_header h;
	const uint8_t *bitmap;
	uint8_t *encoded;
	size_t bitmap_bytes;
	long r = mem_layer_header_parse(buf, len, file_size, "memory", &h, &bitmap, &err);

	if (r < 0) {
		CHECK(err.code > 0 && err.msg[0] && !bitmap);
		return;
	}
	if (r > 0) {
		CHECK((uint64_t)r == h.data_offset && (uint64_t)r > len && !bitmap);
		return;
	}
	CHECK(h.data_offset <= len && file_size == h.data_offset + h.mem_size && h.pages <= h.mem_size / 4096);
	CHECK(h.kind == MEM_LAYER_DIFF ? bitmap == buf + MEM_LAYER_HEADER_SIZE : !bitmap);
	/* Encoding what was read gives back the header and bitmap byte for byte. */
	bitmap_bytes = h.kind == MEM_LAYER_DIFF ? (size_t)(h.mem_size / SNAP_PAGE_SIZE / 8) : 0;
	encoded = malloc((size_t)h.data_offset);
	CHECK(encoded);
	mem_layer_header_encode(&h, bitmap, encoded);
	CHECK(memcmp(encoded, buf, MEM_LAYER_HEADER_SIZE + bitmap_bytes) == 0);
	free(encoded);
}

/* The header's CRC made right for its own fields, where its bitmap (if any) is within the input. */
static void reseal_layer(uint8_t *buf, size_t len)
{
	uint64_t mem_size = le(buf + 16, 8), crc;
	uint8_t hdr[MEM_LAYER_HEADER_SIZE];

	memcpy(hdr, buf, sizeof(hdr));
	memset(hdr + 56, 0, 8);
	crc = snap_crc64(0, hdr, sizeof(hdr));
	if (le(buf + 12, 4) == MEM_LAYER_DIFF) {
		uint64_t bitmap_bytes = (mem_size / SNAP_PAGE_SIZE + 7) / 8;

		if (bitmap_bytes > len - MEM_LAYER_HEADER_SIZE)
			return;
		crc = snap_crc64(crc, buf + MEM_LAYER_HEADER_SIZE, (size_t)bitmap_bytes);
	}
	for (int i = 0; i < 8; i++)
		buf[56 + i] = (uint8_t)(crc >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	load_state(data, size);
	load_layer(data, size, size);
	if (size < MEM_LAYER_HEADER_SIZE)
		return 0;
	load_layer(data, size, le(data + 24, 8) + le(data + 16, 8));
	/* A copy of exactly `size` bytes, so that reading past the end is still caught. */
	copy = malloc(size);
	CHECK(copy);
	memcpy(copy, data, size);
	if (size >= SNAP_HEADER_SIZE + SNAP_TRAILER_SIZE && !memcmp(data, SNAP_MAGIC, 8)) {
		sample_reseal(copy, size);
		load_state(copy, size);
	} else if (!memcmp(data, MEM_LAYER_MAGIC, 8)) {
		reseal_layer(copy, size);
		load_layer(copy, size, le(copy + 24, 8) + le(copy + 16, 8));
	}
	free(copy);
	return 0;
}
