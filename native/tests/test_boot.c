/* What the guest finds in memory at its first instruction: zero page, e820 map, page tables, GDT. */
#include "test.h"
#include "boot.h"
#include "error.h"
#include "guest_mem.h"
#include "loader.h"

#include <stdint.h>
#include <string.h>

#define RAM (64ULL << 20)
#define CMDLINE "console=ttyS0 panic=-1 quiet"

static uint64_t rd(const struct guest_mem *mem, uint64_t gpa, unsigned len)
{
	const uint8_t *p = guest_mem_ptr(mem, gpa, len);
	uint64_t v = 0;

	if (!p)
		return 0xdeadbeefdeadbeefULL;
	memcpy(&v, p, len);	/* little-endian, like the guest */
	return v;
}

static const struct kernel_image elf_kernel = { .kind = KERNEL_ELF64, .entry = 0x100000, .end = 0x200000 };

/* A fresh `size` guest with boot_setup done for `nr_cpus` and CMDLINE. Returns boot_setup's result. */
static int boot(struct guest_mem *mem, uint64_t size, int nr_cpus, struct vm_error *err)
{
	struct boot_info info = { .cmdline = CMDLINE, .nr_cpus = nr_cpus };

	if (guest_mem_init(mem, size, err) < 0)
		return -1;
	return boot_setup(mem, &elf_kernel, &info, err);
}

TEST(zero_page_carries_the_boot_signature_and_command_line)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	const char *cmdline;

	CHECK_OK(boot(&mem, RAM, 1, &err), err.msg);
	REQUIRE(mem.host);
	CHECK_EQ_INT(rd(&mem, BOOT_ZERO_PAGE + 0x1fe, 2), 0xaa55);
	CHECK(memcmp(guest_mem_ptr(&mem, BOOT_ZERO_PAGE + 0x202, 4), "HdrS", 4) == 0);
	CHECK_EQ_INT(rd(&mem, BOOT_ZERO_PAGE + 0x210, 1), 0xff);	/* type_of_loader: undefined */
	CHECK_EQ_INT(rd(&mem, BOOT_ZERO_PAGE + 0x228, 4), 0x20000);
	CHECK_EQ_INT(rd(&mem, BOOT_ZERO_PAGE + 0x218, 4), 0);		/* no initrd */
	cmdline = guest_mem_ptr(&mem, 0x20000, sizeof(CMDLINE));
	REQUIRE(cmdline);
	CHECK(memcmp(cmdline, CMDLINE, sizeof(CMDLINE)) == 0);		/* NUL included */
	guest_mem_exit(&mem);
}

TEST(zero_page_points_the_kernel_at_the_initrd)
{
	struct vm_error err = { 0 };
	struct boot_info info = { .cmdline = "", .nr_cpus = 1, .initrd_addr = 0x3f00000, .initrd_size = 5000 };
	struct guest_mem mem;

	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK_OK(boot_setup(&mem, &elf_kernel, &info, &err), err.msg);
	CHECK_EQ_INT(rd(&mem, BOOT_ZERO_PAGE + 0x218, 4), 0x3f00000);	/* ramdisk_image */
	CHECK_EQ_INT(rd(&mem, BOOT_ZERO_PAGE + 0x21c, 4), 5000);		/* ramdisk_size */
	guest_mem_exit(&mem);
}

TEST(bzimage_setup_header_reaches_the_zero_page)
{
	struct vm_error err = { 0 };
	struct boot_info info = { .cmdline = "", .nr_cpus = 1 };
	struct kernel_image k = { .kind = KERNEL_BZIMAGE, .entry = 0x1000200, .setup_header_len = 0x268 - 0x1f1 };
	struct guest_mem mem;

	k.setup_header[0x206 - 0x1f1] = 0x0f;	/* version 2.15 */
	k.setup_header[0x207 - 0x1f1] = 0x02;
	k.setup_header[0x260 - 0x1f1] = 0x42;	/* init_size */
	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK_OK(boot_setup(&mem, &k, &info, &err), err.msg);
	CHECK_EQ_INT(rd(&mem, BOOT_ZERO_PAGE + 0x206, 2), 0x20f);
	CHECK_EQ_INT(rd(&mem, BOOT_ZERO_PAGE + 0x260, 4), 0x42);
	CHECK_EQ_INT(rd(&mem, BOOT_ZERO_PAGE + 0x1fe, 2), 0xaa55);	/* the VMM's own fields still set */
	CHECK_EQ_INT(rd(&mem, BOOT_ZERO_PAGE + 0x228, 4), 0x20000);
	guest_mem_exit(&mem);
}

TEST(command_line_of_2048_bytes_is_refused)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	char cmdline[2049];
	struct boot_info info = { .cmdline = cmdline, .nr_cpus = 1 };

	memset(cmdline, 'x', sizeof(cmdline) - 1);
	cmdline[2048] = '\0';
	REQUIRE(guest_mem_init(&mem, RAM, &err) == 0);
	CHECK(boot_setup(&mem, &elf_kernel, &info, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "kernel command line is 2048 bytes; the limit is 2047");
	cmdline[2047] = '\0';			/* 2047 bytes and the NUL fit */
	CHECK_OK(boot_setup(&mem, &elf_kernel, &info, &err), err.msg);
	CHECK_EQ_INT(rd(&mem, 0x20000 + 2046, 2), 'x');
	guest_mem_exit(&mem);
}

