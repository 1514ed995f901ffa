/* The boot structures the VMM writes into guest memory before the first instruction (docs/vmm.md). */
#ifndef SMOL_BOOT_H
#define SMOL_BOOT_H

#include <stddef.h>
#include <stdint.h>

#define BOOT_GDT_ADDR 0x500ULL
#define BOOT_IDT_ADDR 0x520ULL
#define BOOT_ZERO_PAGE 0x7000ULL
#define BOOT_STACK 0x8ff0ULL
#define BOOT_PML4 0x9000ULL
#define BOOT_PDPT 0xa000ULL
#define BOOT_PD 0xb000ULL
#define BOOT_EBDA 0x9fc00ULL		/* end of base memory; the MP table lives here */
#define BOOT_CMDLINE 0x20000ULL
#define BOOT_CMDLINE_MAX 2048		/* bytes, including the terminating NUL */
#define BOOT_MIN_MEM (2ULL << 20)

#define BOOT_SEL_CODE 0x08
#define BOOT_SEL_DATA 0x10
#define BOOT_SEL_TSS 0x18

#define IOAPIC_ADDR 0xfec00000U
#define LAPIC_ADDR 0xfee00000U

/* COM1 (serial.c): its ports and ISA IRQ, which the ACPI DSDT also gives the guest. */
#define COM1_PORT 0x3f8
#define COM1_PORTS 8
#define COM1_IRQ 4

struct guest_mem;
struct kernel_image;
struct vm_error;

/* A virtio-mmio device's window and interrupt, which the DSDT describes (and the command line, with acpi=off). */
struct boot_virtio {
	uint64_t base;
	uint32_t len, gsi;
};
#define BOOT_MAX_VIRTIO 9	/* slots 0 to 8 (virtio_dev.h) */

struct boot_info {
	const char *cmdline;
	uint64_t initrd_addr, initrd_size;	/* size 0: no initrd */
	int nr_cpus;
	const struct boot_virtio *virtio;
	int nr_virtio;
};

int boot_setup(struct guest_mem *mem, const struct kernel_image *kernel, const struct boot_info *info,
	       struct vm_error *err);

/* The byte that makes [p, p + len) sum to zero, as the MP and ACPI tables require of their checksum fields. */
uint8_t boot_checksum(const void *p, size_t len);

/* MP configuration table (Intel MP spec 1.4) listing every vCPU; Linux finds CPUs with it when there is no ACPI. */
int mptable_write(struct guest_mem *mem, uint64_t addr, int nr_cpus, struct vm_error *err);

#endif
