/* guest_mem_ptr is the one gate between guest-supplied addresses and host memory. */
#include "test.h"
#include "error.h"
#include "guest_mem.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MIB (1ULL << 20)
#define GIB (1ULL << 30)

TEST(guest_ranges_past_the_end_of_ram_do_not_resolve)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;

	REQUIRE(guest_mem_init(&mem, 16 * MIB, &err) == 0);
	CHECK(guest_mem_ptr(&mem, 0, 16 * MIB) == mem.host);
	CHECK(guest_mem_ptr(&mem, 16 * MIB - 4096, 4096) == mem.host + 16 * MIB - 4096);
	CHECK(guest_mem_ptr(&mem, 16 * MIB - 4096, 4097) == NULL);
	CHECK(guest_mem_ptr(&mem, 16 * MIB, 1) == NULL);
	CHECK(guest_mem_ptr(&mem, GUEST_HIGH_START, 1) == NULL);	/* no RAM above 4 GiB at all */
	guest_mem_exit(&mem);
}

TEST(guest_ranges_with_huge_lengths_do_not_wrap_around)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;

	REQUIRE(guest_mem_init(&mem, 3 * GIB + 16 * MIB, &err) == 0);
	CHECK(guest_mem_ptr(&mem, 0, UINT64_MAX) == NULL);
	CHECK(guest_mem_ptr(&mem, 0x1000, UINT64_MAX - 0x800) == NULL);	/* gpa + len wraps to 0x7ff */
	CHECK(guest_mem_ptr(&mem, GUEST_HIGH_START + 0x1000, UINT64_MAX - 0x800) == NULL);
	CHECK(guest_mem_ptr(&mem, UINT64_MAX, 1) == NULL);
	CHECK(guest_mem_ptr(&mem, UINT64_MAX - 0xfff, 0x1000) == NULL);
	guest_mem_exit(&mem);
}

TEST(guest_ranges_in_or_across_the_mmio_gap_do_not_resolve)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;

	REQUIRE(guest_mem_init(&mem, 3 * GIB + 16 * MIB, &err) == 0);
	CHECK_EQ_INT(mem.low_size, GUEST_MMIO_GAP_START);
	CHECK_EQ_INT(mem.high_size, 16 * MIB);
	CHECK(guest_mem_ptr(&mem, GUEST_MMIO_GAP_START - 4096, 4096) != NULL);
	CHECK(guest_mem_ptr(&mem, GUEST_MMIO_GAP_START - 4096, 8192) == NULL);
	CHECK(guest_mem_ptr(&mem, GUEST_MMIO_GAP_START, 1) == NULL);
	CHECK(guest_mem_ptr(&mem, 0xfee00000, 4) == NULL);		/* LAPIC */
	CHECK(guest_mem_ptr(&mem, GUEST_HIGH_START - 1, 2) == NULL);
	guest_mem_exit(&mem);
}

TEST(ram_beyond_3gib_is_reachable_from_4gib_up)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	uint8_t *low, *high;

	REQUIRE(guest_mem_init(&mem, 3 * GIB + 16 * MIB, &err) == 0);
	high = guest_mem_ptr(&mem, GUEST_HIGH_START, 16 * MIB);
	CHECK(high == mem.host + 3 * GIB);
	CHECK(guest_mem_ptr(&mem, GUEST_HIGH_START + 16 * MIB - 1, 1) == mem.host + 3 * GIB + 16 * MIB - 1);
	CHECK(guest_mem_ptr(&mem, GUEST_HIGH_START + 16 * MIB - 1, 2) == NULL);
	CHECK(guest_mem_ptr(&mem, GUEST_HIGH_START + 16 * MIB, 1) == NULL);
	low = guest_mem_ptr(&mem, 0, 1);
	REQUIRE(high && low);
	*low = 0x11;
	*high = 0x22;				/* distinct memory from guest address 0 */
	CHECK_EQ_INT(*low, 0x11);
	CHECK_EQ_INT(*high, 0x22);
	guest_mem_exit(&mem);
}

/* Whether the mapping that starts at `start` has VM_HUGEPAGE ("hg" in VmFlags of /proc/self/smaps); -1: not found. */
static int mapping_has_hugepage_flag(const void *start)
{
	char line[512], want[32];
	FILE *f = fopen("/proc/self/smaps", "r");
	int found = 0, flag = -1;

	if (!f)
		return -1;
	snprintf(want, sizeof(want), "%lx-", (unsigned long)start);
	while (fgets(line, sizeof(line), f)) {
		size_t hex = strspn(line, "0123456789abcdef");

		if (hex > 0 && line[hex] == '-')		/* a mapping's first line: start-end perms ... */
			found = strncmp(line, want, strlen(want)) == 0;
		else if (found && !strncmp(line, "VmFlags:", 8)) {
			flag = strstr(line, " hg") != NULL;
			break;
		}
	}
	fclose(f);
	return flag;
}

TEST(fresh_guest_ram_asks_for_huge_pages)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;

	REQUIRE(guest_mem_init(&mem, 16 * MIB, &err) == 0);
	CHECK_EQ_INT(mapping_has_hugepage_flag(mem.host), 1);
	guest_mem_exit(&mem);
}
