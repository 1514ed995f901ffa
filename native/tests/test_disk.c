/*
 * Disk layer chains (disk.c, docs/disks.md) and virtio-blk over them (virtio_blk.c), driven through the transport
 * as a driver would.
 */
#include "test.h"
#include "disk.h"
#include "error.h"
#include "virtio_driver.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BASE_SIZE (1ULL << 20)	/* 16 clusters */

/* A raw base image whose byte i is (i / 512) & 0xff: every sector says which it is. */
static int make_base(char path[TEST_PATH_MAX])
{
	uint8_t *data = malloc(BASE_SIZE);
	int ret;

	if (!data)
		return -1;
	for (uint64_t i = 0; i < BASE_SIZE; i++)
		data[i] = (uint8_t)(i / 512);
	ret = test_tmpfile(path, data, BASE_SIZE);
	free(data);
	return ret;
}

static void layer_path(char out[TEST_PATH_MAX], const char *name)
{
	snprintf(out, TEST_PATH_MAX, "%s/%s", test_tmpdir(), name);
}

static int read_byte(struct disk *d, uint64_t off)
{
	struct vm_error err = { 0 };
	uint8_t b;

	return disk_read(d, off, &b, 1, &err) < 0 ? -1 : b;
}

TEST(disk_layer_reads_fall_through_and_writes_copy_on_write)
{
	char base[TEST_PATH_MAX], top[TEST_PATH_MAX];
	struct vm_error err = { 0 };
	struct disk *d;
	uint8_t buf[1000];

	REQUIRE(make_base(base) == 0);
	layer_path(top, "cow-top");
	CHECK_OK(disk_layer_create(top, base, &err), err.msg);
	CHECK_OK(disk_open(top, 0, &d, &err), err.msg);
	REQUIRE(d);
	CHECK_EQ_INT(d->size, BASE_SIZE);
	CHECK(!d->read_only);
	CHECK_EQ_INT(read_byte(d, 512 * 7 + 3), 7);	/* from the base */
	/* A write across a cluster boundary: both clusters copied up, the rest of them kept. */
	memset(buf, 0xee, sizeof(buf));
	CHECK_OK(disk_write(d, DISK_CLUSTER_SIZE - 500, buf, sizeof(buf), &err), err.msg);
	CHECK_EQ_INT(read_byte(d, DISK_CLUSTER_SIZE - 501), (uint8_t)((DISK_CLUSTER_SIZE - 501) / 512));
	CHECK_EQ_INT(read_byte(d, DISK_CLUSTER_SIZE - 500), 0xee);
	CHECK_EQ_INT(read_byte(d, DISK_CLUSTER_SIZE + 499), 0xee);
	CHECK_EQ_INT(read_byte(d, DISK_CLUSTER_SIZE + 500), (uint8_t)((DISK_CLUSTER_SIZE + 500) / 512));
	CHECK_OK(disk_flush(d, &err), err.msg);
	disk_close(d);
	/* The base is untouched; the layer still has the write after reopening. */
	CHECK_OK(disk_open(base, 0, &d, &err), err.msg);
	CHECK(d->read_only);
	CHECK_EQ_INT(read_byte(d, DISK_CLUSTER_SIZE - 500), (uint8_t)((DISK_CLUSTER_SIZE - 500) / 512));
	disk_close(d);
	CHECK_OK(disk_open(top, 0, &d, &err), err.msg);
	CHECK_EQ_INT(read_byte(d, DISK_CLUSTER_SIZE), 0xee);
	/* Past the end: refused. */
	CHECK(disk_read(d, BASE_SIZE - 1, buf, 2, &err) < 0);
	CHECK(disk_write(d, BASE_SIZE, buf, 1, &err) < 0);
	/* A second writer of the same layer is refused; a reader is not. */
	{
		struct disk *other = NULL;

		CHECK(disk_open(top, 0, &other, &err) < 0);
		CHECK_STR_CONTAINS(err.msg, "another VM is writing to it");
		CHECK_OK(disk_open(top, 1, &other, &err), err.msg);
		disk_close(other);
	}
	disk_close(d);
}

