/* The MP table is how a guest without ACPI finds its CPUs: it must be where Linux looks and add up. */
#include "test.h"
#include "boot.h"
#include "error.h"
#include "guest_mem.h"
#include "loader.h"

#include <stdint.h>
#include <string.h>

#define RAM (64ULL << 20)

static void check_mp_table(int nr_cpus)
{
	static const struct kernel_image k = { .kind = KERNEL_ELF64, .entry = 0x100000, .end = 0x200000 };
	struct boot_info info = { .cmdline = "", .nr_cpus = nr_cpus };
	struct vm_error err = { 0 };
	struct guest_mem mem;
	const uint8_t *mpf, *table, *p, *end;
	int cpus = 0, ioapics = 0;
	uint16_t len;

	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK_OK(boot_setup(&mem, &k, &info, &err), err.msg);
	/* Linux searches the last KiB of base memory (0x9fc00) for the floating pointer. */
	mpf = guest_mem_ptr(&mem, BOOT_EBDA, 16);
	REQUIRE(mpf);
	CHECK(memcmp(mpf, "_MP_", 4) == 0);
	CHECK_EQ_INT(mpf[8], 1);			/* length in 16-byte units */
	CHECK_EQ_INT(test_byte_sum(mpf, 16), 0);
	table = guest_mem_ptr(&mem, test_rd32(mpf + 4), 44);
	REQUIRE(table);
	CHECK(memcmp(table, "PCMP", 4) == 0);
	memcpy(&len, table + 4, 2);
	table = guest_mem_ptr(&mem, test_rd32(mpf + 4), len);
	REQUIRE(table && len >= 44);
	CHECK_EQ_INT(test_byte_sum(table, len), 0);
	CHECK_EQ_INT(test_rd32(table + 36), 0xfee00000);	/* local APIC address */

	end = table + len;
	for (p = table + 44; p < end;) {
		if (p[0] == 0) {			/* processor: APIC id = index, enabled, the first is the BSP */
			CHECK_EQ_INT(p[1], cpus);
			CHECK_EQ_INT(p[3], cpus == 0 ? 3 : 1);
			cpus++;
			p += 20;
		} else if (p[0] <= 4) {
			ioapics += p[0] == 2 && test_rd32(p + 4) == 0xfec00000;
			p += 8;
		} else {
			test_fail(__FILE__, __LINE__, "unknown MP entry type %u at offset %td", p[0], p - table);
			break;
		}
	}
	CHECK(p == end);
	CHECK_EQ_INT(cpus, nr_cpus);
	CHECK_EQ_INT(ioapics, 1);
	guest_mem_exit(&mem);
}

TEST(mp_table_lists_the_single_cpu_with_valid_checksums)
{
	check_mp_table(1);
}

TEST(mp_table_lists_every_cpu_with_valid_checksums)
{
	check_mp_table(4);
}
