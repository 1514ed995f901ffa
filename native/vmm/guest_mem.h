/*
 * Guest physical memory: one memfd-backed mapping, split around the MMIO gap below 4 GiB.
 * Every access the VMM makes on the guest's behalf goes through guest_mem_ptr(), which checks the whole range.
 */
#ifndef SMOL_GUEST_MEM_H
#define SMOL_GUEST_MEM_H

#include <stdint.h>

#define GUEST_MMIO_GAP_START 0xC0000000ULL
#define GUEST_HIGH_START 0x100000000ULL

struct mem_layer;

struct guest_mem {
	int fd;			/* memfd mapped shared, -1 when RAM is a private copy of `layer` (or in unit tests) */
	uint8_t *host;		/* host mapping of all of guest RAM, low part first */
	uint64_t size;		/* total bytes of RAM */
	uint64_t low_size;	/* RAM below the MMIO gap, at guest address 0 */
	uint64_t high_size;	/* RAM from 4 GiB up */
	struct mem_layer *layer;	/* the newest frozen layer (docs/snapshots.md); RAM is a private copy of it */
	uint8_t *vmm_dirty;	/* pages the VMM wrote since `layer` was frozen, one bit each; NULL without a layer */
};

struct vm_error;

int guest_mem_init(struct guest_mem *mem, uint64_t size, struct vm_error *err);
void guest_mem_exit(struct guest_mem *mem);
/* RAM as a private copy of a layer chain, which it references. */
int guest_mem_init_layer(struct guest_mem *mem, struct mem_layer *layer, struct vm_error *err);
/* Page index of a guest-physical address (RAM pages counted low region first), or -1 when it is not RAM. */
int64_t guest_mem_page(const struct guest_mem *mem, uint64_t gpa);

/*
 * Records that the VMM itself wrote [gpa, gpa + len) of guest RAM (KVM's dirty log sees only the guest's writes), so
 * the next checkpoint's diff includes it. Every write into guest RAM after the VM has started must call this.
 */
void guest_mem_mark_dirty(struct guest_mem *mem, uint64_t gpa, uint64_t len);

/* Host pointer to [gpa, gpa + len) when the whole range is RAM in one region, else NULL. */
void *guest_mem_ptr(const struct guest_mem *mem, uint64_t gpa, uint64_t len);

#endif