/* Fills `ram` with the RAM ranges of the e820 map, returns how many. */
static int e820_ram(const struct guest_mem *mem, uint64_t ram[][2], int max)
{
	int count = (int)rd(mem, BOOT_ZERO_PAGE + 0x1e8, 1), n = 0;

	for (int i = 0; i < count && i < 128; i++) {
		uint64_t e = BOOT_ZERO_PAGE + 0x2d0 + 20 * (uint64_t)i;

		if (rd(mem, e + 16, 4) == 1 && n < max) {
			ram[n][0] = rd(mem, e, 8);
			ram[n][1] = rd(mem, e, 8) + rd(mem, e + 8, 8);
			n++;
		}
	}
	return n;
}

TEST(e820_map_lists_base_memory_and_ram_above_1mib)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	uint64_t ram[8][2];

	CHECK_OK(boot(&mem, RAM, 4, &err), err.msg);
	REQUIRE(mem.host);
	REQUIRE(e820_ram(&mem, ram, 8) == 2);
	CHECK_EQ_INT(ram[0][0], 0);
	CHECK_EQ_INT(ram[0][1], 0x9fc00);	/* the MP table above it is not RAM the kernel may reuse */
	CHECK_EQ_INT(ram[1][0], 0x100000);
	CHECK_EQ_INT(ram[1][1], RAM);
	guest_mem_exit(&mem);
}

TEST(e820_map_lists_ram_above_4gib_when_the_guest_has_more_than_3gib)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	uint64_t ram[8][2];

	CHECK_OK(boot(&mem, (3ULL << 30) + (16ULL << 20), 1, &err), err.msg);
	REQUIRE(mem.host);
	REQUIRE(e820_ram(&mem, ram, 8) == 3);
	CHECK_EQ_INT(ram[1][0], 0x100000);
	CHECK_EQ_INT(ram[1][1], GUEST_MMIO_GAP_START);
	CHECK_EQ_INT(ram[2][0], GUEST_HIGH_START);
	CHECK_EQ_INT(ram[2][1], GUEST_HIGH_START + (16ULL << 20));
	guest_mem_exit(&mem);
}

/* Translates `va` the way the CPU would from CR3 = BOOT_PML4 (4-level paging, 2 MiB pages); ~0 if unmapped. */
static uint64_t translate(const struct guest_mem *mem, uint64_t va)
{
	uint64_t pml4e = rd(mem, BOOT_PML4 + 8 * ((va >> 39) & 511), 8), pdpte, pde;

	if (!(pml4e & 1))
		return ~0ULL;
	pdpte = rd(mem, (pml4e & 0xffffffffff000ULL) + 8 * ((va >> 30) & 511), 8);
	if (!(pdpte & 1) || (pdpte & 0x80))
		return ~0ULL;
	pde = rd(mem, (pdpte & 0xffffffffff000ULL) + 8 * ((va >> 21) & 511), 8);
	if ((pde & 0x81) != 0x81)
		return ~0ULL;
	return (pde & 0xfffffffe00000ULL) | (va & 0x1fffff);
}

TEST(page_tables_identity_map_the_first_4gib)
{
	static const uint64_t addrs[] = { 0, 0x7000, 0x100000, 0x3ffffff, 0xc0000000, 0xfee00000, 0xffffffff };
	struct vm_error err = { 0 };
	struct guest_mem mem;

	CHECK_OK(boot(&mem, RAM, 1, &err), err.msg);
	REQUIRE(mem.host);
	CHECK_EQ_INT(rd(&mem, BOOT_PML4, 8), BOOT_PDPT | 0x3);
	for (int i = 0; i < 4; i++)
		CHECK_EQ_INT(rd(&mem, BOOT_PDPT + 8 * i, 8), (BOOT_PD + 0x1000 * i) | 0x3);
	CHECK_EQ_INT(rd(&mem, BOOT_PD + 8 * 1536, 8), 0xc0000000 | 0x83);	/* 3 GiB: present, writable, 2 MiB */
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++)
		CHECK_EQ_INT(translate(&mem, addrs[i]), addrs[i]);
	CHECK_EQ_INT(translate(&mem, 0x100000000ULL), ~0ULL);			/* and nothing beyond */
	guest_mem_exit(&mem);
}

TEST(gdt_has_the_64_bit_code_and_data_selectors_of_the_entry_contract)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;
	uint64_t code, data;

	CHECK_OK(boot(&mem, RAM, 1, &err), err.msg);
	REQUIRE(mem.host);
	code = rd(&mem, BOOT_GDT_ADDR + BOOT_SEL_CODE, 8);
	data = rd(&mem, BOOT_GDT_ADDR + BOOT_SEL_DATA, 8);
	CHECK_EQ_INT(rd(&mem, BOOT_GDT_ADDR, 8), 0);
	CHECK_EQ_INT((code >> 47) & 1, 1);		/* present */
	CHECK_EQ_INT((code >> 43) & 1, 1);		/* executable */
	CHECK_EQ_INT((code >> 53) & 3, 1);		/* L=1, D=0: 64-bit */
	CHECK_EQ_INT((data >> 47) & 1, 1);
	CHECK_EQ_INT((data >> 41) & 5, 1);		/* writable data */
	guest_mem_exit(&mem);
}

TEST(guest_memory_smaller_than_2mib_is_refused)
{
	struct vm_error err = { 0 };
	struct guest_mem mem;

	CHECK(boot(&mem, 1ULL << 20, 1, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "guest memory must be at least 2 MiB");
	guest_mem_exit(&mem);
}
