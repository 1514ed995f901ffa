/*
 * Freezing guest RAM into memory layers for a checkpoint (docs/snapshots.md, "Memory"): the pages KVM's dirty log
 * and the VMM's own writes marked since the last checkpoint go into a new diff layer; the first time, the VM's memfd
 * itself becomes the full layer.
 */
#define _GNU_SOURCE
#include "error.h"
#include "file_io.h"
#include "internal.h"
#include "mem_layer.h"
#include "snapfile.h"
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

static int dirty_log_take(struct vm *vm, uint8_t *bitmap, struct vm_error *err)
{
	struct guest_mem *mem = &vm->mem;
	uint64_t low_pages = mem->low_size / SNAP_PAGE_SIZE, high_pages = mem->high_size / SNAP_PAGE_SIZE;
	uint64_t slot_pages[2] = { low_pages, high_pages };
	size_t bytes = (size_t)((mem->size / SNAP_PAGE_SIZE + 7) / 8);

	for (uint32_t slot = 0; slot < 2 && slot_pages[slot]; slot++) {
		size_t len = (size_t)((slot_pages[slot] + 63) / 64 * 8), at = slot ? (size_t)(low_pages / 8) : 0;
		uint8_t *log = calloc(1, len);
		struct kvm_dirty_log dl = { .slot = slot };

		if (!log)
			return vm_error_set(err, ENOMEM, "out of memory for the dirty log");
		dl.dirty_bitmap = log;
		if (kvm_ioctl(vm->vm_fd, KVM_GET_DIRTY_LOG, &dl) < 0) {
			free(log);
			return vm_error_set(err, errno, "KVM_GET_DIRTY_LOG: %s", strerror(errno));
		}
		for (size_t i = 0; i < (size_t)(slot_pages[slot] / 8) && at + i < bytes; i++)
			bitmap[at + i] |= log[i];
		free(log);
	}
	for (size_t i = 0; i + 8 <= bytes; i += 8) {	/* RAM is whole MiB: the bitmap is whole words */
		uint64_t *vmm = (uint64_t *)(void *)(mem->vmm_dirty + i), word;

		if (!__atomic_load_n(vmm, __ATOMIC_RELAXED))
			continue;
		word = __atomic_exchange_n(vmm, 0, __ATOMIC_RELAXED);
		for (int k = 0; k < 8; k++)
			bitmap[i + k] |= (uint8_t)(word >> (8 * k));
	}
	return 0;
}

/* snapshot.h */
int memory_freeze(struct vm *vm, struct vm_checkpoint_stats *st, struct vm_error *err)
{
	struct guest_mem *mem = &vm->mem;
	uint64_t pages = mem->size / SNAP_PAGE_SIZE;
	size_t bytes = (size_t)((pages + 7) / 8);
	struct mem_layer *l;
	uint8_t *bitmap, *host;
	int fd;

	if (!mem->layer) {
		fd = fcntl(mem->fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return vm_error_set(err, errno, "cannot freeze guest memory: %s", strerror(errno));
		l = mem_layer_new(fd, MEM_LAYER_FULL, mem->size, 0, NULL, NULL, err);
		if (!l)
			return -1;
		mem->vmm_dirty = calloc(1, bytes);
		host = mem->vmm_dirty ? mem_layer_map(l, err) : NULL;
		if (!host) {
			if (!mem->vmm_dirty)
				vm_error_set(err, ENOMEM, "out of memory for the dirty-page bitmap");
			free(mem->vmm_dirty);
			mem->vmm_dirty = NULL;
			mem_layer_put(l);
			return -1;
		}
		vm_memory_unregister(vm);
		munmap(mem->host, mem->size);
		close(mem->fd);
		mem->fd = -1;
		mem->host = host;
		mem->layer = l;
		st->dirty_pages = pages;
		st->new_layer = 1;
		if (vm_memory_register(vm, 1, err) < 0) {
			vm_end(vm, VM_EXIT_ERROR, 0, "lost guest memory while freezing it: %s", err->msg);
			return -1;
		}
		return 0;
	}

	bitmap = calloc(1, bytes);
	if (!bitmap)
		return vm_error_set(err, ENOMEM, "out of memory for the dirty-page bitmap");
	if (dirty_log_take(vm, bitmap, err) < 0) {
		free(bitmap);
		return -1;
	}
	st->dirty_pages = mem_layer_count(bitmap, pages);
	st->new_layer = st->dirty_pages > 0;
	if (!st->new_layer) {
		free(bitmap);
		return 0;
	}
	fd = memfd_create("smol-guest-ram-diff", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)mem->size) < 0) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		free(bitmap);
		return vm_error_set(err, e, "cannot create a memory layer: %s", strerror(e));
	}
	for (uint64_t p = 0, run; (p = mem_layer_next_run(bitmap, pages, p, &run)) < pages;) {
		int e = -file_pwrite_all(fd, mem->host + p * SNAP_PAGE_SIZE, run * SNAP_PAGE_SIZE, p * SNAP_PAGE_SIZE);

		if (e) {
			close(fd);
			/* The dirty log was consumed: the pages must still count as dirty next time. */
			for (size_t i = 0; i < bytes; i++)
				mem->vmm_dirty[i] |= bitmap[i];
			free(bitmap);
			return vm_error_set(err, e, "cannot copy dirty guest memory into a layer: %s", strerror(e));
		}
		p += run;
	}
	l = mem_layer_new(fd, MEM_LAYER_DIFF, mem->size, 0, bitmap, mem->layer, err);
	free(bitmap);
	if (!l)
		return -1;
	mem_layer_put(mem->layer);
	mem->layer = l;
	mem_layer_flatten_async(l);
	return 0;
}
