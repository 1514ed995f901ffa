/* Loading a bzImage kernel and placing an initrd. */
#include "test.h"
#include "error.h"
#include "guest_mem.h"
#include "loader.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RAM (32ULL << 20)
#define SETUP_SECTS 4
#define PM_OFF ((SETUP_SECTS + 1) * 512)	/* the protected-mode kernel follows the boot sector and setup */
#define PM_LEN 0x800
#define LOAD_ADDR 0x1000000ULL
#define INIT_SIZE 0x10000

struct bzimage {
	uint8_t bytes[PM_OFF + PM_LEN];
	size_t len;
};

static void put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

/* Boot protocol 2.15 header fields; the setup header ends at 0x268 (jump at 0x200 lands there). */
static void bzimage_valid(struct bzimage *b)
{
	memset(b, 0, sizeof(*b));
	b->bytes[0x1f1] = SETUP_SECTS;
	put16(b->bytes + 0x1fe, 0xaa55);
	b->bytes[0x200] = 0xeb;			/* jmp short */
	b->bytes[0x201] = 0x268 - 0x202;
	memcpy(b->bytes + 0x202, "HdrS", 4);
	put16(b->bytes + 0x206, 0x20f);
	put32(b->bytes + 0x22c, 0x7fffffff);	/* initrd_addr_max */
	b->bytes[0x236] = 0x01;			/* xloadflags: XLF_KERNEL_64 */
	put32(b->bytes + 0x258, (uint32_t)LOAD_ADDR);	/* pref_address */
	put32(b->bytes + 0x260, INIT_SIZE);
	for (int i = 0; i < PM_LEN; i++)
		b->bytes[PM_OFF + i] = (uint8_t)(i * 7 + 1);
	b->len = sizeof(b->bytes);
}

static int load_bzimage(struct guest_mem *mem, const struct bzimage *b, struct kernel_image *k, struct vm_error *err)
{
	char path[TEST_PATH_MAX];
	int ret = test_tmpfile(path, b->bytes, b->len);

	if (ret < 0)
		return vm_error_set(err, -ret, "test could not write its kernel file");
	ret = loader_load_kernel(mem, path, k, err);
	unlink(path);
	return ret;
}

TEST(bzimage_protected_mode_kernel_loads_at_its_preferred_address)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	struct kernel_image k;
	struct bzimage b;
	uint8_t *pm;

	bzimage_valid(&b);
	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK_OK(load_bzimage(&mem, &b, &k, &err), err.msg);
	CHECK_EQ_INT(k.kind, KERNEL_BZIMAGE);
	CHECK_EQ_INT(k.entry, LOAD_ADDR + 0x200);	/* startup_64 */
	CHECK_EQ_INT(k.end, LOAD_ADDR + INIT_SIZE);
	CHECK_EQ_INT(k.initrd_addr_max, 0x7fffffff);
	pm = guest_mem_ptr(&mem, LOAD_ADDR, PM_LEN);
	REQUIRE(pm);
	CHECK(memcmp(pm, b.bytes + PM_OFF, PM_LEN) == 0);
	CHECK_EQ_INT(k.setup_header_len, 0x268 - 0x1f1);
	CHECK(memcmp(k.setup_header, b.bytes + 0x1f1, 0x268 - 0x1f1) == 0);
	guest_mem_exit(&mem);
}

/*
 * Debian's 6.1 kernel has 0x6a at 0x201: its setup header runs to 0x26c (kernel_info_offset at 0x268). The loader
 * must copy all of it, and must not read past what it read from the file to do so.
 */
TEST(bzimage_setup_header_ending_at_0x26c_is_copied_whole)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	struct kernel_image k;
	struct bzimage b;

	bzimage_valid(&b);
	b.bytes[0x201] = 0x6a;
	put32(b.bytes + 0x268, 0x12345678);	/* kernel_info_offset */
	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK_OK(load_bzimage(&mem, &b, &k, &err), err.msg);
	CHECK_EQ_INT(k.setup_header_len, 0x26c - 0x1f1);
	CHECK(memcmp(k.setup_header, b.bytes + 0x1f1, 0x26c - 0x1f1) == 0);
	guest_mem_exit(&mem);
}