TEST(disk_freeze_stacks_a_new_layer_and_keeps_the_frozen_one)
{
	char base[TEST_PATH_MAX], l1[TEST_PATH_MAX], l2[TEST_PATH_MAX], fork[TEST_PATH_MAX];
	struct vm_error err = { 0 };
	struct disk *d, *f;
	uint8_t a = 0xa1, b = 0xb2;
	struct stat sb;

	REQUIRE(make_base(base) == 0);
	layer_path(l1, "freeze-1");
	layer_path(l2, "freeze-2");
	layer_path(fork, "freeze-fork");
	CHECK_OK(disk_layer_create(l1, base, &err), err.msg);
	CHECK_OK(disk_open(l1, 0, &d, &err), err.msg);
	REQUIRE(d);
	CHECK_OK(disk_write(d, 100, &a, 1, &err), err.msg);
	CHECK_OK(disk_freeze_and_stack(d, l2, &err), err.msg);
	CHECK(strcmp(disk_top_path(d), l2) == 0 || test_str_contains(disk_top_path(d), "freeze-2"));
	CHECK_OK(disk_write(d, 100, &b, 1, &err), err.msg);
	CHECK_EQ_INT(read_byte(d, 100), 0xb2);
	CHECK(stat(l1, &sb) == 0 && (sb.st_mode & 0777) == 0444);
	/* A fork: its own layer over the frozen one sees the frozen state, not the parent's later write. */
	CHECK_OK(disk_layer_create(fork, l1, &err), err.msg);
	CHECK_OK(disk_open(fork, 0, &f, &err), err.msg);
	REQUIRE(f);
	CHECK_EQ_INT(read_byte(f, 100), 0xa1);
	CHECK_EQ_INT(read_byte(f, 101), 0);
	CHECK_OK(disk_write(f, 100, &b, 1, &err), err.msg);
	disk_close(f);
	/* The frozen layer opens read-only; a layer on an unfrozen one is refused. */
	CHECK_OK(disk_open(l1, 0, &f, &err), err.msg);
	REQUIRE(f);
	CHECK(f->read_only);
	CHECK(disk_write(f, 0, &a, 1, &err) < 0);
	disk_close(f);
	layer_path(fork, "freeze-on-unfrozen");
	CHECK(disk_layer_create(fork, l2, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "not frozen");
	disk_close(d);
}

/* Byte `off` of the disk whose top is `path`, opened afresh (read-only). */
static int byte_of(const char *path, uint64_t off)
{
	struct vm_error err = { 0 };
	struct disk *d;
	int b;

	if (disk_open(path, 1, &d, &err) < 0)
		return -1;
	b = read_byte(d, off);
	disk_close(d);
	return b;
}

TEST(disk_flatten_puts_a_long_chain_into_one_layer_that_reads_the_same)
{
	char base[TEST_PATH_MAX], names[40][TEST_PATH_MAX], child[TEST_PATH_MAX];
	struct disk_flatten_stats st;
	struct vm_error err = { 0 };
	struct disk *d, *c;
	const int n = 40;	/* checkpoints: 40 frozen layers, then the top */

	REQUIRE(make_base(base) == 0);
	layer_path(names[0], "flat-0");
	CHECK_OK(disk_layer_create(names[0], base, &err), err.msg);
	CHECK_OK(disk_open(names[0], 0, &d, &err), err.msg);
	REQUIRE(d);
	/* Layer i writes byte i of cluster i % 4 and overwrites byte 0 of cluster 0: the newest write must win. */
	for (int i = 0; i < n; i++) {
		uint8_t v = (uint8_t)(0x40 + i);

		CHECK_OK(disk_write(d, (uint64_t)(i % 4) * DISK_CLUSTER_SIZE + 1 + i, &v, 1, &err), err.msg);
		CHECK_OK(disk_write(d, 0, &v, 1, &err), err.msg);
		if (i + 1 < n) {
			snprintf(names[i + 1], TEST_PATH_MAX, "%s/flat-%d", test_tmpdir(), i + 1);
			CHECK_OK(disk_freeze_and_stack(d, names[i + 1], &err), err.msg);
		}
	}
	layer_path(child, "flat-top");
	CHECK_OK(disk_freeze_and_stack(d, child, &err), err.msg);	/* names[n-1] frozen; the VM goes on on `child` */
	/* Flattening the newest frozen layer: one layer on the base, same reads; `child` (stacked on it) still opens. */
	CHECK_OK(disk_flatten(names[n - 1], &st, &err), err.msg);
	CHECK_EQ_INT(st.depth_before, n);
	CHECK_EQ_INT(st.depth_after, 1);
	CHECK_EQ_INT(st.bytes, 4 * DISK_CLUSTER_SIZE);
	CHECK_EQ_INT(byte_of(names[n - 1], 0), 0x40 + n - 1);
	for (int i = 0; i < n; i++)
		CHECK_EQ_INT(byte_of(names[n - 1], (uint64_t)(i % 4) * DISK_CLUSTER_SIZE + 1 + i), 0x40 + i);
	CHECK_EQ_INT(byte_of(names[n - 1], 5 * DISK_CLUSTER_SIZE + 7), 5 * DISK_CLUSTER_SIZE / 512 % 256);
	/* What was below is no longer needed: gone, and the flat layer and the VM's still read right. */
	for (int i = 0; i < n - 1; i++)
		CHECK(unlink(names[i]) == 0);
	CHECK_OK(disk_open(child, 1, &c, &err), err.msg);
	REQUIRE(c);
	CHECK_EQ_INT(read_byte(c, 0), 0x40 + n - 1);
	CHECK(c->top->below && !c->top->below->below);
	disk_close(c);
	CHECK_EQ_INT(read_byte(d, 2 * DISK_CLUSTER_SIZE + 1 + 2), 0x40 + 2); /* the running chain, opened before */
	/* Again: nothing to do. A writable layer is refused. */
	CHECK_OK(disk_flatten(names[n - 1], &st, &err), err.msg);
	CHECK_EQ_INT(st.bytes, 0);
	CHECK(disk_flatten(child, &st, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "not a frozen disk layer");
	disk_close(d);
}

TEST(disk_export_writes_the_chain_as_one_raw_image_that_reads_the_same)
{
	char base[TEST_PATH_MAX], l1[TEST_PATH_MAX], l2[TEST_PATH_MAX], out[TEST_PATH_MAX];
	struct disk_export_stats st = { 0 };
	struct vm_error err = { 0 };
	uint8_t *want, *got;
	struct disk *d;
	uint8_t a = 0xa1, z[512] = { 0 };
	int fd;

	REQUIRE(make_base(base) == 0);
	layer_path(l1, "export-1");
	layer_path(l2, "export-2");
	layer_path(out, "export.raw");
	CHECK_OK(disk_layer_create(l1, base, &err), err.msg);
	CHECK_OK(disk_open(l1, 0, &d, &err), err.msg);
	REQUIRE(d);
	CHECK_OK(disk_write(d, 70000, &a, 1, &err), err.msg);
	CHECK_OK(disk_freeze_and_stack(d, l2, &err), err.msg);
	CHECK_OK(disk_write(d, 3 * 65536, z, sizeof(z), &err), err.msg);	/* a cluster of zeros from here on */
	for (int i = 0; i < 128; i++)
		CHECK_OK(disk_write(d, 3 * 65536 + (uint64_t)i * 512, z, sizeof(z), &err), err.msg);
	CHECK_OK(disk_flush(d, &err), err.msg);
	want = malloc(BASE_SIZE);
	got = calloc(1, BASE_SIZE);
	REQUIRE(want && got);
	CHECK_OK(disk_read(d, 0, want, BASE_SIZE, &err), err.msg);
	disk_close(d);
	CHECK_OK(disk_export(l2, out, &st, &err), err.msg);
	CHECK(st.size == BASE_SIZE);
	CHECK(st.bytes == BASE_SIZE - 65536);	/* the zeroed cluster is a hole */
	fd = open(out, O_RDONLY);
	REQUIRE(fd >= 0);
	CHECK(read(fd, got, BASE_SIZE) == (ssize_t)BASE_SIZE);
	close(fd);
	CHECK(memcmp(want, got, BASE_SIZE) == 0);
	CHECK_EQ_INT(got[70000], 0xa1);
	/* An existing output is refused, and nothing is left of a failed export. */
	CHECK(disk_export(l2, out, NULL, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "cannot create");
	layer_path(out, "export-missing.raw");
	CHECK(disk_export("/nonexistent/layer", out, NULL, &err) < 0);
	CHECK(access(out, F_OK) != 0);
	free(want);
	free(got);
}

TEST(disk_unflushed_write_is_lost_cleanly_after_a_crash)
{
	char base[TEST_PATH_MAX], top[TEST_PATH_MAX];
	struct vm_error err = { 0 };
	struct disk *d;
	uint8_t x = 0x55;

	REQUIRE(make_base(base) == 0);
	layer_path(top, "torn");
	CHECK_OK(disk_layer_create(top, base, &err), err.msg);
	CHECK_OK(disk_open(top, 0, &d, &err), err.msg);
	REQUIRE(d);
	CHECK_OK(disk_write(d, 3 * DISK_CLUSTER_SIZE + 7, &x, 1, &err), err.msg);	/* data out, map not */
	CHECK_OK(disk_write(d, 5 * DISK_CLUSTER_SIZE, &x, 1, &err), err.msg);
	CHECK_OK(disk_flush(d, &err), err.msg);
	CHECK_OK(disk_write(d, 9 * DISK_CLUSTER_SIZE, &x, 1, &err), err.msg);	/* after the flush */
	/* "Crash": drop everything in memory, and cut the last cluster's data in half as a torn write would. */
	{
		struct stat sb;

		REQUIRE(stat(top, &sb) == 0);
		REQUIRE(truncate(top, sb.st_size - DISK_CLUSTER_SIZE / 2) == 0);
	}
	disk_close(d);
	CHECK_OK(disk_open(top, 0, &d, &err), err.msg);
	REQUIRE(d);
	CHECK_EQ_INT(read_byte(d, 3 * DISK_CLUSTER_SIZE + 7), 0x55);	/* flushed: kept */
	CHECK_EQ_INT(read_byte(d, 5 * DISK_CLUSTER_SIZE), 0x55);
	CHECK_EQ_INT(read_byte(d, 9 * DISK_CLUSTER_SIZE), (uint8_t)(9 * DISK_CLUSTER_SIZE / 512));	/* lost */
	/* And the layer goes on working: new clusters go past the torn tail. */
	CHECK_OK(disk_write(d, 9 * DISK_CLUSTER_SIZE, &x, 1, &err), err.msg);
	CHECK_OK(disk_flush(d, &err), err.msg);
	disk_close(d);
	CHECK_OK(disk_open(top, 0, &d, &err), err.msg);
	REQUIRE(d);
	CHECK_EQ_INT(read_byte(d, 9 * DISK_CLUSTER_SIZE), 0x55);
	disk_close(d);
}

static int patch(const char *path, uint64_t off, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY);
	int ok;

	if (fd < 0)
		return -1;
	ok = pwrite(fd, bytes, n, (off_t)off) == (ssize_t)n;
	close(fd);
	return ok ? 0 : -1;
}

TEST(disk_corrupt_layers_are_refused_with_the_reason)
{
	char base[TEST_PATH_MAX], top[TEST_PATH_MAX], l2[TEST_PATH_MAX];
	struct vm_error err = { 0 };
	struct disk *d = NULL;
	uint8_t head[DISK_HEADER_SIZE];
	struct disk_header h;
	uint64_t past = 1ULL << 30;
	int fd;

	REQUIRE(make_base(base) == 0);
	layer_path(top, "corrupt");
	CHECK_OK(disk_layer_create(top, base, &err), err.msg);
	/* A flipped byte in the header. */
	fd = open(top, O_RDONLY);
	REQUIRE(fd >= 0 && pread(fd, head, sizeof(head), 0) == (ssize_t)sizeof(head));
	close(fd);
	CHECK(disk_header_parse(head, &h) == NULL);
	REQUIRE(patch(top, 30, "\x01", 1) == 0);
	CHECK(disk_open(top, 0, &d, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "checksum");
	REQUIRE(patch(top, 30, head + 30, 1) == 0);
	/* A map entry pointing past the end of the file. */
	REQUIRE(patch(top, DISK_HEADER_SIZE + 8 * 2, &past, 8) == 0);
	CHECK(disk_open(top, 0, &d, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "cluster 2 points outside");
	past = 0;
	REQUIRE(patch(top, DISK_HEADER_SIZE + 8 * 2, &past, 8) == 0);
	/* A parent replaced: freeze, then stack on it, then make a new layer at the parent's path. */
	CHECK_OK(disk_open(top, 0, &d, &err), err.msg);
	REQUIRE(d);
	layer_path(l2, "corrupt-2");
	CHECK_OK(disk_freeze_and_stack(d, l2, &err), err.msg);
	disk_close(d);
	REQUIRE(chmod(top, 0644) == 0 && unlink(top) == 0);
	CHECK_OK(disk_layer_create(top, base, &err), err.msg);
	CHECK(disk_open(l2, 0, &d, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "replaced");
	/* Not a layer, wrong version, a base of another size. */
	memcpy(head, "SMOLDISX", 8);
	CHECK(test_str_contains(disk_header_parse(head, &h), "magic"));
	CHECK(disk_layer_create(top, "/nonexistent/base", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "/nonexistent/base");
	REQUIRE(truncate(base, BASE_SIZE / 2) == 0);
	layer_path(l2, "corrupt-3");
	CHECK(disk_open(top, 0, &d, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "another size");
}

/* ---- virtio-blk ---- */

struct blk_rig {
	struct guest_mem mem;
	struct virtio_mmio t;
	struct virtio_blk blk;
	struct drv d;
};

static int blk_rig_init(struct blk_rig *r, const char *disk, int read_only)
{
	struct vm_error err = { 0 };

	memset(r, 0, sizeof(*r));
	if (guest_mem_init(&r->mem, 16ULL << 20, &err) < 0 || disk_open(disk, read_only, &r->blk.disk, &err) < 0) {
		test_fail(__FILE__, __LINE__, "%s", err.msg);
		return -1;
	}
	virtio_mmio_init(&r->t, &virtio_blk_ops, &r->blk, &r->mem);
	r->d.t = &r->t;
	r->d.mem = &r->mem;
	drv_setup(&r->d, 16, 1ULL << VIRTIO_BLK_F_FLUSH);
	return 0;
}

static void blk_rig_exit(struct blk_rig *r)
{
	disk_close(r->blk.disk);
	virtio_mmio_exit(&r->t);
	guest_mem_exit(&r->mem);
}

#define HDR 0x20000ULL
#define DATA 0x30000ULL
#define STATUS 0x40000ULL

/* A request as Linux builds it: header, data buffers (of `seg` bytes each), status byte. Returns the status. */
static int blk_req(struct blk_rig *r, uint32_t type, uint64_t sector, uint32_t len, uint32_t seg)
{
	uint8_t *hdr = guest_mem_ptr(&r->mem, HDR, 16), *status = guest_mem_ptr(&r->mem, STATUS, 1);
	uint16_t n = 0;
	int data_write = type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_GET_ID;

	memset(hdr, 0, 16);
	memcpy(hdr, &type, 4);
	memcpy(hdr + 8, &sector, 8);
	*status = 0xff;
	drv_desc(&r->d, n, HDR, 16, VIRTQ_DESC_F_NEXT, (uint16_t)(n + 1));
	n++;
	for (uint32_t off = 0; off < len; off += seg, n++)
		drv_desc(&r->d, n, DATA + off, len - off < seg ? len - off : seg,
			 (uint16_t)(VIRTQ_DESC_F_NEXT | (data_write ? VIRTQ_DESC_F_WRITE : 0)), (uint16_t)(n + 1));
	drv_desc(&r->d, n, STATUS, 1, VIRTQ_DESC_F_WRITE, 0);
	drv_kick(&r->d, 0);
	return *status;
}

TEST(virtio_blk_reads_writes_and_flushes_through_the_layers)
{
	char base[TEST_PATH_MAX], top[TEST_PATH_MAX];
	struct vm_error err = { 0 };
	struct blk_rig r;
	uint8_t *data, cfg[8];
	uint64_t capacity;
	uint32_t id, len;

	REQUIRE(make_base(base) == 0);
	layer_path(top, "blk-top");
	CHECK_OK(disk_layer_create(top, base, &err), err.msg);
	if (blk_rig_init(&r, top, 0) < 0)
		return;
	virtio_mmio_access(&r.t, VIRTIO_MMIO_CONFIG, cfg, 8, 0);
	memcpy(&capacity, cfg, 8);
	CHECK_EQ_INT(capacity, BASE_SIZE / 512);
	drv_w32(&r.d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	CHECK(!(drv_r32(&r.d, VIRTIO_MMIO_DEVICE_FEATURES) & (1u << VIRTIO_BLK_F_RO)));
	data = guest_mem_ptr(&r.mem, DATA, 8192);
	/* Read sectors 10..17 in 3 segments. */
	CHECK_EQ_INT(blk_req(&r, VIRTIO_BLK_T_IN, 10, 4096, 1536), VIRTIO_BLK_S_OK);
	CHECK_EQ_INT(data[0], 10);
	CHECK_EQ_INT(data[4095], 17);
	drv_used(&r.d, 0, &id, &len);
	CHECK_EQ_INT(len, 4097);
	/* Write sector 3, read it back. */
	memset(data, 0x3c, 512);
	CHECK_EQ_INT(blk_req(&r, VIRTIO_BLK_T_OUT, 3, 512, 512), VIRTIO_BLK_S_OK);
	memset(data, 0, 512);
	CHECK_EQ_INT(blk_req(&r, VIRTIO_BLK_T_IN, 3, 512, 512), VIRTIO_BLK_S_OK);
	CHECK_EQ_INT(data[0], 0x3c);
	CHECK_EQ_INT(data[511], 0x3c);
	CHECK_EQ_INT(blk_req(&r, VIRTIO_BLK_T_FLUSH, 0, 0, 512), VIRTIO_BLK_S_OK);
	CHECK_EQ_INT(blk_req(&r, VIRTIO_BLK_T_GET_ID, 0, 20, 20), VIRTIO_BLK_S_OK);
	CHECK(memcmp(data, "smol-disk", 9) == 0);
	/* A volume's disk answers with its own serial, zero-padded (the guest finds it in /sys/block/vdX/serial). */
	r.blk.id = "smol-vol3";
	memset(data, 0xee, 20);
	CHECK_EQ_INT(blk_req(&r, VIRTIO_BLK_T_GET_ID, 0, 20, 20), VIRTIO_BLK_S_OK);
	CHECK(memcmp(data, "smol-vol3", 9) == 0);
	CHECK_EQ_INT(data[9], 0);
	CHECK_EQ_INT(data[19], 0);
	r.blk.id = NULL;
	/* Past the end, half a sector, an unknown type. */
	CHECK_EQ_INT(blk_req(&r, VIRTIO_BLK_T_IN, BASE_SIZE / 512 - 1, 1024, 1024), VIRTIO_BLK_S_IOERR);
	CHECK_EQ_INT(blk_req(&r, VIRTIO_BLK_T_IN, ~0ULL, 512, 512), VIRTIO_BLK_S_IOERR);
	CHECK_EQ_INT(blk_req(&r, VIRTIO_BLK_T_OUT, 0, 100, 100), VIRTIO_BLK_S_IOERR);
	CHECK_EQ_INT(blk_req(&r, 77, 0, 0, 512), VIRTIO_BLK_S_UNSUPP);
	CHECK(!(drv_r32(&r.d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET));
	blk_rig_exit(&r);
	/* The write reached the layer, not the base. */
	{
		struct disk *d;

		CHECK_OK(disk_open(top, 1, &d, &err), err.msg);
		REQUIRE(d);
		CHECK_EQ_INT(read_byte(d, 3 * 512), 0x3c);
		disk_close(d);
		CHECK_OK(disk_open(base, 1, &d, &err), err.msg);
		REQUIRE(d);
		CHECK_EQ_INT(read_byte(d, 3 * 512), 3);
		disk_close(d);
	}
}

TEST(virtio_blk_read_only_disk_says_so_and_refuses_writes)
{
	char base[TEST_PATH_MAX];
	struct blk_rig r;

	REQUIRE(make_base(base) == 0);
	if (blk_rig_init(&r, base, 1) < 0)
		return;
	drv_w32(&r.d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	CHECK(drv_r32(&r.d, VIRTIO_MMIO_DEVICE_FEATURES) & (1u << VIRTIO_BLK_F_RO));
	CHECK_EQ_INT(blk_req(&r, VIRTIO_BLK_T_OUT, 0, 512, 512), VIRTIO_BLK_S_IOERR);
	CHECK_EQ_INT(blk_req(&r, VIRTIO_BLK_T_IN, 0, 512, 512), VIRTIO_BLK_S_OK);
	blk_rig_exit(&r);
}

TEST(virtio_blk_request_without_a_status_byte_breaks_the_queue)
{
	char base[TEST_PATH_MAX];
	struct blk_rig r;

	REQUIRE(make_base(base) == 0);
	if (blk_rig_init(&r, base, 1) < 0)
		return;
	drv_desc(&r.d, 0, HDR, 16, 0, 0);	/* a header and nothing else */
	drv_kick(&r.d, 0);
	CHECK(drv_r32(&r.d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET);
	CHECK_EQ_INT(drv_used_idx(&r.d), 0);
	blk_rig_exit(&r);
}
