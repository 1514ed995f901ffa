/* Loading a kernel (ELF64 vmlinux or bzImage) and an initrd into guest memory. Files are untrusted input. */
#ifndef SMOL_LOADER_H
#define SMOL_LOADER_H

#include <stdint.h>

struct guest_mem;
struct vm_error;

#define LOADER_MIN_ADDR 0x100000ULL	/* segments below 1 MiB would overlap the VMM's boot structures */

enum kernel_kind { KERNEL_ELF64, KERNEL_BZIMAGE };

struct kernel_image {
	enum kernel_kind kind;
	uint64_t entry;		/* guest physical address of the 64-bit entry point */
	uint64_t end;		/* first guest address above everything the kernel occupies */
	/* bzImage only: the setup header as found in the file, to be copied into the zero page at 0x1f1 */
	uint8_t setup_header[0x80];
	uint32_t setup_header_len;
	uint32_t initrd_addr_max;
};

/* Loads the kernel from an open file. `name` is only used in messages. */
int loader_load_kernel_fd(struct guest_mem *mem, int fd, const char *name, struct kernel_image *out,
			  struct vm_error *err);
int loader_load_kernel(struct guest_mem *mem, const char *path, struct kernel_image *out, struct vm_error *err);

/* Places the initrd as high as it fits below `max_addr` and above `min_addr`, page-aligned. */
int loader_load_initrd(struct guest_mem *mem, const char *path, uint64_t min_addr, uint64_t max_addr,
		       uint64_t *addr, uint64_t *size, struct vm_error *err);

#endif
