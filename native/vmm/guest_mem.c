#define _GNU_SOURCE
#include "guest_mem.h"
#include "error.h"
#include "mem_layer.h"

#include <stdlib.h>

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void split(struct guest_mem *mem, uint64_t size)
{
	mem->size = size;
	mem->low_size = size < GUEST_MMIO_GAP_START ? size : GUEST_MMIO_GAP_START;
	mem->high_size = size - mem->low_size;
}

int guest_mem_init(struct guest_mem *mem, uint64_t size, struct vm_error *err)
{
	memset(mem, 0, sizeof(*mem));
	mem->fd = memfd_create("smol-guest-ram", MFD_CLOEXEC);
	if (mem->fd < 0)
		return vm_error_set(err, errno, "cannot create guest memory: memfd_create: %s", strerror(errno));
	if (ftruncate(mem->fd, (off_t)size) < 0) {
		int e = errno;

		close(mem->fd);
		mem->fd = -1;
		return vm_error_set(err, e, "cannot size guest memory to %llu MiB: %s",
				    (unsigned long long)(size >> 20), strerror(e));
	}
	mem->host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, mem->fd, 0);
	if (mem->host == MAP_FAILED) {
		int e = errno;

		close(mem->fd);
		mem->fd = -1;
		mem->host = NULL;
		return vm_error_set(err, e, "cannot map %llu MiB of guest memory: %s",
				    (unsigned long long)(size >> 20), strerror(e));
	}
	/*
	 * Huge pages where the host gives them to shared memory (transparent_hugepage/shmem_enabled advise, within_size
	 * or always; never, the usual default, leaves 4 KiB pages and this changes nothing). A guest's first touch of
	 * each page of RAM is a fault the host's KVM takes on the VMM's behalf; with 2 MiB pages it takes one where it
	 * took 512, and the nested page tables map 2 MiB at a time. QEMU asks for the same on its RAM (docs/guest.md,
	 * "Boot time against QEMU microvm"). Only a fresh VM's RAM: layers (restore, fork) are copy-on-write, per page.
	 */
	(void)madvise(mem->host, size, MADV_HUGEPAGE);
	split(mem, size);
	return 0;
}

int guest_mem_init_layer(struct guest_mem *mem, struct mem_layer *layer, struct vm_error *err)
{
	memset(mem, 0, sizeof(*mem));
	mem->fd = -1;
	mem->vmm_dirty = calloc(1, (size_t)((layer->mem_size / SNAP_PAGE_SIZE + 7) / 8));
	if (!mem->vmm_dirty)
		return vm_error_set(err, ENOMEM, "out of memory for the dirty-page bitmap");
	mem->host = mem_layer_map(layer, err);
	if (!mem->host) {
		free(mem->vmm_dirty);
		mem->vmm_dirty = NULL;
		return -1;
	}
	mem->layer = mem_layer_get(layer);
	split(mem, layer->mem_size);
	return 0;
}

void guest_mem_exit(struct guest_mem *mem)
{
	if (mem->host && mem->host != MAP_FAILED)
		munmap(mem->host, mem->size);
	if (mem->fd >= 0)
		close(mem->fd);
	mem_layer_put(mem->layer);
	free(mem->vmm_dirty);
	mem->layer = NULL;
	mem->vmm_dirty = NULL;
	mem->host = NULL;
	mem->fd = -1;
}

int64_t guest_mem_page(const struct guest_mem *mem, uint64_t gpa)
{
	if (gpa < mem->low_size)
		return (int64_t)(gpa / SNAP_PAGE_SIZE);
	if (gpa >= GUEST_HIGH_START && gpa - GUEST_HIGH_START < mem->high_size)
		return (int64_t)((mem->low_size + gpa - GUEST_HIGH_START) / SNAP_PAGE_SIZE);
	return -1;
}

void guest_mem_mark_dirty(struct guest_mem *mem, uint64_t gpa, uint64_t len)
{
	if (!mem->vmm_dirty || !len)
		return;
	for (uint64_t a = gpa & ~(SNAP_PAGE_SIZE - 1); a < gpa + len; a += SNAP_PAGE_SIZE) {
		int64_t p = guest_mem_page(mem, a);

		if (p >= 0)
			__atomic_or_fetch(&mem->vmm_dirty[p / 8], (uint8_t)(1u << (p % 8)), __ATOMIC_RELAXED);
	}
}

void *guest_mem_ptr(const struct guest_mem *mem, uint64_t gpa, uint64_t len)
{
	/* Written so that no sum can overflow: compare lengths against what is left of each region. */
	if (gpa < mem->low_size) {
		if (len > mem->low_size - gpa)
			return NULL;
		return mem->host + gpa;
	}
	if (gpa >= GUEST_HIGH_START && gpa - GUEST_HIGH_START < mem->high_size) {
		uint64_t off = gpa - GUEST_HIGH_START;

		if (len > mem->high_size - off)
			return NULL;
		return mem->host + mem->low_size + off;
	}
	return NULL;
}
