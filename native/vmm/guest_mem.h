/*
 * Guest physical memory: one memfd-backed mapping, split around the MMIO gap below 4 GiB.
 * Every access the VMM makes on the guest's behalf goes through guest_mem_ptr(), which checks the whole range.
 */
#ifndef SMOL_GUEST_MEM_H
#define SMOL_GUEST_MEM_H

#include <stdint.h>

#define GUEST_MMIO_GAP_START 0xC0000000ULL
#define GUEST_HIGH_START 0x100000000ULL

struct guest_mem {
	int fd;			/* memfd, -1 when the memory is not file-backed (unit tests) */
	uint8_t *host;		/* host mapping of all of guest RAM, low part first */
	uint64_t size;		/* total bytes of RAM */
	uint64_t low_size;	/* RAM below the MMIO gap, at guest address 0 */
	uint64_t high_size;	/* RAM from 4 GiB up */
};

struct vm_error;

int guest_mem_init(struct guest_mem *mem, uint64_t size, struct vm_error *err);
void guest_mem_exit(struct guest_mem *mem);

/* Host pointer to [gpa, gpa + len) when the whole range is RAM in one region, else NULL. */
void *guest_mem_ptr(const struct guest_mem *mem, uint64_t gpa, uint64_t len);

#endif