TEST(bzimage_without_64_bit_entry_point_is_rejected)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	struct kernel_image k;
	struct bzimage b;

	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	bzimage_valid(&b);
	b.bytes[0x236] = 0;
	CHECK(load_bzimage(&mem, &b, &k, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "bzImage (boot protocol 2.15) has no 64-bit entry point");
	bzimage_valid(&b);
	put16(b.bytes + 0x206, 0x20b);		/* older than 2.12: xloadflags is not there */
	CHECK(load_bzimage(&mem, &b, &k, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "has no 64-bit entry point");
	guest_mem_exit(&mem);
}

TEST(bzimage_that_needs_more_than_ram_is_rejected)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	struct kernel_image k;
	struct bzimage b;

	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	bzimage_valid(&b);
	put32(b.bytes + 0x260, 0x1000001);	/* init_size: one byte more than RAM above 16 MiB */
	CHECK(load_bzimage(&mem, &b, &k, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "does not fit in 32 MiB of RAM");
	bzimage_valid(&b);
	b.len = PM_OFF;				/* setup only */
	CHECK(load_bzimage(&mem, &b, &k, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "bzImage is truncated");
	guest_mem_exit(&mem);
}

/* Writes an initrd of `len` patterned bytes and places it; returns the loader's result. */
static int place_initrd(struct guest_mem *mem, size_t len, uint64_t min_addr, uint64_t max_addr, uint64_t *addr,
			uint64_t *size, struct vm_error *err)
{
	uint8_t *data = malloc(len ? len : 1);
	char path[TEST_PATH_MAX];
	int ret;

	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 13 + 5);
	ret = test_tmpfile(path, data, len);
	if (ret < 0) {
		free(data);
		return vm_error_set(err, -ret, "test could not write its initrd");
	}
	ret = loader_load_initrd(mem, path, min_addr, max_addr, addr, size, err);
	if (ret == 0 && (!guest_mem_ptr(mem, *addr, len) || memcmp(guest_mem_ptr(mem, *addr, len), data, len)))
		ret = vm_error_set(err, EIO, "the initrd's bytes are not at 0x%llx", (unsigned long long)*addr);
	unlink(path);
	free(data);
	return ret;
}

TEST(initrd_is_placed_page_aligned_at_the_top_of_ram)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	uint64_t addr = 0, size = 0;

	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK_OK(place_initrd(&mem, 5000, 0x200000, 0x100000000ULL, &addr, &size, &err), err.msg);
	CHECK_EQ_INT(size, 5000);
	CHECK_EQ_INT(addr % 4096, 0);
	CHECK(addr + size <= RAM);
	CHECK(RAM - (addr + size) < 4096);	/* as high as it goes */
	guest_mem_exit(&mem);
}

TEST(initrd_stays_below_the_kernels_initrd_addr_max)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	uint64_t addr = 0, size = 0, max = 8ULL << 20;

	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK_OK(place_initrd(&mem, 5000, 0x200000, max, &addr, &size, &err), err.msg);
	CHECK_EQ_INT(addr % 4096, 0);
	CHECK(addr + size <= max);
	CHECK(max - (addr + size) < 4096);
	guest_mem_exit(&mem);
}

TEST(initrd_stays_below_the_mmio_gap_when_ram_exceeds_3_gib)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	uint64_t addr = 0, size = 0;

	REQUIRE(guest_mem_init(&mem, (3ULL << 30) + (16ULL << 20), &err) == 0);
	CHECK_OK(place_initrd(&mem, 5000, 0x200000, 0x100000000ULL, &addr, &size, &err), err.msg);
	CHECK(addr + size <= GUEST_MMIO_GAP_START);
	CHECK(GUEST_MMIO_GAP_START - (addr + size) < 4096);
	guest_mem_exit(&mem);
}

TEST(initrd_that_does_not_fit_above_the_kernel_is_rejected)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	uint64_t addr = 0, size = 0, kernel_end = RAM - (1ULL << 20);

	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK_OK(place_initrd(&mem, 1 << 20, kernel_end, 0x100000000ULL, &addr, &size, &err), err.msg);
	CHECK_EQ_INT(addr, kernel_end);		/* exactly fills the space */
	CHECK(place_initrd(&mem, (1 << 20) + 1, kernel_end, 0x100000000ULL, &addr, &size, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "does not fit");
	CHECK(place_initrd(&mem, RAM + 1, 0, 0x100000000ULL, &addr, &size, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "does not fit");
	guest_mem_exit(&mem);
}

TEST(missing_initrd_names_the_path)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	uint64_t addr, size;

	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK(loader_load_initrd(&mem, "/nonexistent/initrd.cpio", 0x200000, 0x100000000ULL, &addr, &size, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "initrd /nonexistent/initrd.cpio: No such file");
	guest_mem_exit(&mem);
}
