#include "acpi.h"
#include "boot.h"
#include "error.h"
#include "guest_mem.h"
#include "loader.h"

#include <asm/bootparam.h>
#include <errno.h>
#include <string.h>

#define E820_RAM 1
#define E820_RESERVED 2

uint8_t boot_checksum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint8_t sum = 0;

	while (len--)
		sum += *b++;
	return (uint8_t)-sum;
}

static void gdt_write(uint64_t *gdt)
{
	gdt[0] = 0;
	gdt[1] = 0x00af9b000000ffffULL;	/* 64-bit code, present, ring 0 */
	gdt[2] = 0x00cf93000000ffffULL;	/* data, 4 GiB, writable */
	gdt[3] = 0x008f8b000000ffffULL;	/* 64-bit TSS (busy), placeholder for the guest's own; */
	gdt[4] = 0;			/* a 64-bit TSS descriptor takes two slots */
}

/* Identity map of the first 4 GiB with 2 MiB pages: one PML4 entry, four PDPT entries, four page directories. */
static void page_tables_write(uint8_t *low)
{
	uint64_t *pml4 = (uint64_t *)(low + BOOT_PML4);
	uint64_t *pdpt = (uint64_t *)(low + BOOT_PDPT);
	uint64_t *pd = (uint64_t *)(low + BOOT_PD);

	memset(pml4, 0, 4096);
	memset(pdpt, 0, 4096);
	pml4[0] = BOOT_PDPT | 0x3;			/* present, writable */
	for (int i = 0; i < 4; i++)
		pdpt[i] = (BOOT_PD + 0x1000ULL * i) | 0x3;
	for (uint64_t i = 0; i < 4 * 512; i++)
		pd[i] = (i << 21) | 0x83;		/* present, writable, 2 MiB page */
}

static void e820_add(struct boot_params *bp, uint64_t addr, uint64_t size, uint32_t type)
{
	struct boot_e820_entry *e = &bp->e820_table[bp->e820_entries++];

	e->addr = addr;
	e->size = size;
	e->type = type;
}

int boot_setup(struct guest_mem *mem, const struct kernel_image *kernel, const struct boot_info *info,
	       struct vm_error *err)
{
	uint8_t *low = guest_mem_ptr(mem, 0, BOOT_MIN_MEM);
	struct boot_params *bp;
	size_t cmdline_len = info->cmdline ? strlen(info->cmdline) : 0;
	int ret;

	if (!low)
		return vm_error_set(err, EINVAL, "guest memory must be at least %llu MiB", BOOT_MIN_MEM >> 20);
	if (cmdline_len >= BOOT_CMDLINE_MAX)
		return vm_error_set(err, E2BIG, "kernel command line is %zu bytes; the limit is %d", cmdline_len,
				    BOOT_CMDLINE_MAX - 1);

	gdt_write((uint64_t *)(low + BOOT_GDT_ADDR));
	memset(low + BOOT_IDT_ADDR, 0, 8);
	page_tables_write(low);
	memset(low + BOOT_CMDLINE, 0, BOOT_CMDLINE_MAX);
	if (cmdline_len)
		memcpy(low + BOOT_CMDLINE, info->cmdline, cmdline_len);

	bp = (struct boot_params *)(low + BOOT_ZERO_PAGE);
	memset(bp, 0, sizeof(*bp));
	if (kernel->kind == KERNEL_BZIMAGE)
		memcpy((uint8_t *)bp + 0x1f1, kernel->setup_header, kernel->setup_header_len);
	bp->hdr.type_of_loader = 0xff;
	bp->hdr.boot_flag = 0xaa55;
	bp->hdr.header = 0x53726448;		/* "HdrS" */
	bp->hdr.loadflags |= 0x01;		/* LOADED_HIGH */
	bp->hdr.cmd_line_ptr = (uint32_t)BOOT_CMDLINE;
	if (kernel->kind != KERNEL_BZIMAGE)
		bp->hdr.cmdline_size = (uint32_t)cmdline_len;	/* a bzImage's field is its own maximum: keep it */
	if (info->initrd_size) {
		bp->hdr.ramdisk_image = (uint32_t)info->initrd_addr;
		bp->hdr.ramdisk_size = (uint32_t)info->initrd_size;
	}
	bp->acpi_rsdp_addr = ACPI_RSDP_ADDR;	/* Linux would also find it by scanning 0xE0000-0xFFFFF */
	e820_add(bp, 0, BOOT_EBDA, E820_RAM);
	e820_add(bp, BOOT_EBDA, 0x100000 - BOOT_EBDA, E820_RESERVED);
	e820_add(bp, 0x100000, mem->low_size - 0x100000, E820_RAM);
	if (mem->high_size)
		e820_add(bp, GUEST_HIGH_START, mem->high_size, E820_RAM);
	ret = mptable_write(mem, BOOT_EBDA, info->nr_cpus, err);
	if (ret < 0)
		return ret;
	return acpi_write(mem, info->nr_cpus, info->virtio, info->nr_virtio, err);
}
